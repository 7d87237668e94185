"""relay.bind and relay.build_module.bind_params_by_name: what binds, what is an error."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import BindError
from compiler.ir import assert_structural_equal
from compiler.passes.bind import bind
from compiler.passes.bind_params import bind_params_by_name
from runtime import nd

T23 = relay.TensorType((2, 3), "float32")


def _vars(*names, ty=T23):
    return [relay.var(n, ty) for n in names]


# ---- relay.bind -------------------------------------------------------------------------------

def test_bind_function_param_by_var_removes_it():
    x, y = _vars("x", "y")
    func = relay.Function([x, y], relay.add(x, y))
    c = relay.const(np.ones((2, 3), "float32"))
    out = bind(func, {y: c})
    assert [p.name_hint for p in out.params] == ["x"]
    assert out.params[0] is x
    assert out.body.args[1] is c
    assert_structural_equal(out, relay.Function([x], relay.add(x, c)))


def test_bind_by_name_converts_values_through_const():
    x, y = _vars("x", "y")
    func = relay.Function([x, y], relay.multiply(x, y))
    out = bind(func, {"y": np.full((2, 3), 2.0)})  # float64 is narrowed, as relay.const does
    assert len(out.params) == 1
    bound = out.body.args[1]
    assert isinstance(bound, relay.Constant)
    assert bound.data.dtype == "float32"
    np.testing.assert_array_equal(bound.data.numpy(), np.full((2, 3), 2.0, "float32"))


def test_bind_free_vars_of_a_plain_expression():
    x, y = _vars("x", "y")
    expr = relay.add(relay.multiply(x, y), y)
    z = relay.var("z", T23)
    out = bind(expr, {y: z})
    expected = relay.add(relay.multiply(x, z), z)
    assert_structural_equal(out, expected)
    assert out.args[0].args[1] is z and out.args[1] is z


def test_bind_keeps_sharing_and_identity():
    x, y = _vars("x", "y")
    shared = relay.add(x, x)
    expr = relay.multiply(shared, relay.add(shared, y))
    out = bind(expr, {y: relay.const(np.zeros((2, 3), "float32"))})
    assert out.args[0] is out.args[1].args[0]  # still one node
    assert out.args[0] is shared  # the untouched sub-graph is not even copied
    func = relay.Function([x], shared)
    assert bind(func, {}) is func
    assert bind(func, {y: x}) is func  # a var the function does not mention changes nothing


def test_bound_expression_free_vars_become_params():
    x, y = _vars("x", "y")
    z = relay.var("z", T23)
    func = relay.Function([x, y], relay.add(x, y))
    out = bind(func, {y: relay.multiply(z, z)})
    assert [p.name_hint for p in out.params] == ["x", "z"]
    assert out.params[1] is z
    assert_structural_equal(out, relay.Function([x, z], relay.add(x, relay.multiply(z, z))))


def test_existing_free_vars_do_not_become_params():
    x, y, w = _vars("x", "y", "w")
    func = relay.Function([x, y], relay.add(relay.add(x, y), w))  # w free already
    out = bind(func, {y: w})
    assert [p.name_hint for p in out.params] == ["x"]


def test_binding_a_let_var_is_an_error():
    x = relay.var("x", T23)
    v = relay.var("v", T23)
    func = relay.Function([x], relay.Let(v, relay.add(x, x), relay.multiply(v, v)))
    with pytest.raises(BindError, match=r"cannot bind %v: it is bound by a let"):
        bind(func, {v: x})
    with pytest.raises(BindError, match=r"cannot bind %v: it is bound by a let"):
        bind(func, {"v": np.zeros((2, 3), "float32")})


def test_binding_an_inner_function_param_is_an_error():
    x, p = _vars("x", "p")
    inner = relay.Function([p], relay.add(p, x))
    func = relay.Function([x], relay.Call(inner, [x]))
    with pytest.raises(BindError, match=r"cannot bind %p: it is bound by an inner function's "
                                        r"parameters"):
        bind(func, {p: x})
    with pytest.raises(BindError, match="inner function"):
        bind(relay.Call(inner, [x]), {"p": x})


def test_unknown_name_is_an_error_naming_it():
    x, y = _vars("x", "y")
    func = relay.Function([x, y], relay.add(x, y))
    with pytest.raises(BindError, match=r"'w'.*no parameter or free variable.*\['x', 'y'\]"):
        bind(func, {"w": 1.0})


def test_ambiguous_name_is_an_error():
    x1, x2 = relay.var("x", T23), relay.var("x", T23)
    func = relay.Function([x1, x2], relay.add(x1, x2))
    with pytest.raises(BindError, match=r"2 variables are named %x"):
        bind(func, {"x": np.zeros((2, 3), "float32")})
    # by Var it is fine
    out = bind(func, {x2: relay.const(np.zeros((2, 3), "float32"))})
    assert out.params == (x1,)


def test_bad_keys_and_values():
    x = relay.var("x", T23)
    func = relay.Function([x], x)
    with pytest.raises(BindError, match="keys must be relay Vars or names"):
        bind(func, {1: x})
    with pytest.raises(BindError, match="value for %x"):
        bind(func, {x: object()})


def test_bind_long_chain_without_recursion():
    x, y = _vars("x", "y")
    out = x
    for _ in range(3000):
        out = relay.add(out, y)
    func = relay.Function([x, y], out)
    bound = bind(func, {"y": np.ones((2, 3), "float32")})
    assert len(bound.params) == 1
    assert isinstance(bound.body.args[1], relay.Constant)


def test_relay_bind_is_this_bind():
    assert relay.bind is bind


# ---- bind_params_by_name ---------------------------------------------------------------------

def test_bind_params_by_name_binds_matching_and_ignores_others():
    x = relay.var("x", T23)
    w = relay.var("w", relay.TensorType((3,), "int64"))
    func = relay.Function([x, w], relay.add(x, relay.cast(w, "float32")))
    weight = np.arange(3, dtype="int64")
    out = bind_params_by_name(func, {"w": weight, "unused": np.zeros(4)})
    assert [p.name_hint for p in out.params] == ["x"]
    bound = out.body.args[1].args[0]
    assert isinstance(bound, relay.Constant)
    assert bound.data.dtype == "int64"  # numpy arrays keep their dtype (no int32 narrowing)
    np.testing.assert_array_equal(bound.data.numpy(), weight)


def test_bind_params_by_name_ndarray_keeps_dtype():
    x = relay.var("x", relay.TensorType((2,), "float64"))
    y = relay.var("y", relay.TensorType((2,), "float64"))
    func = relay.Function([x, y], relay.add(x, y))
    out = bind_params_by_name(func, {"y": nd.array(np.array([1.0, 2.0]))})
    assert out.body.args[1].data.dtype == "float64"
    mod = tvm.transform.Sequential([relay.transform.InferType()])(tvm.IRModule.from_expr(out))
    assert mod["main"].ret_type == relay.TensorType((2,), "float64")


def test_bind_params_by_name_duplicate_name_raises():
    a, b = relay.var("p", T23), relay.var("p", T23)
    func = relay.Function([a, b], relay.add(a, b))
    with pytest.raises(BindError, match=r"multiple parameters.*'p'"):
        bind_params_by_name(func, {"p": np.zeros((2, 3), "float32")})
    # a duplicate name that is not asked for does not matter
    assert bind_params_by_name(func, {"q": np.zeros(1)}) is func


def test_bind_params_by_name_checks_shape_and_dtype():
    x = relay.var("x", T23)
    func = relay.Function([x], relay.nn.relu(x))
    with pytest.raises(BindError, match=r"'x' expects Tensor\[\(2, 3\), float32\], got "
                                        r"Tensor\[\(3\), float32\]"):
        bind_params_by_name(func, {"x": np.zeros(3, "float32")})


def test_bind_params_by_name_result_runs():
    from compiler.op.interpreter import evaluate
    x = relay.var("x", T23)
    w = relay.var("w", T23)
    func = relay.Function([x, w], relay.multiply(x, w))
    weight = np.arange(6, dtype="float32").reshape(2, 3)
    out = bind_params_by_name(func, {"w": weight})
    data = np.full((2, 3), 2.0, "float32")
    np.testing.assert_allclose(evaluate(out, [data]), data * weight)


def test_bind_params_by_name_rejects_non_functions():
    with pytest.raises(TypeError, match="expects a relay Function"):
        bind_params_by_name(relay.var("x"), {})
