"""FakeQuantizationToInteger, in TVM's test styles: a fake-quantized graph against its rewrite
(integer ops only between the quantizes; the same values as the float graph), before/expected
forms, regions left alone, and relay.build running it by default."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.errors import CompilerError
from compiler.ir import assert_structural_equal
from compiler.ir.traversal import post_order
from compiler.op.interpreter import evaluate
from compiler.transform import PassContext
from tests.passes._helpers import run_opt_pass

RNG = np.random.default_rng(31)
FLOAT_ANCHORS = {"nn.conv2d", "nn.conv2d_transpose", "nn.dense", "nn.batch_matmul", "add",
                 "subtract", "multiply", "concatenate", "nn.avg_pool2d",
                 "nn.global_avg_pool2d", "sigmoid", "nn.softmax", "tanh"}


def c(value, dtype="float32"):
    return relay.const(np.asarray(value, dtype))


def deq(x, scale, zp=0, axis=-1):
    return relay.qnn.op.dequantize(x, c(scale), c(zp, "int32"), axis=axis)


def quant(x, scale, zp=0, dtype="int8", axis=-1):
    return relay.qnn.op.quantize(x, c(scale), c(zp, "int32"), axis=axis, out_dtype=dtype)


def ops_of(expr) -> list:
    return [n.op.name for n in post_order(expr) if isinstance(n, relay.Call)
            and isinstance(n.op, relay.Op)]


def _inputs(func):
    out = []
    for p in func.params:
        ty = p.type_annotation
        info = np.iinfo(ty.dtype)
        out.append(RNG.integers(info.min, info.max, ty.shape, dtype=ty.dtype, endpoint=True))
    return out


def compare_fq_to_int(body, allowed_steps=0, share=0.0):
    """The float graph and its rewrite agree (up to allowed_steps in the final integer
    output, on at most `share` of the elements); the rewrite has no float anchor op left."""
    func = relay.Function(relay.analysis.free_vars(body), body)
    before = run_opt_pass(func, relay.transform.InferType())
    after = run_opt_pass(func, relay.transform.FakeQuantizationToInteger(hard_fail=True))
    left = FLOAT_ANCHORS & set(ops_of(after))
    assert not left, f"float ops left after the rewrite: {left}\n{after}"
    args = _inputs(func)
    want, got = evaluate(before, args), evaluate(after, args)
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() <= allowed_steps and (diff > 0).mean() <= share, (diff.max(),
                                                                        (diff > 0).mean())
    from runtime import cpu, graph_executor
    module = graph_executor.GraphModule(relay.build(after, target="llvm")["default"](cpu(0)))
    module.run(**{p.name_hint: a for p, a in zip(after.params, args)})
    np.testing.assert_array_equal(module.get_output(0).numpy(), got)
    return after


def _v(name, shape, dtype="int8"):
    return relay.var(name, shape=shape, dtype=dtype)


@pytest.mark.parametrize("per_channel", [False, True])
def test_conv2d_bias_relu(per_channel):
    x, w = _v("x", (1, 3, 9, 9), "uint8"), _v("w", (5, 3, 3, 3))
    w_scale = np.linspace(0.01, 0.05, 5).astype("f4") if per_channel else np.float32(0.02)
    bias = deq(c(RNG.integers(-300, 300, 5), "int32"), np.float32(0.1) * w_scale,
               np.zeros(5, "i4") if per_channel else 0, axis=0)
    conv = relay.nn.conv2d(deq(x, 0.1, 128), deq(w, w_scale, np.zeros(5, "i4")
                                                 if per_channel else 0, axis=0),
                           padding=(1, 1), strides=(2, 1))
    body = quant(relay.nn.relu(relay.nn.bias_add(conv, bias)), 0.3, 0, "uint8")
    after = compare_fq_to_int(body)
    assert {"qnn.conv2d", "qnn.requantize"} <= set(ops_of(after))


def test_before_and_expected():
    x, w = _v("x", (1, 3, 4, 4), "uint8"), _v("w", (2, 3, 1, 1))

    def before():
        conv = relay.nn.conv2d(deq(x, 0.5, 128), deq(w, 0.25))
        return relay.Function([x, w], quant(relay.nn.relu(conv), 0.75, 0, "uint8"))

    def expected():
        conv = relay.qnn.op.conv2d(x, w, c(128, "int32"), c(0, "int32"), c(0.5), c(0.25),
                                   kernel_size=None, channels=None)
        relu = relay.maximum(conv, relay.const(np.int32(0)))
        out = relay.qnn.op.requantize(relu, c(0.125), c(0, "int32"), c(0.75), c(0, "int32"),
                                      rounding="TONEAREST_EVEN", compute_dtype="float32",
                                      out_dtype="uint8")
        return relay.Function([x, w], out)

    got = run_opt_pass(before(), relay.transform.FakeQuantizationToInteger())
    assert_structural_equal(got, run_opt_pass(expected(), relay.transform.InferType()))


def test_dense_and_batch_matmul():
    x, w = _v("x", (3, 16)), _v("w", (6, 16))
    compare_fq_to_int(quant(relay.nn.dense(deq(x, 0.1, 2), deq(w, np.linspace(
        0.01, 0.02, 6).astype("f4"), np.zeros(6, "i4"), axis=0)), 0.4, -3))
    a, b = _v("a", (2, 3, 8)), _v("b", (2, 5, 8))
    compare_fq_to_int(quant(relay.nn.batch_matmul(deq(a, 0.1), deq(b, 0.2)), 0.7, 1))


def test_conv2d_transpose():
    x, w = _v("x", (1, 4, 5, 5)), _v("w", (4, 3, 3, 3))
    # the float graph rounds its float32 sums: near ties a result may move by one step
    compare_fq_to_int(quant(relay.nn.conv2d_transpose(deq(x, 0.1, 1), deq(w, 0.05),
                                                      strides=(2, 2), padding=(1, 1)), 0.2),
                      allowed_steps=1, share=0.02)


@pytest.mark.parametrize("op", [relay.add, relay.subtract, relay.multiply])
def test_binary_ops_match_the_float_graph(op):
    a, b = _v("a", (2, 8), "uint8"), _v("b", (8,), "uint8")
    compare_fq_to_int(quant(op(deq(a, 0.02, 120), deq(b, 0.03, 130)), 0.05, 128, "uint8"))


def test_binary_op_with_a_float_constant_and_scalar_multiply():
    a = _v("a", (2, 8))
    after = compare_fq_to_int(quant(relay.multiply(deq(a, 0.02, 3), c(0.25)), 0.005, 3))
    assert "qnn.mul" not in ops_of(after)  # a positive scalar only rescales
    compare_fq_to_int(quant(relay.add(deq(a, 0.02, 3), c(np.linspace(-1, 1, 8))), 0.03),
                      allowed_steps=1, share=0.2)


def test_concatenate_pooling_and_data_movement():
    x, y = _v("x", (1, 4, 6, 6)), _v("y", (1, 2, 6, 6))
    body = relay.concatenate([deq(x, 0.1, 1), deq(y, 0.2, -2)], axis=1)
    body = relay.nn.max_pool2d(body, (2, 2), (2, 2))
    body = relay.transpose(relay.reshape(body, (1, 6, 9)), (0, 2, 1))
    body = relay.strided_slice(relay.expand_dims(body, 0), [0, 0, 1], [1, 1, 8])
    compare_fq_to_int(quant(body, 0.1, 1))
    compare_fq_to_int(quant(relay.nn.avg_pool2d(deq(x, 0.1, 1), (3, 3), (2, 2), padding=(1, 1)),
                            0.05, 2))
    compare_fq_to_int(quant(relay.nn.global_avg_pool2d(deq(x, 0.1, 1)), 0.02, 0))


def test_clip_pad_and_activations():
    x = _v("x", (2, 3, 5, 5))
    compare_fq_to_int(quant(relay.clip(deq(x, 0.05, 3), 0.0, 2.0), 0.05, 3))
    compare_fq_to_int(quant(relay.nn.pad(deq(x, 0.05, 3), ((0, 0), (0, 0), (1, 2), (2, 1)),
                                         pad_value=c(0.5)), 0.05, 3))
    for make in (relay.sigmoid, relay.tanh, lambda v: relay.nn.softmax(v, axis=1)):
        compare_fq_to_int(quant(make(deq(x, 0.05, 3)), 1 / 128, -128), allowed_steps=1,
                          share=0.05)


def test_regions_without_a_rule_or_a_dequantize_stay_float():
    x = relay.var("x", shape=(2, 4), dtype="float32")
    q = _v("q", (2, 4))
    func = relay.Function([q], quant(relay.nn.layer_norm(deq(q, 0.1), c(np.ones(4)),
                                                          c(np.zeros(4))), 0.1))
    after = run_opt_pass(func, relay.transform.FakeQuantizationToInteger())
    assert "nn.layer_norm" in ops_of(after) and "qnn.dequantize" in ops_of(after)
    with pytest.raises(CompilerError, match=r"no rewrite rule for \['nn.layer_norm'\]"):
        run_opt_pass(func, relay.transform.FakeQuantizationToInteger(hard_fail=True))
    plain = relay.Function([x], quant(relay.nn.relu(x), 0.1))
    assert ops_of(run_opt_pass(plain, relay.transform.FakeQuantizationToInteger())) == \
        ["nn.relu", "qnn.quantize"]


def test_relay_build_runs_it_by_default_and_a_config_turns_it_off():
    from compiler.driver.build import optimize
    x, w = _v("x", (1, 3, 6, 6), "uint8"), _v("w", (4, 3, 3, 3))
    body = relay.qnn.op.dequantize(quant(relay.nn.conv2d(deq(x, 0.1, 128), deq(w, 0.02)),
                                         0.2), c(0.2), c(0, "int32"))
    mod = relay.IRModule.from_expr(relay.Function([x, w], body))

    def fused_ops(m):
        return {o for f in post_order(m["main"]) if isinstance(f, relay.Function)
                for o in ops_of(f.body)}
    assert "qnn.conv2d" in fused_ops(optimize(mod)) and "nn.conv2d" not in fused_ops(
        optimize(mod))
    with PassContext(config={"relayjit.fake_quantization_to_integer": False}):
        assert "nn.conv2d" in fused_ops(optimize(mod))


def test_use_qat_is_refused():
    with pytest.raises(CompilerError, match=r"use_qat=True\) is not supported"):
        relay.transform.FakeQuantizationToInteger(use_qat=True)
