"""The text printer prints what TVM's Relay text printer prints."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from compiler import relay
from compiler.ir import IRModule, TensorType, TupleType
from compiler.ir.printer import astext
from tests.scaling import assert_scales_linearly

T16 = TensorType((1, 16), "float32")


def typed(expr, ty):
    """Set a checked type as InferType would (the examples are partially typed programs)."""
    expr._set_checked_type(ty)
    return expr


def test_module_example_prints_exactly():
    x = relay.var("x")
    mod = IRModule.from_expr(relay.Function([x], relay.add(x, relay.const(1.0))))
    assert str(mod) == "def @main(%x) {\n  add(%x, 1f)\n}"
    assert mod.astext() == '#[version = "0.0.5"]\n' + str(mod)  # TVM's astext header


def test_concatenate_example_prints_exactly():
    inp = relay.var("input", shape=(7,), dtype="int32")
    c0 = relay.const(np.array([1, 2, 3], "int32"))
    c1 = relay.const(np.array([4, 5, 6, 7], "int32"))
    t7 = TensorType((7,), "int32")
    cat = typed(relay.concatenate([c0, c1], axis=-1), t7)
    func = relay.Function([inp], typed(relay.add(cat, inp), t7), t7)
    assert str(func) == (
        "fn (%input: Tensor[(7), int32]) -> Tensor[(7), int32] {\n"
        "  %0 = (meta[relay.Constant][0], meta[relay.Constant][1]);\n"
        "  %1 = concatenate(%0, axis=-1) /* ty=Tensor[(7), int32] */;\n"
        "  add(%1, %input) /* ty=Tensor[(7), int32] */\n"
        "}")


@pytest.mark.parametrize("value,dtype,text", [
    (1.0, "float32", "1f"), (-1.0, "float32", "-1f"), (0.5, "float32", "0.5f"),
    (1e-5, "float32", "1e-05f"), (3.14159265, "float32", "3.1415927f"), (0.001, "float32", "0.001f"),
    (1, "int32", "1"), (-7, "int32", "-7"), (1, "int64", "1i64"), (1, "int16", "1i16"),
    (1.0, "float64", "1f64"), (2.5, "float16", "2.5f16"), (True, "bool", "True"),
    (False, "bool", "False"), (1, "int8", "meta[relay.Constant][0]"),
    (1, "uint8", "meta[relay.Constant][0]"),
])
def test_scalar_constants(value, dtype, text):
    # TVM's 6 significant digits unless they lose precision (pi): then the exact shortest text,
    # so that compiler.ir.parser reads back the same constant.
    assert str(relay.const(value, dtype)) == text


def test_const_defaults_print_as_float32_and_int32():
    assert str(relay.const(2.0)) == "2f"
    assert str(relay.const(3)) == "3"


def test_meta_constants_numbered_by_first_appearance_and_shared():
    x = relay.var("x", shape=(2,))
    a = relay.const(np.ones(2, "float32"))
    b = relay.const(np.zeros(2, "float32"))
    text = str(relay.Function([x], relay.add(relay.multiply(x, b), relay.add(a, b))))
    assert text == ("fn (%x: Tensor[(2), float32]) {\n"
                    "  %0 = multiply(%x, meta[relay.Constant][0]);\n"
                    "  %1 = add(meta[relay.Constant][1], meta[relay.Constant][0]);\n"
                    "  add(%0, %1)\n"
                    "}")


def test_type_annotations_on_calls_and_constants_only():
    x = relay.var("x", shape=(1, 16))
    typed(x, T16)
    one = typed(relay.const(1.0), TensorType((), "float32"))
    call = typed(relay.add(x, one), T16)
    tup = typed(relay.Tuple([call]), TupleType([T16]))
    assert str(relay.Function([x], tup)) == (
        "fn (%x: Tensor[(1, 16), float32]) {\n"
        "  %0 = add(%x, 1f /* ty=float32 */) /* ty=Tensor[(1, 16), float32] */;\n"
        "  (%0,)\n"
        "}")


def test_free_vars_are_declared_where_first_used():
    x = relay.var("x", shape=(3,))
    y = relay.var("y", "int32")
    assert str(relay.add(x, relay.const(1.0))) == (
        "free_var %x: Tensor[(3), float32];\nadd(%x, 1f)")
    assert str(relay.Tuple([y, y])) == "free_var %y: int32;\n(%y, %y)"


def test_shared_subexpression_is_bound_once():
    x = relay.var("x")
    e = relay.exp(x)
    assert str(relay.Function([x], relay.add(e, e))) == (
        "fn (%x) {\n  %0 = exp(%x);\n  add(%0, %0)\n}")


def test_a_shared_scope_result_is_bound_then_returned():
    # TVM's memo is global to the printout: e is bound inside the inner fn, where it is first
    # printed, and that name is reused outside it.
    x = relay.var("x")
    e = relay.exp(x)
    outer = relay.Function([x], relay.Tuple([relay.Function([], e), e]))
    assert str(outer) == (
        "fn (%x) {\n"
        "  %1 = fn () {\n"
        "    %0 = exp(%x);\n"
        "    %0\n"
        "  };\n"
        "  (%1, %0)\n"
        "}")


def test_every_non_atomic_argument_gets_a_temporary():
    x = relay.var("x")
    y = relay.var("y")
    out = relay.multiply(relay.add(x, y), relay.nn.relu(relay.subtract(x, y)))
    assert str(relay.Function([x, y], out)) == (
        "fn (%x, %y) {\n"
        "  %0 = add(%x, %y);\n"
        "  %1 = subtract(%x, %y);\n"
        "  %2 = nn.relu(%1);\n"
        "  multiply(%0, %2)\n"
        "}")


def test_tuple_and_tuple_getitem():
    x = relay.var("x")
    t = relay.Tuple([x, relay.exp(x)])
    assert str(relay.Function([x], relay.TupleGetItem(t, 1))) == (
        "fn (%x) {\n  %0 = exp(%x);\n  %1 = (%x, %0);\n  %1.1\n}")
    assert str(relay.Tuple([])) == "()"
    assert str(relay.Tuple([relay.const(1)])) == "(1,)"


def test_non_default_attrs_only():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    assert str(relay.nn.leaky_relu(x, alpha=0.1)).endswith("nn.leaky_relu(%x, alpha=0.1f)")
    assert str(relay.nn.leaky_relu(x)).endswith("nn.leaky_relu(%x)")
    assert str(relay.nn.bias_add(x, w, axis=1)).endswith("nn.bias_add(%x, %w)")
    conv = str(relay.nn.conv2d(x, w, strides=(2, 2), kernel_size=(3, 3)))
    assert conv.endswith("nn.conv2d(%x, %w, strides=[2, 2], kernel_size=[3, 3])")
    assert str(relay.cast(x, "float16")).endswith('cast(%x, dtype="float16")')


def test_attrs_of_unregistered_or_non_op_callees_print_in_full():
    from compiler.ir import Attrs
    x = relay.var("x")
    f = relay.GlobalVar("f")
    call = relay.Call(f, [x], Attrs({"layout": "NCHW", "eps": 1e-05, "flag": True,
                                     "sizes": [1, 2], "gone": None}))
    assert str(call) == 'free_var %x;\n@f(%x, layout="NCHW", eps=1e-05f, flag=True, sizes=[1, 2])'


def test_let_chain_and_let_as_argument():
    x = relay.var("x")
    a, b = relay.var("a"), relay.var("b", shape=(2,))
    let = relay.Let(a, relay.add(x, x), relay.Let(b, relay.exp(a), relay.multiply(a, b)))
    assert str(relay.Function([x], let)) == (
        "fn (%x) {\n"
        "  let %a = add(%x, %x);\n"
        "  let %b: Tensor[(2), float32] = exp(%a);\n"
        "  multiply(%a, %b)\n"
        "}")
    c = relay.var("c")
    arg = relay.Let(c, relay.exp(x), c)
    assert str(relay.Function([x], relay.add(arg, x))) == (
        "fn (%x) {\n"
        "  %0 = (\n"
        "    let %c = exp(%x);\n"
        "    %c\n"
        "  );\n"
        "  add(%0, %x)\n"
        "}")


def test_if():
    c = relay.var("c", "bool")
    x = relay.var("x")
    node = relay.If(relay.equal(x, x), relay.exp(x), relay.add(relay.exp(x), x))
    assert str(relay.Function([c, x], node)) == (
        "fn (%c: bool, %x) {\n"
        "  %0 = equal(%x, %x);\n"
        "  if (%0) {\n"
        "    exp(%x)\n"
        "  } else {\n"
        "    %1 = exp(%x);\n"
        "    add(%1, %x)\n"
        "  }\n"
        "}")


def test_fused_functions_number_bodies_first_and_rename_params():
    x = relay.var("x", shape=(1, 16))
    p0, p1 = relay.var("p0", shape=(1, 16)), relay.var("p0", shape=(1, 16))
    f1 = relay.Function([p0], relay.nn.relu(relay.add(p0, relay.const(1.0))), T16,
                        attrs={"Primitive": 1})
    f2 = relay.Function([p1], relay.exp(p1), T16).with_attr("Primitive", 1)
    main = relay.Function([x], relay.Call(f2, [relay.Call(f1, [x])]), T16)
    assert str(IRModule.from_expr(main)) == (
        "def @main(%x: Tensor[(1, 16), float32]) -> Tensor[(1, 16), float32] {\n"
        "  %1 = fn (%p0: Tensor[(1, 16), float32], Primitive=1) -> Tensor[(1, 16), float32] {\n"
        "    %0 = add(%p0, 1f);\n"
        "    nn.relu(%0)\n"
        "  };\n"
        "  %2 = %1(%x);\n"
        "  %3 = fn (%p01: Tensor[(1, 16), float32], Primitive=1) -> Tensor[(1, 16), float32] {\n"
        "    exp(%p01)\n"
        "  };\n"
        "  %3(%2)\n"
        "}")


def test_module_with_global_calls_and_string_attrs():
    x, y = relay.var("x"), relay.var("y")
    mod = IRModule()
    double = relay.GlobalVar("double")
    mod[double] = relay.Function([y], relay.add(y, y)).with_attr("Composite", "dbl")
    mod["main"] = relay.Function([x], relay.Call(double, [relay.exp(x)]))
    assert str(mod) == (
        'def @double(%y, Composite="dbl") {\n'
        "  add(%y, %y)\n"
        "}\n"
        "\n"
        "def @main(%x) {\n"
        "  %0 = exp(%x);\n"
        "  @double(%0)\n"
        "}")


def test_var_names_made_unique_and_alpha():
    a, b, c = relay.var("x"), relay.var("x"), relay.var("0")
    d = relay.var("")
    assert str(relay.Function([a, b, c, d], relay.Tuple([a, b, c, d]))) == (
        "fn (%x, %x1, %v0, %v) {\n  (%x, %x1, %v0, %v)\n}")


def test_types_print_like_tvm():
    assert astext(TensorType((1, 3), "float32")) == "Tensor[(1, 3), float32]"
    assert astext(TensorType((), "int64")) == "int64"
    assert astext(TupleType([TensorType((2,)), TensorType(())])) == (
        "(Tensor[(2), float32], float32)")
    f = relay.Function([relay.var("x", shape=(5,), dtype="int8")], relay.const(1),
                       TensorType((), "int32"))
    assert str(f) == "fn (%x: Tensor[(5), int8]) -> int32 {\n  1\n}"


def test_astext_rejects_other_objects():
    with pytest.raises(TypeError, match="astext expects"):
        astext(42)


@pytest.fixture
def default_recursion_limit():
    """Run under Python's default recursion limit whatever the test runner set."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


def test_ten_thousand_op_chain_prints_without_recursion(default_recursion_limit):
    x = relay.var("x", shape=(1, 16))
    e = x
    for i in range(10_000):
        e = relay.nn.relu(e) if i % 2 else relay.add(e, relay.const(1.0))
    text = str(relay.Function([x], e))
    lines = text.split("\n")
    assert len(lines) == 10_002
    assert lines[1] == "  %0 = add(%x, 1f);"
    assert lines[-3] == "  %9998 = add(%9997, 1f);"
    assert lines[-2:] == ["  nn.relu(%9998)", "}"]

    def printing(n):
        y = relay.var("y", shape=(1, 16))
        body = y
        for i in range(n):
            body = relay.nn.relu(body) if i % 2 else relay.add(body, relay.const(1.0))
        return lambda: str(relay.Function([y], body))
    assert_scales_linearly(printing, 2_500, 10_000, repeat=2)
