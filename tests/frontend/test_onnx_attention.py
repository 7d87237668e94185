"""Attention / LinearAttention / RotaryEmbedding / RMSNormalization converters vs onnx.reference."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tests.onnx_conformance.harness import EXECUTORS, compare

_TYPES = {"float32": TensorProto.FLOAT, "bool": TensorProto.BOOL, "int64": TensorProto.INT64}


def _model(op_type: str, inputs: dict, n_out: int, opset: int, **attrs):
    names = [n if v is not None else "" for n, v in inputs.items()]
    node = helper.make_node(op_type, names, [f"y{i}" for i in range(n_out)], **attrs)
    ins = [helper.make_tensor_value_info(n, _TYPES[v.dtype.name], v.shape)
           for n, v in inputs.items() if v is not None]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None)
            for i in range(n_out)]
    graph = helper.make_graph([node], "g", ins, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds: dict, executor: str) -> list:
    from compiler.frontend import from_onnx
    mod, params = from_onnx(model)
    got = EXECUTORS[executor](mod, params, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert compare(w, g) == "", compare(w, g)
    return got


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype("float32")


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"scale": 0.3, "softcap": 1.5},
                                   {"qk_matmul_output_mode": 2}, {"qk_matmul_output_mode": 3}])
def test_attention_4d_gqa_with_past_and_mask(executor, attrs):
    feeds = {"Q": _rand(1, 4, 3, 8, seed=1), "K": _rand(1, 2, 3, 8, seed=2),
             "V": _rand(1, 2, 3, 6, seed=3), "attn_mask": _rand(3, 5, seed=4),
             "past_key": _rand(1, 2, 2, 8, seed=5), "past_value": _rand(1, 2, 2, 6, seed=6)}
    got = _check(_model("Attention", feeds, 4, 23, **attrs), feeds, executor)
    assert got[1].shape == (1, 2, 5, 8) and got[0].shape == (1, 4, 3, 6)


@pytest.mark.parametrize("executor", ["debug", "graph"])
def test_attention_3d_fully_masked_row_is_zero_not_nan(executor):
    feeds = {"Q": _rand(1, 2, 8), "K": _rand(1, 3, 8, seed=1), "V": _rand(1, 3, 8, seed=2),
             "attn_mask": np.array([[True, False, True], [False, False, False]])}
    got = _check(_model("Attention", feeds, 1, 23, q_num_heads=2, kv_num_heads=2), feeds,
                 executor)
    assert not np.isnan(got[0]).any() and np.all(got[0][:, 1] == 0)


@pytest.mark.parametrize("executor", ["debug", "graph"])
def test_attention_nonpad_kv_seqlen_is_a_runtime_input(executor):
    feeds = {"Q": _rand(2, 2, 2, 4), "K": _rand(2, 2, 5, 4, seed=1),
             "V": _rand(2, 2, 5, 4, seed=2), "attn_mask": None, "past_key": None,
             "past_value": None, "nonpad_kv_seqlen": np.array([3, 5], "int64")}
    model = _model("Attention", feeds, 1, 24, is_causal=1)
    feeds = {k: v for k, v in feeds.items() if v is not None}
    from compiler.frontend import from_onnx
    mod, params = from_onnx(model)
    assert "nonpad_kv_seqlen" in [p.name_hint for p in mod["main"].params]
    _check(model, feeds, executor)


def test_attention_3d_without_head_counts_is_a_clear_error():
    from compiler.frontend import from_onnx
    feeds = {"Q": _rand(1, 2, 8), "K": _rand(1, 3, 8), "V": _rand(1, 3, 8)}
    with pytest.raises(Exception, match="q_num_heads and kv_num_heads"):
        from_onnx(_model("Attention", feeds, 1, 23))


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_update_rules(executor, rule):
    feeds = {"query": _rand(1, 3, 8), "key": _rand(1, 3, 4, seed=1),
             "value": _rand(1, 3, 4, seed=2), "past_state": _rand(1, 1, 4, 4, seed=3)}
    feeds["decay"] = -np.abs(_rand(1, 3, 4, seed=4)) if "gated" in rule else None
    feeds["beta"] = np.abs(_rand(1, 3, 1, seed=5)) if "delta" in rule else None
    model = _model("LinearAttention", feeds, 2, 27, q_num_heads=2, kv_num_heads=1,
                   update_rule=rule)
    _check(model, {k: v for k, v in feeds.items() if v is not None}, executor)


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_partial_dim(executor, interleaved):
    feeds = {"X": _rand(2, 2, 3, 8), "cos_cache": _rand(6, 2, seed=1),
             "sin_cache": _rand(6, 2, seed=2), "position_ids": np.array([[0, 1, 2], [3, 4, 5]])}
    _check(_model("RotaryEmbedding", feeds, 1, 23, interleaved=interleaved,
                  rotary_embedding_dim=4), feeds, executor)


@pytest.mark.parametrize("executor", ["debug", "graph"])
def test_rms_normalization_over_trailing_axes(executor):
    feeds = {"X": _rand(2, 3, 4), "scale": _rand(3, 4, seed=1)}
    _check(_model("RMSNormalization", feeds, 1, 23, axis=1, epsilon=1e-3), feeds, executor)
