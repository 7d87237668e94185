"""AlterOpLayout: constant conv2d/dense weights become pre-packed, folded at compile time."""
from __future__ import annotations

import json

import numpy as np

import compiler as tvm
import runtime
from compiler import relay
from compiler.ir.expr import Call, Constant
from compiler.ir.traversal import post_order
from compiler.passes.alter_op_layout import AlterOpLayout
from compiler.relay import transform
from runtime import graph_executor

RNG = np.random.default_rng(3)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _ops(expr):
    return [n.op.name for n in post_order(expr) if type(n) is Call and hasattr(n.op, "name")]


def _alter(func):
    mod = transform.InferType()(tvm.IRModule.from_expr(func))
    return AlterOpLayout()(mod)["main"]


def test_registered_at_opt_level_3():
    p = AlterOpLayout()
    assert p.info.name == "AlterOpLayout" and p.info.opt_level == 3
    assert tvm.transform.get_pass("AlterOpLayout").info.name == "AlterOpLayout"


def test_constant_weights_are_packed():
    x = relay.var("x", shape=(1, 8, 10, 10))
    conv = relay.nn.conv2d(x, relay.const(_f32(16, 8, 3, 3)), padding=(1, 1))
    d = relay.nn.dense(relay.reshape(conv, (1, -1)), relay.const(_f32(10, 1600)))
    out = _alter(relay.Function([x], d))
    ops = _ops(out)
    assert "nn.conv2d" not in ops and "nn.dense" not in ops
    for anchor, pack in [("nn.contrib_conv2d_packed", "nn.contrib_conv2d_weight_pack"),
                         ("nn.contrib_dense_pack", "nn.contrib_dense_weight_pack")]:
        call = next(n for n in post_order(out) if type(n) is Call and
                    getattr(n.op, "name", "") == anchor)
        assert call.args[1].op.name == pack and type(call.args[1].args[0]) is Constant


def test_foldable_weight_expression_is_packed():
    """A weight computed from constants only (transpose of an initializer) also qualifies."""
    x = relay.var("x", shape=(4, 20))
    w = relay.transpose(relay.const(_f32(20, 12)))
    out = _alter(relay.Function([x], relay.nn.dense(x, w)))
    assert "nn.contrib_dense_pack" in _ops(out)


def test_left_alone():
    x = relay.var("x", shape=(1, 8, 10, 10))
    w = relay.var("w", shape=(16, 8, 3, 3))
    dw = relay.const(_f32(8, 1, 3, 3))
    xi = relay.var("xi", shape=(1, 8, 10, 10), dtype="int32")
    cases = [relay.nn.conv2d(x, w),                                 # weight is an input
             relay.nn.conv2d(x, dw, groups=8),                      # depthwise
             relay.nn.conv2d(xi, relay.const(np.ones((4, 8, 1, 1), "int32")))]  # int32
    for body in cases:
        func = transform.InferType()(tvm.IRModule.from_expr(
            relay.Function(relay.analysis.free_vars(body), body)))["main"]
        assert tvm.ir.structural_equal(_alter(func), func)


def test_build_folds_packing_and_matches():
    xs = (1, 8, 12, 12)
    w, b, wd = _f32(24, 8, 3, 3), _f32(24), _f32(10, 24 * 36)
    x = relay.var("x", shape=xs)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, relay.const(w), strides=(2, 2),
                                                        padding=(1, 1)), relay.const(b)))
    y = relay.nn.dense(relay.reshape(y, (1, -1)), relay.const(wd))
    func = relay.Function([x], y)
    xa = _f32(*xs)
    outs = {}
    for level in (2, 3):
        with tvm.transform.PassContext(opt_level=level):
            lib = relay.build(tvm.IRModule.from_expr(func), target="llvm")
        kernels = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
                   if n["op"] == "tvm_op"]
        packed = any("packed" in k or "dense_pack" in k for k in kernels)
        assert packed, kernels  # opt_level 2 packs too (PackConstantWeights)
        assert not any("weight_pack" in k for k in kernels), kernels  # folded at compile time
        gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
        gm.run(x=xa)
        outs[level] = gm.get_output(0).numpy()
    np.testing.assert_allclose(outs[3], outs[2], rtol=1e-4, atol=1e-4)


def _kernel_names(opt_level, disabled=()):
    x = relay.var("x", shape=(1, 8, 10, 10))
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(_f32(16, 8, 3, 3)), padding=(1, 1)))
    out = relay.nn.dense(relay.reshape(y, (1, -1)), relay.const(_f32(5, 1600)))
    mod = tvm.IRModule.from_expr(relay.Function([x], out))
    if opt_level is None:  # no PassContext: TVM's default, opt_level 2
        lib = relay.build(mod, target="llvm")
    else:
        with tvm.transform.PassContext(opt_level=opt_level, disabled_pass=list(disabled)):
            lib = relay.build(mod, target="llvm")
    nodes = json.loads(lib.get_graph_json())["nodes"]
    return [n["attrs"]["func_name"] for n in nodes if n["op"] == "tvm_op"]


def test_default_build_packs_constant_weights_like_opt_level_3():
    packed = _kernel_names(3)
    assert any("conv2d_packed" in k for k in packed) and any("dense_pack" in k for k in packed)
    assert _kernel_names(None) == packed
    assert _kernel_names(2) == packed


def test_packing_follows_alter_op_layout_when_disabled_or_below_opt_level_2():
    for names in (_kernel_names(2, ["AlterOpLayout"]), _kernel_names(3, ["AlterOpLayout"]),
                  _kernel_names(1)):
        assert not any("packed" in k or "dense_pack" in k for k in names), names


def test_shared_weight_is_packed_and_stored_once():
    """An unrolled recurrence slices the same constant R at every step: the slices and their
    packings become one node each, so the params hold one packed R, not one per step (32 MiB
    of copies made an LSTM's every step read its weights from memory)."""
    steps, hidden = 6, 16
    r = relay.const(_f32(3 * hidden, hidden))
    h = relay.var("h", shape=(1, hidden))
    x = h
    for _ in range(steps):
        gates = relay.split(r, 3, axis=0)  # a new split of R per step, as the frontend makes
        x = relay.tanh(relay.nn.dense(x, gates[0]) + relay.nn.dense(x, gates[2]))
    func = relay.Function([h], x)
    out = _alter(func)
    packs = [n for n in post_order(out) if type(n) is Call and
             getattr(n.op, "name", "") == "nn.contrib_dense_weight_pack"]
    assert len(packs) == 2  # R's first and last third, each packed once
    ha = _f32(1, hidden)
    results = []
    for level in (0, 2):
        with tvm.transform.PassContext(opt_level=level):
            lib = relay.build(tvm.IRModule.from_expr(func), target="llvm")
        if level == 2:
            assert len(lib.get_params()) == 2, sorted(lib.get_params())
        gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
        gm.run(h=ha)
        results.append(gm.get_output(0).numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-5)
