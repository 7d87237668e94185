"""TVM's type and builder surface: TypeVar/FuncType type params, scalar_type, IntImm shape
dims, uint1/bool, ScopeBuilder, calling functions and global vars, with_attr, same_as."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import TypeInferenceError


def test_polymorphic_func_types_print_and_compare_up_to_renaming():
    t, u = relay.TypeVar("t"), relay.TypeVar("u")
    identity_t = relay.FuncType([t], t, [t])
    identity_u = relay.FuncType([u], u, [u])
    assert str(identity_t) == "fn <t>(t) -> t"
    assert identity_t == identity_u and hash(identity_t) == hash(identity_u)
    assert tvm.ir.structural_equal(identity_t, identity_u)
    assert relay.FuncType([t], u, [t]) != identity_u  # u is free here
    assert relay.TypeVar("t") != t  # a type var equals only itself
    assert relay.GlobalTypeVar("List").kind == relay.TypeKind.AdtHandle
    with pytest.raises(TypeError, match="TypeVar"):
        relay.FuncType([t], t, [relay.TensorType((1,))])


def test_polymorphic_function_prints_its_type_params():
    t = relay.TypeVar("t")
    x = relay.var("x", t)
    mod = tvm.IRModule({relay.GlobalVar("id"): relay.Function([x], x, t, [t])})
    assert "def @id<t>(%x: t) -> t {" in mod.astext()


def test_scalar_type_and_bool_aliases():
    assert relay.scalar_type("int8") == relay.TensorType((), "int8")
    assert relay.TensorType((2,), "uint1") == relay.TensorType((2,), "bool")
    assert relay.var("flag", "uint1").type_annotation.dtype == "bool"


def test_shape_dims_behave_like_intimm_and_like_ints():
    ty = relay.TensorType((2, 3), "float32")
    dim = ty.shape[1]
    assert dim.value == 3 and dim.dtype == "int32"
    assert dim == 3 and hash(dim) == hash(3) and dim * 2 + 1 == 7 and dim < 4
    assert ty.shape == (2, 3) and {dim: "x"}[3] == "x"
    assert str(dim) == "3" and json.dumps(list(ty.shape)) == "[2, 3]"
    assert np.zeros(ty.shape).shape == (2, 3)
    assert pickle.loads(pickle.dumps(ty)) == ty


def test_scope_builder_lets_and_if_else():
    x = relay.var("x", shape=(), dtype="float32")
    sb = relay.ScopeBuilder()
    doubled = sb.let("doubled", x + x)
    cond = sb.let(("cond", relay.scalar_type("bool")), relay.greater(doubled, relay.const(1.0)))
    with sb.if_scope(cond):
        sb.ret(doubled)
    with sb.else_scope():
        inner = sb.let("neg", relay.negative(doubled))
        sb.ret(inner)
    body = sb.get()
    assert isinstance(body, relay.Let) and body.var is doubled
    assert isinstance(body.body.body, relay.If)
    run = relay.create_executor("debug").evaluate(relay.Function([x], body))
    assert float(run(np.float32(2.0)).numpy()) == 4.0
    assert float(run(np.float32(0.25)).numpy()) == -0.5


def test_scope_builder_errors():
    sb = relay.ScopeBuilder()
    with pytest.raises(RuntimeError, match="else_scope can only follow"):
        sb.else_scope()
    sb.ret(relay.const(1))
    with pytest.raises(RuntimeError, match="already set"):
        sb.ret(relay.const(2))
    with pytest.raises(RuntimeError, match="no return value"):
        relay.ScopeBuilder().get()


def test_calling_a_function_or_global_var_builds_a_call():
    a = relay.var("a", shape=(2,))
    exp_fn = relay.Function([a], relay.exp(a))
    b = relay.var("b", shape=(2,))
    call = exp_fn(b)
    assert isinstance(call, relay.Call) and call.op is exp_fn and call.args == (b,)
    gv = relay.GlobalVar("f")
    mod = tvm.IRModule({gv: exp_fn})
    c = relay.var("c", shape=(2,))
    mod["main"] = relay.Function([c], gv(c))
    mod = relay.transform.InferType()(mod)
    assert mod["main"].body.op is gv
    data = np.array([0.0, 1.0], "float32")
    got = relay.create_executor("debug", mod=mod).evaluate()(data)
    np.testing.assert_allclose(got.numpy(), np.exp(data), rtol=1e-6)


def test_module_with_attr_returns_a_copy():
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], x))
    tagged = mod.with_attr("executor", "graph")
    assert tagged.attrs["executor"] == "graph" and "executor" not in mod.attrs
    assert tagged["main"] is mod["main"]
    assert not tvm.ir.structural_equal(mod, tagged)


def test_same_as_is_identity_on_every_node():
    x = relay.var("x", shape=(2,))
    ty = relay.TensorType((2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], x))
    for node in (x, relay.const(1), relay.Op.get("add"), relay.GlobalVar("g"), ty, mod,
                 relay.TypeVar("t")):
        assert node.same_as(node)
    assert not ty.same_as(relay.TensorType((2,))) and ty == relay.TensorType((2,))


def test_polymorphic_function_calls_infer_their_instances():
    t = relay.TypeVar("t")
    x = relay.var("x", t)
    y = relay.var("y", t)
    first = relay.GlobalVar("first")
    mod = tvm.IRModule({first: relay.Function([x, y], x, t, [t])})
    a = relay.var("a", shape=(2,))
    mod["main"] = relay.Function([a], relay.Tuple([first(a, a),
                                                   first(relay.const(1), relay.const(2))]))
    mod = relay.transform.InferType()(mod)
    assert mod["first"].checked_type == relay.FuncType([t, t], t, [t])
    assert mod["main"].ret_type == relay.TupleType([relay.TensorType((2,)),
                                                    relay.scalar_type("int32")])
    out = relay.create_executor("debug", mod=mod).evaluate()(np.ones(2, "float32"))
    np.testing.assert_array_equal(out[0].numpy(), [1.0, 1.0])
    assert int(out[1].numpy()) == 1

    b = relay.var("b", shape=(3,))
    bad = tvm.IRModule({first: mod["first"]})
    bad["main"] = relay.Function([a, b], first(a, b))
    with pytest.raises(TypeInferenceError, match="already bound"):
        relay.transform.InferType()(bad)
