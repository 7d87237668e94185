"""FoldScaleAxis: per-channel multiplies after conv2d / dense fold into constant weights."""
from __future__ import annotations

import numpy as np

import compiler as tvm
from compiler import relay
from compiler.op.interpreter import evaluate
from compiler.ir import assert_structural_equal
from compiler.passes.fold_constant import FoldConstant
from compiler.passes.fold_scale_axis import FoldScaleAxis
from compiler.transform.pass_infra import InferType
from compiler.passes.simplify_inference import SimplifyInference
from compiler.transform import PassContext, Sequential

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def run(expr, *passes):
    mod = tvm.IRModule.from_expr(expr)
    for p in (InferType(),) + passes:
        mod = p(mod)
    return mod["main"]


def infer(expr):
    return run(expr)


def test_conv_multiply_folds_into_weight():
    x = relay.var("x", shape=(1, 4, 8, 8))
    w, s = relay.const(rand(8, 4, 3, 3)), relay.const(rand(8, 1, 1))
    before = relay.Function([x], relay.nn.conv2d(x, w, padding=(1, 1)) * s)
    after = run(before, FoldScaleAxis())
    x2 = relay.var("x", shape=(1, 4, 8, 8))
    expected = relay.Function([x2], relay.nn.conv2d(
        x2, relay.multiply(w, relay.reshape(s, newshape=[-1, 1, 1, 1])), padding=(1, 1)))
    assert_structural_equal(after, infer(expected))
    xa = rand(1, 4, 8, 8)
    np.testing.assert_allclose(evaluate(after, [xa]), evaluate(before, [xa]), rtol=1e-5,
                               atol=1e-5)


def test_batch_norm_after_conv_leaves_no_multiply():
    x = relay.var("x", shape=(1, 3, 10, 10))
    c = 6
    w = relay.const(rand(c, 3, 3, 3))
    gamma, beta = relay.const(rand(c)), relay.const(rand(c))
    mean, var = relay.const(rand(c)), relay.const(np.abs(rand(c)) + 0.5)
    y = relay.nn.batch_norm(relay.nn.conv2d(x, w, strides=(2, 2)), gamma, beta, mean, var)[0]
    before = relay.Function([x], relay.nn.relu(y))
    after = run(before, SimplifyInference(), FoldScaleAxis(), FoldConstant())
    ops = []

    from compiler.ir.expr import Call, Op
    from compiler.ir.traversal import post_order
    for n in post_order(after.body):
        if type(n) is Call and isinstance(n.op, Op):
            ops.append(n.op.name)
    assert ops == ["nn.conv2d", "add", "nn.relu"], ops
    xa = rand(1, 3, 10, 10)
    np.testing.assert_allclose(evaluate(after, [xa]), evaluate(before, [xa]), rtol=1e-4,
                               atol=1e-4)


