"""Issue 26 passes and analyses in TVM's test style (before / expected, structural equality):
SimplifyExpr, ConvertLayout, RemoveUnusedFunctions, a pass that changes nothing returns its
input module (same_as), get_total_mac_number, list_op_freqs."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import CompilerError
from compiler.relay import transform


def run_opt_pass(expr, opt_pass):
    mod = tvm.IRModule.from_expr(expr)
    with tvm.transform.PassContext(opt_level=3):  # as TVM's relay.testing.run_opt_pass
        mod = tvm.transform.Sequential([transform.InferType(), opt_pass])(mod)
    return mod["main"]


def run_infer_type(expr):
    return transform.InferType()(tvm.IRModule.from_expr(expr))["main"]


def test_simplify_reshape_chain():
    def before():
        x = relay.var("x", shape=(1, 16, 16, 16))
        y = relay.reshape(x, (1, 16, 256))
        y = relay.expand_dims(y, axis=0)
        y = relay.squeeze(y, axis=[0])
        return relay.Function([x], relay.reshape(y, (16, 256)))

    def expected():
        x = relay.var("x", shape=(1, 16, 16, 16))
        return relay.Function([x], relay.reshape(x, (16, 256)))

    after = run_opt_pass(before(), transform.SimplifyExpr())
    tvm.ir.assert_structural_equal(after, run_infer_type(expected()))


def test_simplify_transposes_and_casts():
    def before():
        x = relay.var("x", shape=(1, 2, 3, 4))
        y = relay.transpose(x, (0, 2, 3, 1))
        y = relay.transpose(y, (0, 3, 1, 2))  # undoes the first
        z = relay.transpose(relay.transpose(x, (1, 0, 2, 3)), (0, 1, 3, 2))
        return relay.Function([x], relay.Tuple([relay.cast(y, "float32"), z]))

    def expected():
        x = relay.var("x", shape=(1, 2, 3, 4))
        return relay.Function([x], relay.Tuple([x, relay.transpose(x, [1, 0, 3, 2])]))

    after = run_opt_pass(before(), transform.SimplifyExpr())
    tvm.ir.assert_structural_equal(after, run_infer_type(expected()))


def _conv_nhwc(x, w):
    return relay.nn.conv2d(x, w, channels=8, kernel_size=(3, 3), padding=(1, 1),
                           data_layout="NHWC", kernel_layout="HWIO")


def test_convert_layout_nhwc_conv_chain_to_nchw():
    def before():
        x = relay.var("x", shape=(1, 8, 8, 8))
        w1, w2 = relay.var("w1", shape=(3, 3, 8, 8)), relay.var("w2", shape=(3, 3, 8, 8))
        return relay.Function([x, w1, w2], _conv_nhwc(_conv_nhwc(x, w1), w2))

    def expected():
        x = relay.var("x", shape=(1, 8, 8, 8))
        w1, w2 = relay.var("w1", shape=(3, 3, 8, 8)), relay.var("w2", shape=(3, 3, 8, 8))

        def conv(data, w):
            return relay.nn.conv2d(data, relay.transpose(w, [3, 2, 0, 1]), channels=8,
                                   kernel_size=(3, 3), padding=(1, 1))
        y = conv(conv(relay.transpose(x, [0, 3, 1, 2]), w1), w2)  # no transpose between
        return relay.Function([x, w1, w2], relay.transpose(y, [0, 2, 3, 1]))

    after = run_opt_pass(before(), transform.ConvertLayout({"nn.conv2d": ["NCHW", "default"]}))
    tvm.ir.assert_structural_equal(after, run_infer_type(expected()))


def test_convert_layout_keeps_the_numbers():
    x = relay.var("x", shape=(1, 8, 8, 8))
    w = np.random.RandomState(0).standard_normal((3, 3, 8, 8)).astype("float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(_conv_nhwc(x, relay.const(w)))))
    with tvm.transform.PassContext(opt_level=3):
        converted = transform.ConvertLayout({"nn.conv2d": ["NCHW", "default"]})(
            transform.InferType()(mod))
    data = np.random.RandomState(1).standard_normal((1, 8, 8, 8)).astype("float32")
    run = [relay.create_executor("graph", mod=m).evaluate()(data).numpy()
           for m in (mod, converted)]
    np.testing.assert_allclose(run[1], run[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layouts, says", [
    ({"nn.max_pool2d": ["NCHW"]}, "'nn.max_pool2d' is not supported"),
    ({"nn.conv2d": ["NCHW16c", "default"]}, "expected one of"),
    ({"nn.conv2d": ["NCHW", "OHWIx"]}, "permutation of 'OIHW'"),
])
def test_convert_layout_refuses_what_it_cannot_do(layouts, says):
    with pytest.raises(CompilerError, match=says):
        transform.ConvertLayout(layouts)


def test_remove_unused_functions():
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule()
    used, unused = relay.GlobalVar("used"), relay.GlobalVar("unused")
    mod[used] = relay.Function([x], relay.exp(x))
    y = relay.var("y", shape=(2,))
    mod[unused] = relay.Function([y], relay.log(y))
    z = relay.var("z", shape=(2,))
    mod["main"] = relay.Function([z], relay.Call(used, [z]))
    after = transform.RemoveUnusedFunctions()(mod)
    assert sorted(gv.name_hint for gv in after.get_global_vars()) == ["main", "used"]
    kept = transform.RemoveUnusedFunctions(["main", "unused"])(mod)
    assert len(kept.get_global_vars()) == 3


def test_module_pass_returning_its_input_gives_the_same_module():
    x = relay.var("x", shape=(2,))
    mod = transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], relay.exp(x))))

    @tvm.transform.module_pass(opt_level=1)
    def identity(m, ctx):
        return m

    @tvm.transform.module_pass(opt_level=1)
    def rename(m, ctx):
        m["other"] = m["main"]
        return m
    assert identity(mod).same_as(mod)
    assert transform.RemoveUnusedFunctions()(mod).same_as(mod)
    renamed = rename(mod)
    assert not renamed.same_as(mod) and "other" not in mod
    changed = transform.SimplifyExpr()(transform.InferType()(tvm.IRModule.from_expr(
        relay.Function([x], relay.cast(x, "float32")))))
    assert isinstance(changed["main"].body, relay.Var)


def test_mac_number_and_op_freqs():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    d = relay.var("d", shape=(10, 4 * 8 * 8))
    out = relay.nn.dense(relay.reshape(y, (1, -1)), d)
    func = run_infer_type(relay.Function([x, w, d], relay.nn.relu(out)))
    conv_macs = 4 * 8 * 8 * 3 * 3 * 3
    dense_macs = 10 * 4 * 8 * 8
    assert relay.analysis.get_total_mac_number(func) == conv_macs + dense_macs
    freqs = relay.analysis.list_op_freqs(tvm.IRModule.from_expr(func))
    assert freqs == {"nn.conv2d": 1, "nn.relu": 2, "reshape": 1, "nn.dense": 1}
    with pytest.raises(CompilerError, match="run relay.transform.InferType first"):
        relay.analysis.get_total_mac_number(relay.nn.dense(relay.var("a", shape=(1, 2)),
                                                           relay.var("b", shape=(3, 2))))


def test_infer_type_of_a_fused_function_called_in_place():
    def before():
        x, w = relay.var("x", shape=(1, 4, 8, 8)), relay.var("w1")
        p0, p1 = relay.var("p0"), relay.var("p1")
        inner = relay.Function([p0, p1], relay.nn.relu(
            relay.nn.conv2d(p0, p1, channels=8, kernel_size=(3, 3))))
        return relay.Function([x, w], relay.Call(inner, [x, w]))

    def expected():
        x = relay.var("x", shape=(1, 4, 8, 8))
        w = relay.var("w1", shape=(8, 4, 3, 3))
        p0, p1 = relay.var("p0", shape=(1, 4, 8, 8)), relay.var("p1", shape=(8, 4, 3, 3))
        inner = relay.Function([p0, p1], relay.nn.relu(
            relay.nn.conv2d(p0, p1, channels=8, kernel_size=(3, 3))))
        return relay.Function([x, w], relay.Call(inner, [x, w]))

    tvm.ir.assert_structural_equal(run_infer_type(before()), run_infer_type(expected()))
