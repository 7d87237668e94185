"""DynamicToStatic in TVM's before/expected style, with every dyn op checked against numpy
through the interpreter before and after the rewrite."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.op import dyn


def run_infer_type(expr):
    return relay.transform.InferType()(tvm.IRModule.from_expr(expr))["main"]


def to_static(expr):
    mod = relay.transform.DynamicToStatic()(tvm.IRModule.from_expr(expr))
    return mod["main"]


def check_eval(func, args, ref):
    run = relay.create_executor("debug", mod=tvm.IRModule.from_expr(func)).evaluate()
    out = run(*args)
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-6)


def i64(*values):
    return relay.const(np.array(values, dtype="int64"))


def test_reshape():
    x = relay.var("x", shape=(2, 3, 4))
    y = relay.var("y", shape=(6, 4))
    before = relay.Function([x, y], dyn.reshape(x, relay.shape_of(y, "int64")))
    after = to_static(before)
    expected = run_infer_type(relay.Function([x, y], relay.reshape(x, (6, 4))))
    tvm.ir.assert_structural_equal(after, expected)
    data = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    check_eval(before, [data, np.zeros((6, 4), "float32")], data.reshape(6, 4))
    check_eval(after, [data, np.zeros((6, 4), "float32")], data.reshape(6, 4))


def test_double_and_quad_reshape():
    x = relay.var("x", shape=(2, 3, 4))
    y = dyn.reshape(dyn.reshape(x, i64(6, 4)), i64(0, 2, 2, -1))
    after = to_static(relay.Function([x], y))
    expected = run_infer_type(relay.Function([x], relay.reshape(relay.reshape(x, (6, 4)),
                                                                (0, 2, 2, -1))))
    tvm.ir.assert_structural_equal(after, expected)
    assert str(after.ret_type) == "Tensor[(6, 2, 2, 1), float32]"


def test_chained_shapes_fold_round_by_round():
    # the second reshape's shape is shape_of the first's result: static only once the first is
    x = relay.var("x", shape=(2, 3, 4))
    first = dyn.reshape(x, i64(4, 6))
    second = dyn.reshape(relay.exp(x), relay.shape_of(first, "int64"))
    after = to_static(relay.Function([x], second))
    assert "dyn." not in str(after) and str(after.ret_type) == "Tensor[(4, 6), float32]"


@pytest.mark.parametrize("make, static, args, ref", [
    (lambda x: dyn.tile(x, i64(2, 1, 3)), lambda x: relay.tile(x, (2, 1, 3)),
     [(2, 3)], lambda a: np.tile(a, (2, 1, 3))),
    (lambda x: dyn.broadcast_to(x, i64(4, 2, 3)), lambda x: relay.broadcast_to(x, (4, 2, 3)),
     [(2, 1)], lambda a: np.broadcast_to(a, (4, 2, 3))),
    (lambda x: dyn.strided_slice(x, i64(1, 0), i64(3, 3), i64(1, 2)),
     lambda x: relay.strided_slice(x, (1, 0), (3, 3), (1, 2)), [(4, 5)],
     lambda a: a[1:3, 0:3:2]),
    (lambda x: dyn.expand_dims(x, relay.const(1)), lambda x: relay.expand_dims(x, 1),
     [(2, 3)], lambda a: a[:, None]),
    (lambda x: dyn.squeeze(x, i64(1)), lambda x: relay.squeeze(x, [1]), [(2, 1, 3)],
     lambda a: a[:, 0]),
    (lambda x: dyn.pad(x, relay.const(np.array([[1, 0], [2, 1]], "int64")), relay.const(3.0)),
     lambda x: relay.nn.pad(x, ((1, 0), (2, 1)), 3.0), [(2, 3)],
     lambda a: np.pad(a, ((1, 0), (2, 1)), constant_values=3.0)),
    (lambda x: dyn.upsampling(x, relay.const(2.0), relay.const(3.0)),
     lambda x: relay.nn.upsampling(x, 2.0, 3.0), [(1, 1, 2, 2)],
     lambda a: a.repeat(2, 2).repeat(3, 3)),
])
def test_data_ops(make, static, args, ref):
    params = [relay.var(f"x{i}", shape=s) for i, s in enumerate(args)]
    before = relay.Function(params, make(*params))
    after = to_static(before)
    tvm.ir.assert_structural_equal(after, run_infer_type(relay.Function(params,
                                                                         static(*params))))
    data = [np.random.default_rng(i).standard_normal(s).astype("float32")
            for i, s in enumerate(args)]
    check_eval(before, data, ref(*data))
    check_eval(after, data, ref(*data))


def test_topk():
    x = relay.var("x", shape=(3, 7))
    before = relay.Function([x], dyn.topk(x, relay.const(2), axis=1, ret_type="values"))
    after = to_static(before)
    tvm.ir.assert_structural_equal(after, run_infer_type(relay.Function(
        [x], relay.topk(x, 2, axis=1, ret_type="values"))))
    data = np.random.default_rng(1).standard_normal((3, 7)).astype("float32")
    check_eval(before, [data], -np.sort(-data, axis=1)[:, :2])


def test_inits_and_one_hot():
    shape, fill = i64(2, 3), relay.var("fill", shape=())
    for dyn_make, static_make, ref in [
            (dyn.zeros(shape, "float32"), relay.zeros((2, 3), "float32"), np.zeros((2, 3))),
            (dyn.ones(shape, "int32"), relay.ones((2, 3), "int32"), np.ones((2, 3))),
            (dyn.full(fill, shape), relay.full(fill, (2, 3)), np.full((2, 3), 4.0))]:
        params = [fill] if "full" in str(dyn_make.op) else []
        after = to_static(relay.Function(params, dyn_make))
        tvm.ir.assert_structural_equal(after, run_infer_type(relay.Function(params,
                                                                             static_make)))
        check_eval(relay.Function(params, dyn_make), [np.float32(4.0)] if params else [], ref)
    idx = relay.var("idx", shape=(3,), dtype="int32")
    on, off = relay.const(1.0), relay.const(0.0)
    before = relay.Function([idx], dyn.one_hot(idx, on, off, relay.const(4), -1, "float32"))
    tvm.ir.assert_structural_equal(to_static(before), run_infer_type(relay.Function(
        [idx], relay.one_hot(idx, on, off, 4, -1, "float32"))))
    check_eval(before, [np.array([0, 3, 1], "int32")], np.eye(4)[[0, 3, 1]])


def test_computed_shapes_stay_dynamic():
    x = relay.var("x", shape=(relay.Any(), 4))
    y = dyn.reshape(x, relay.concatenate([i64(-1), i64(2, 2)], 0))  # folds: static
    z = dyn.reshape(x, relay.shape_of(relay.transpose(x), "int64"))  # depends on x: dynamic
    after = to_static(relay.Function([x], relay.Tuple([y, z])))
    text = str(after)
    assert "reshape(%x, newshape=[-1, 2, 2])" in text and "dyn.reshape" in text
    data = np.arange(24, dtype="float32").reshape(6, 4)
    check_eval(after, [data], (data.reshape(-1, 2, 2), data.reshape(4, 6)))


def test_a_function_without_dyn_ops_is_returned_as_it_is():
    x = relay.var("x", shape=(2, 3))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x],
                                                                            relay.exp(x))))
    assert relay.transform.DynamicToStatic()(mod)["main"] is mod["main"]


def test_relay_build_runs_a_model_whose_dyn_ops_fold():
    x = relay.var("x", shape=(2, 6))
    f = relay.Function([x], relay.nn.relu(dyn.reshape(x, i64(3, 4))))
    lib = relay.build(tvm.IRModule.from_expr(f))
    from runtime import graph_executor
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    data = np.arange(12, dtype="float32").reshape(2, 6) - 5
    m.run(x=data)
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.maximum(data.reshape(3, 4), 0))
