"""Constructors of the IR nodes check their fields and follow relay.var / relay.const rules."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir import Attrs, DictAttrs, TensorType, TupleType
from compiler.ir.expr import TupleWrapper


def test_var_checks_name_and_annotation():
    with pytest.raises(TypeError, match="name_hint must be a str"):
        relay.Var(3)
    with pytest.raises(TypeError, match="type_annotation must be a Type"):
        relay.Var("x", "float32")
    a, b = relay.Var("x"), relay.Var("x")
    assert a is not b and a != b and a.vid != b.vid


def test_relay_var_annotation_forms():
    assert relay.var("x", "int8").type_annotation == TensorType((), "int8")
    assert relay.var("x", shape=(2, 3)).type_annotation == TensorType((2, 3), "float32")
    assert relay.var("x", shape=(2,), dtype="int32").type_annotation == TensorType((2,), "int32")
    assert relay.var("x").type_annotation is None
    with pytest.raises(ValueError, match="either type_annotation or shape"):
        relay.var("x", TensorType((1,)), shape=(1,))


def test_tensor_type_checks():
    assert TensorType(5).shape == (5,)
    assert TensorType(np.array([2, 3])).shape == (2, 3)
    with pytest.raises(ValueError, match="negative"):
        TensorType((2, -1))
    with pytest.raises(TypeError, match="sequence of ints"):
        TensorType(("a",))
    with pytest.raises(TypeError, match="not a known data type"):
        TensorType((1,), "notatype")
    with pytest.raises(TypeError, match="must be a Type"):
        TupleType([1])


@pytest.mark.parametrize("value,dtype,expected", [
    (1, None, "int32"), (1.5, None, "float32"), (True, None, "bool"),
    (np.arange(3, dtype="int64"), None, "int32"), (np.ones(2, "float64"), None, "float32"),
    (np.arange(3, dtype="int64"), "int64", "int64"), ([1, 2], "float16", "float16"),
    (np.ones(2, "int8"), None, "int8"),
])
def test_const_dtype_rules(value, dtype, expected):
    c = relay.const(value, dtype)
    assert c.data.dtype == expected
    np.testing.assert_array_equal(c.data.numpy(), np.asarray(value).astype(expected))


def test_const_rejects_expressions_and_strings():
    with pytest.raises(TypeError, match="expects a value"):
        relay.const(relay.var("x"))
    with pytest.raises(TypeError, match="cannot make a tensor constant"):
        relay.const("text")
    with pytest.raises(TypeError, match="NDArray or numpy array"):
        relay.Constant([1, 2])


def test_call_checks_op_and_args():
    x = relay.var("x")
    op = relay.Op.get("add")
    with pytest.raises(TypeError, match="Call op must be"):
        relay.Call("add", [x])
    with pytest.raises(TypeError, match=r"add args\[1\] must be a relay expression"):
        relay.Call(op, [x, 1.0])
    call = relay.Call(op, [x, x], {"k": [1, 2]})
    assert isinstance(call.attrs, Attrs) and call.attrs.k == (1, 2)
    assert call.args == (x, x) and call.type_args == ()


def test_nodes_are_immutable():
    x = relay.var("x")
    with pytest.raises(AttributeError, match="immutable"):
        x.name_hint = "y"
    with pytest.raises(AttributeError, match="immutable"):
        relay.Tuple([x]).fields = ()


def test_tuple_and_getitem_checks():
    x = relay.var("x")
    with pytest.raises(TypeError, match=r"Tuple fields\[0\]"):
        relay.Tuple([1])
    with pytest.raises(TypeError, match="non-negative int"):
        relay.TupleGetItem(x, -1)
    with pytest.raises(TypeError, match="non-negative int"):
        relay.TupleGetItem(x, 1.0)
    item = x[2]
    assert isinstance(item, relay.TupleGetItem) and item.index == 2 and item.tuple_value is x


def test_let_if_function_checks():
    x = relay.var("x")
    with pytest.raises(TypeError, match="Let var must be a Var"):
        relay.Let(relay.const(1), x, x)
    with pytest.raises(TypeError, match="If operands"):
        relay.If(x, x, None)
    with pytest.raises(TypeError, match=r"params\[0\] must be a Var"):
        relay.Function([relay.const(1)], x)
    with pytest.raises(TypeError, match="ret_type must be a Type"):
        relay.Function([x], x, "float32")


def test_function_attrs_and_with_attr():
    x = relay.var("x", shape=(2,))
    f = relay.Function([x], x, TensorType((2,)), attrs={"Composite": "c"})
    assert isinstance(f.attrs, DictAttrs) and f.get_attr("Composite") == "c"
    g = f.with_attr("Primitive", 1)
    assert g is not f and g.is_primitive and not f.is_primitive
    assert g.params == f.params and g.body is f.body and g.get_attr("Composite") == "c"
    assert g.func_type_annotation.arg_types == (TensorType((2,)),)
    assert relay.Function([relay.var("y")], x).func_type_annotation is None


def test_attrs_are_immutable_values():
    a = Attrs({"axis": 1, "sizes": [1, 2]})
    assert a == Attrs({"axis": 1, "sizes": (1, 2)}) and hash(a) == hash(Attrs(dict(a)))
    with pytest.raises(AttributeError, match="immutable"):
        a.axis = 2
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        a.missing  # noqa: B018
    assert a.with_updates(axis=2).axis == 2 and a.axis == 1


def test_arithmetic_sugar_builds_op_calls():
    x = relay.var("x", shape=(2,))
    for expr, name in [(x + 1.0, "add"), (2.0 * x, "multiply"), (x - x, "subtract"),
                       (x / x, "divide"), (-x, "negative")]:
        assert expr.op.name == name
    assert (1.0 - x).args[1] is x


def test_checked_type_before_inference_is_an_error():
    with pytest.raises(ValueError, match="InferType"):
        relay.var("x").checked_type  # noqa: B018


def test_tuple_wrapper():
    t = relay.Tuple([relay.var("a"), relay.var("b")])
    w = TupleWrapper(t, 2)
    assert len(w) == 2 and w.astuple() is t
    assert w[-1].index == 1 and [i.index for i in w] == [0, 1]
    with pytest.raises(IndexError):
        w[2]  # noqa: B018