def test_bias_add_and_add_and_dense_and_chains():
    x = relay.var("x", shape=(2, 4, 6, 6))
    w = relay.const(rand(8, 2, 3, 3))  # grouped conv
    b, s1, s2 = relay.const(rand(8)), relay.const(rand(1, 8, 1, 1)), relay.const(rand(8, 1, 1))
    conv = relay.nn.conv2d(x, w, padding=(1, 1), groups=2)
    y1 = relay.multiply(s1, relay.nn.bias_add(conv, b)) * s2
    conv2 = relay.nn.conv2d(x, relay.const(rand(8, 4, 1, 1)))
    y2 = (conv2 + relay.const(rand(8, 1, 1))) * relay.const(np.float32(0.5))
    d = relay.var("d", shape=(3, 16))
    y3 = relay.nn.dense(d, relay.const(rand(5, 16))) * relay.const(rand(5))
    before = relay.Function([x, d], relay.Tuple([y1, y2, y3]))
    after = run(before, FoldScaleAxis())
    from compiler.ir.expr import Call, Op
    from compiler.ir.traversal import post_order
    muls = [n for n in post_order(after.body) if type(n) is Call and isinstance(n.op, Op)
            and n.op.name == "multiply"]
    # every remaining multiply is on constants only (weights / biases): FoldConstant folds it
    folded = run(after, FoldConstant())
    left = [n for n in post_order(folded.body) if type(n) is Call and isinstance(n.op, Op)
            and n.op.name == "multiply"]
    assert muls and not left
    xa, da = rand(2, 4, 6, 6), rand(3, 16)
    for got, want in zip(evaluate(folded, [xa, da]), evaluate(before, [xa, da])):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_not_folded_when_unsafe():
    x = relay.var("x", shape=(1, 4, 8, 8))
    w = relay.const(rand(8, 4, 3, 3))
    conv = relay.nn.conv2d(x, w, padding=(1, 1))
    s_var = relay.var("s", shape=(8, 1, 1))
    wv = relay.var("w", shape=(8, 4, 3, 3))
    cases = [
        relay.Function([x], relay.Tuple([conv * relay.const(rand(8, 1, 1)), conv])),  # 2 uses
        relay.Function([x], relay.nn.conv2d(x, w, padding=(1, 1)) * relay.const(rand(8, 8, 1))),
        relay.Function([x, s_var], relay.nn.conv2d(x, w, padding=(1, 1)) * s_var),  # not const
        relay.Function([x, wv], relay.nn.conv2d(x, wv, padding=(1, 1))
                       * relay.const(rand(8, 1, 1))),  # weight not constant
    ]
    for func in cases:
        assert_structural_equal(run(func, FoldScaleAxis()), infer(func))


def test_registered_in_build_pipeline_at_opt_level_3():
    from compiler.transform.pass_infra import list_passes
    assert "FoldScaleAxis" in list_passes()
    p = FoldScaleAxis()
    assert p.info.name == "FoldScaleAxis" and p.info.opt_level == 3
    x = relay.var("x", shape=(1, 3, 8, 8))
    w, s = relay.const(rand(4, 3, 3, 3)), relay.const(rand(4, 1, 1))
    func = relay.Function([x], relay.nn.relu(relay.nn.conv2d(x, w) * s))
    mod = tvm.IRModule.from_expr(func)
    with PassContext(opt_level=3):
        out = Sequential([InferType(), FoldScaleAxis()])(mod)["main"]
    with PassContext(opt_level=2):
        same = Sequential([InferType(), FoldScaleAxis()])(mod)["main"]
    assert "multiply" not in str(out.body.args[0].op)
    assert same.body.args[0].op.name == "multiply"
    xa = rand(1, 3, 8, 8)
    with PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    import runtime
    from runtime import graph_executor
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    gm.run(x=xa)
    np.testing.assert_allclose(gm.get_output(0).numpy(), evaluate(func, [xa]), rtol=1e-4,
                               atol=1e-4)


def test_stacked_conv_bn_layers_all_fold():
    """A conv whose input was itself rewritten (a previous conv + BN) still folds."""
    x = relay.var("x", shape=(1, 3, 12, 12))
    y = x
    for cin, cout in ((3, 8), (8, 8), (8, 16)):
        c = cout
        y = relay.nn.conv2d(y, relay.const(rand(cout, cin, 3, 3)), padding=(1, 1))
        y = relay.nn.batch_norm(y, relay.const(rand(c)), relay.const(rand(c)),
                                relay.const(rand(c)), relay.const(np.abs(rand(c)) + 0.5))[0]
        y = relay.nn.relu(y)
    before = relay.Function([x], y)
    after = run(before, SimplifyInference(), FoldScaleAxis(), FoldConstant())
    from compiler.ir.expr import Call, Op
    from compiler.ir.traversal import post_order
    ops = [n.op.name for n in post_order(after.body) if type(n) is Call and isinstance(n.op, Op)]
    assert "multiply" not in ops and ops.count("nn.conv2d") == 3, ops
    xa = rand(1, 3, 12, 12)
    np.testing.assert_allclose(evaluate(after, [xa]), evaluate(before, [xa]), rtol=1e-3,
                               atol=1e-3)
