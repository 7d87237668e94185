"""The generated benchmark models (benchmarks/generated_models.py) against onnxruntime.

Each model family is built, checked with onnx.checker, imported with from_onnx, built at
opt_level 3 and run on its seeded random inputs; every output must match onnxruntime's. The
default run takes reduced-size variants of every family (same graph structure, small hidden
sizes); `pytest -m slow tests/models/test_generated_models.py` runs the benchmark sizes too.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import runtime
from benchmarks import generated_models as gm
from compiler import relay, transform
from runtime import graph_executor

# outputs agree to a few ulps of float32 accumulation; tighter than the benchmark's 1e-3/1e-4
RTOL, ATOL = 1e-4, 1e-5

SMALL_TRANSFORMER = {"seq": 16, "hidden": 64, "heads": 4}
SMALL_MOBILENET = {"size": 32, "stem": 8, "blocks": ((1, 8, 1), (6, 16, 2), (6, 16, 1)),
                   "head": 64, "classes": 10}
SMALL_RNN = {"seq": 8, "input_size": 16, "hidden": 32}

# reduced variants, one or more per family, all in the default run
REDUCED = {
    "bert_layernorm_op": lambda: gm.bert_encoder(**SMALL_TRANSFORMER, ffn=256, layers=2),
    "bert_layernorm_decomposed": lambda: gm.bert_encoder(**SMALL_TRANSFORMER, ffn=256, layers=1,
                                                         decomposed_ln=True),
    "gpt2_decomposed_ln": lambda: gm.gpt2_decoder(**SMALL_TRANSFORMER, layers=2),
    "gpt2_layernorm_op": lambda: gm.gpt2_decoder(**SMALL_TRANSFORMER, decomposed_ln=False),
    "mobilenet_v2": lambda: gm.mobilenet_v2(**SMALL_MOBILENET),
    "unet_linear": lambda: gm.unet(size=32, base=4),
    "unet_nearest": lambda: gm.unet(size=32, base=4, resize_mode="nearest"),
    "lstm": lambda: gm.recurrent("LSTM", **SMALL_RNN),
    "lstm_batch2": lambda: gm.recurrent("LSTM", **SMALL_RNN, batch=2),
    "gru_linear_before_reset": lambda: gm.recurrent("GRU", **SMALL_RNN),
    "gru_reset_before_linear": lambda: gm.recurrent("GRU", **SMALL_RNN, linear_before_reset=0),
    "mlp_b1": lambda: gm.mlp(batch=1, sizes=(64, 48, 32, 10)),
    "mlp_b32": lambda: gm.mlp(batch=32, sizes=(64, 48, 32, 10)),
    "resnet": lambda: gm.resnet(size=32, widths=(8, 16, 16, 16), classes=10),
    "lenet": lambda: gm.lenet(batch=2),
}
# benchmark sizes that build and run in well under a second stay in the default run
CHEAP_FULL = ("gen_lstm", "gen_gru", "gen_mlp_b1", "gen_mlp_b32", "gen_lenet_b8")


def _onnxruntime(model, feeds) -> list[np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _relayjit(model) -> graph_executor.GraphModule:
    mod, params = relay.frontend.from_onnx(model)
    with transform.PassContext(opt_level=3):
        factory = relay.build(mod, target="llvm", params=params)
    return graph_executor.GraphModule(factory["default"](runtime.cpu()))


def _run(gmod: graph_executor.GraphModule, feeds) -> list[np.ndarray]:
    gmod.run(**feeds)
    return [gmod.get_output(i).numpy() for i in range(gmod.get_num_outputs())]


def _check_against_onnxruntime(model, feeds) -> None:
    onnx.checker.check_model(model, full_check=True)
    expected = _onnxruntime(model, feeds)
    outputs = _run(_relayjit(model), feeds)
    assert len(outputs) == len(expected)
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        assert out.shape == ref.shape and out.dtype == ref.dtype, (i, out.shape, ref.shape)
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL, err_msg=f"output {i}")


@pytest.mark.parametrize("variant", list(REDUCED))
def test_reduced_generated_model_matches_onnxruntime(variant):
    model, feeds = REDUCED[variant]()
    _check_against_onnxruntime(model, feeds)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if n in CHEAP_FULL else pytest.mark.slow)
    for n in gm.GENERATED_MODELS])
def test_generated_model_matches_onnxruntime(name):
    model, feeds = gm.build(name)
    _check_against_onnxruntime(model, feeds)


DYNAMIC_REDUCED = {
    "gen_bert_encoder_dynamic": (
        lambda: gm.bert_encoder_dynamic(hidden=64, heads=4, ffn=256, vocab=100, max_positions=64),
        lambda shape: gm.bert_feeds(**shape, vocab=100),
        [{"batch": 1, "sequence": 8}, {"batch": 3, "sequence": 5}, {"batch": 1, "sequence": 8}]),
    "gen_mobilenet_v2_dynamic": (
        lambda: gm.mobilenet_v2(**SMALL_MOBILENET, batch="batch")[0],
        lambda shape: gm.image_feeds(**shape, size=32), [{"batch": 1}, {"batch": 3}]),
}


@pytest.mark.parametrize("name", list(DYNAMIC_REDUCED))
def test_dynamic_model_runs_through_compiler_load_at_each_shape(name, tmp_path):
    """The dynamic-axes models of benchmarks/models.py --dynamic, reduced: compiler.load takes
    every shape, each built once, every output as onnxruntime's."""
    import compiler
    build, feeds_for, shapes = DYNAMIC_REDUCED[name]
    assert set(gm.DYNAMIC_MODELS) == set(DYNAMIC_REDUCED)
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(build(), path)
    sess = compiler.load(path)
    for shape in shapes:
        feeds = feeds_for(shape)
        for out, ref in zip(sess.run(None, feeds), _onnxruntime(onnx.load(path), feeds)):
            assert out.shape == ref.shape
            np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
    assert sess.model.builds == len({tuple(s.items()) for s in shapes})


