"""The debug interpreter: ops, tuples, let, if, nested and global functions, long chains."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.op.interpreter import InterpreterError, evaluate
from compiler.ir.expr import Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var, const
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.op.registry import make_call


def _var(name, shape=(2,), dtype="float32"):
    return Var(name, TensorType(shape, dtype))


def test_let_tuple_and_getitem():
    x, t = _var("x"), Var("t")
    body = Let(t, Tuple([x, make_call("add", [x, x])]), TupleGetItem(t, 1))
    out = evaluate(Function([x], body), [np.array([1, 2], np.float32)])
    assert out.tolist() == [2, 4]


@pytest.mark.parametrize("flag,expected", [(True, [2, 3]), (False, [0, 1])])
def test_if_takes_one_branch(flag, expected):
    c, x = _var("c", (), "bool"), _var("x")
    body = If(c, make_call("add", [x, const(1.0)]), make_call("subtract", [x, const(1.0)]))
    assert evaluate(Function([c, x], body), [np.bool_(flag), np.array([1, 2], np.float32)]
                    ).tolist() == expected


def test_primitive_function_call_and_global_var():
    a = _var("a")
    prim = Function([a], make_call("multiply", [a, a])).with_attr("Primitive", 1)
    x = _var("x")
    mod = IRModule()
    mod["square"] = Function([a], make_call("multiply", [a, a]))
    gv = mod.get_global_var("square")
    main = Function([x], make_call("add", [make_call_fn(prim, x), make_call_fn(gv, x)]))
    mod["main"] = main
    assert evaluate(mod, [np.array([3, 4], np.float32)]).tolist() == [18, 32]


def make_call_fn(fn, *args):
    from compiler.ir.expr import Call
    return Call(fn, list(args))


def test_long_chain_does_not_recurse():
    x = _var("x")
    body = x
    for _ in range(20000):
        body = make_call("add", [body, const(1.0)])
    assert evaluate(Function([x], body), [np.zeros(2, np.float32)]).tolist() == [20000] * 2


def test_argument_checks_name_the_parameter():
    x = _var("x")
    with pytest.raises(InterpreterError, match="'x' expects \\(2,\\) float32, got \\(3,\\)"):
        evaluate(Function([x], x), [np.zeros(3, np.float32)])
    with pytest.raises(InterpreterError, match="takes 1 argument"):
        evaluate(Function([x], x), [])


def test_free_variable_is_an_error():
    x = _var("x")
    with pytest.raises(InterpreterError, match="free variable 'x'"):
        evaluate(make_call("add", [x, x]))


def test_global_var_unknown():
    with pytest.raises(InterpreterError, match="@nope"):
        evaluate(make_call_fn(GlobalVar("nope")))
