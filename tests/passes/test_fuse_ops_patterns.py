"""FuseOps behaviours ported from TVM's test_pass_fuse_ops.py: softmax is OUT_ELEMWISE_FUSABLE
(the elementwise ops after it join its function) and annotation.stop_fusion is a boundary."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.relay import transform


def run_opt_pass(expr, opt_pass):
    mod = tvm.transform.Sequential([opt_pass])(tvm.IRModule.from_expr(expr))
    return mod["main"]


def prim(func):
    return func.with_attr("Primitive", 1)


def fuse2(mod):
    mod = transform.InferType()(mod)
    return transform.FuseOps(fuse_opt_level=2)(mod)


def _softmax_np(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_fuse_softmax():
    channel_size = 16

    def before():
        x = relay.var("x", shape=(16, channel_size))
        out = relay.cast(relay.nn.softmax(x), "float16")
        return relay.Function([x], out)

    def expected():
        p0 = relay.var("p0", shape=(16, channel_size))
        out = relay.cast(relay.nn.softmax(p0), "float16")
        f0 = prim(relay.Function([p0], out))
        x = relay.var("x", shape=(16, channel_size))
        return relay.Function([x], relay.Call(f0, [x]))

    m = fuse2(tvm.IRModule.from_expr(before()))
    tvm.assert_structural_equal(m["main"], run_opt_pass(expected(), transform.InferType()))

    inp = np.random.randn(16, channel_size).astype("float32")
    result = relay.create_executor("graph", mod=m).evaluate()(inp).numpy()
    np.testing.assert_allclose(result, _softmax_np(inp).astype("float16"), rtol=1e-3, atol=1e-3)


def test_log_softmax_takes_a_broadcast_epilogue():
    x = relay.var("x", shape=(4, 8))
    b = relay.var("b", shape=(8,))
    out = relay.nn.relu(relay.add(relay.nn.log_softmax(x), b))
    m = fuse2(tvm.IRModule.from_expr(relay.Function([x, b], out)))
    call = m["main"].body
    assert isinstance(call.op, relay.Function) and call.op.is_primitive
    assert list(call.args) == list(m["main"].params)
    xv = np.random.randn(4, 8).astype("float32")
    bv = np.random.randn(8).astype("float32")
    got = relay.create_executor("graph", mod=m).evaluate()(xv, bv).numpy()
    ref = np.maximum(np.log(_softmax_np(xv.astype("float64"))) + bv, 0)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_softmax_does_not_absorb_its_producer():
    # the add before the softmax stays in its own function, as before a conv2d
    x = relay.var("x", shape=(4, 8))
    out = relay.nn.softmax(relay.add(x, relay.const(1.0)))
    m = fuse2(tvm.IRModule.from_expr(relay.Function([x], out)))
    outer = m["main"].body
    assert outer.op.body.op.name == "nn.softmax"
    assert outer.args[0].op.body.op.name == "add"


def test_stop_fusion():
    def before():
        x = relay.var("x", shape=(10, 20))
        y = relay.add(x, relay.const(1, "float32"))
        y = relay.annotation.stop_fusion(y)
        z = relay.exp(y)
        return relay.Function([x], z)

    def expected():
        x = relay.var("p", shape=(10, 20))
        f1 = prim(relay.Function([x], relay.add(x, relay.const(1, "float32"))))
        x = relay.var("p", shape=(10, 20))
        f2 = prim(relay.Function([x], relay.exp(x)))
        x = relay.var("x", shape=(10, 20))
        return relay.Function([x], relay.Call(f2, [relay.Call(f1, [x])]))

    zz = run_opt_pass(before(), transform.FuseOps())
    tvm.assert_structural_equal(zz, run_opt_pass(expected(), transform.InferType()))


@pytest.mark.parametrize("kind", ["graph", "debug"])
def test_stop_fusion_keeps_the_value(kind):
    x = relay.var("x", shape=(3, 5))
    y = relay.exp(relay.annotation.stop_fusion(relay.add(x, relay.const(1.0))))
    xv = np.random.randn(3, 5).astype("float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    got = relay.create_executor(kind, mod=mod).evaluate()(xv).numpy()
    np.testing.assert_allclose(got, np.exp(xv + 1), rtol=1e-6)


def test_stop_fusion_between_conv_and_its_epilogue():
    x = relay.var("x", shape=(1, 4, 6, 6))
    w = relay.var("w", shape=(4, 4, 3, 3))
    conv = relay.nn.conv2d(x, w, padding=(1, 1))
    out = relay.nn.relu(relay.annotation.stop_fusion(conv))
    m = fuse2(tvm.IRModule.from_expr(relay.Function([x, w], out)))
    outer = m["main"].body
    assert outer.op.body.op.name == "nn.relu"
    assert outer.args[0].op.body.op.name == "nn.conv2d"
    assert "stop_fusion" not in str(m)