def test_every_family_has_a_reduced_variant():
    families = {"bert", "gpt2", "mobilenet", "unet", "lstm", "gru", "mlp", "resnet18", "lenet"}
    assert {n.removeprefix("gen_").split("_")[0] for n in gm.GENERATED_MODELS} == families
    assert {v.split("_")[0] for v in REDUCED} == families - {"resnet18"} | {"resnet"}


def test_builders_are_deterministic():
    (m1, f1), (m2, f2) = gm.mlp(sizes=(8, 4, 2)), gm.mlp(sizes=(8, 4, 2))
    assert m1.SerializeToString() == m2.SerializeToString()
    assert f1.keys() == f2.keys() and all(np.array_equal(f1[k], f2[k]) for k in f1)
    m3, _ = gm.mlp(sizes=(8, 4, 2), seed=1)
    assert m3.SerializeToString() != m1.SerializeToString()


def test_gpt2_decoder_is_causal():
    """The additive mask really hides later tokens: perturbing the last one changes only it."""
    model, feeds = gm.gpt2_decoder(**SMALL_TRANSFORMER)
    gmod = _relayjit(model)
    base = _run(gmod, feeds)[0]
    x = feeds["hidden_states"].copy()
    # random, not a constant shift: LayerNorm would remove a constant from every row
    x[:, -1] += np.random.default_rng(1).standard_normal(x.shape[-1]).astype(np.float32)
    moved = _run(gmod, {"hidden_states": x})[0]
    np.testing.assert_allclose(moved[:, :-1], base[:, :-1], rtol=0, atol=1e-6)
    assert np.abs(moved[:, -1] - base[:, -1]).max() > 1e-2


def test_write_models_round_trips(tmp_path):
    paths = gm.write_models(str(tmp_path), ["gen_mlp_b1"])
    model = onnx.load(paths["gen_mlp_b1"])
    onnx.checker.check_model(model, full_check=True)
    with np.load(tmp_path / "gen_mlp_b1_inputs.npz") as data:
        feeds = dict(data)
    _, expected_feeds = gm.build("gen_mlp_b1")
    assert np.array_equal(feeds["input"], expected_feeds["input"])
    with pytest.raises(ValueError, match="unknown generated model"):
        gm.build("gen_nope")


def test_benchmark_runs_a_generated_model(tmp_path, keep_thread_count):
    """benchmarks/models.py's bench_model on a generated model: given feeds, all outputs checked."""
    from benchmarks.models import bench_model
    path = gm.write_models(str(tmp_path), ["gen_gru"])["gen_gru"]
    _, feeds = gm.build("gen_gru")
    row = bench_model(path, repeat=1, number=1, threads=[1], feeds=feeds, atol=1e-4)
    assert row["model"] == "gen_gru" and row["match"], row
    assert row["ours_ms_1"] > 0 and row["ort_ms_1"] > 0
