"""DeadCodeElimination: unused lets vanish (chains too), inline_once, impurity, the pass's info."""
from __future__ import annotations

import numpy as np

import compiler as tvm
from compiler import relay
from compiler.op.interpreter import evaluate
from compiler.ir import assert_structural_equal, structural_equal
from compiler.passes.dead_code import DeadCodeElimination, eliminate_dead_code
from compiler.transform import PassContext, Sequential
from tests.passes._helpers import run_infer_type, run_opt_pass

T = relay.TensorType((2, 3), "float32")


def dce(expr, **kwargs):
    return run_opt_pass(run_infer_type(expr), DeadCodeElimination(**kwargs))


def test_unused_let_is_removed():
    x = relay.var("x", T)
    a = relay.var("a")
    before = relay.Function([x], relay.Let(a, relay.add(x, x), relay.multiply(x, x)))
    expected = relay.Function([x], relay.multiply(x, x))
    assert_structural_equal(dce(before), run_infer_type(expected))


def test_used_let_is_kept():
    x = relay.var("x", T)
    a = relay.var("a")
    before = relay.Function([x], relay.Let(a, relay.add(x, x), relay.multiply(a, a)))
    after = dce(before)
    assert isinstance(after.body, relay.Let)
    assert_structural_equal(after, run_infer_type(before))


def test_chain_of_dead_lets_dies_in_one_run():
    # b is only used by c, c by nobody: both go; a is used by the body and stays
    x = relay.var("x", T)
    a, b, c = relay.var("a"), relay.var("b"), relay.var("c")
    body = relay.Let(a, relay.add(x, x),
                     relay.Let(b, relay.multiply(a, x),
                               relay.Let(c, relay.subtract(b, a), relay.exp(a))))
    expected = relay.Let(a, relay.add(x, x), relay.exp(a))
    assert_structural_equal(dce(relay.Function([x], body)),
                            run_infer_type(relay.Function([x], expected)))


def test_inline_once():
    x = relay.var("x", T)
    a, b = relay.var("a"), relay.var("b")
    before = relay.Function([x], relay.Let(a, relay.add(x, x),
                                           relay.Let(b, relay.exp(a), relay.multiply(b, b))))
    # a is used once (by b's value) and is inlined; b is used twice and stays
    expected = relay.Function([x], relay.Let(b, relay.exp(relay.add(x, x)),
                                             relay.multiply(b, b)))
    assert_structural_equal(dce(before, inline_once=True), run_infer_type(expected))
    # without inline_once nothing changes
    assert_structural_equal(dce(before), run_infer_type(before))


def test_inline_once_does_not_inline_into_functions():
    x = relay.var("x", T)
    a, p = relay.var("a"), relay.var("p", T)
    inner = relay.Function([p], relay.add(p, a))  # may run many times: keep a outside
    before = relay.Function([x], relay.Let(a, relay.exp(x), relay.Call(inner, [x])))
    after = dce(before, inline_once=True)
    assert isinstance(after.body, relay.Let)
    assert after.body.var.name_hint == "a"


def test_impure_binding_is_kept_unless_impurity_is_ignored():
    x = relay.var("x", T)
    d = relay.var("d")
    before = relay.Function([x], relay.Let(d, relay.nn.dropout(x), relay.exp(x)))
    kept = dce(before)
    assert isinstance(kept.body, relay.Let) and kept.body.var.name_hint == "d"
    dropped = dce(before, ignore_impurity=True)
    assert_structural_equal(dropped, run_infer_type(relay.Function([x], relay.exp(x))))


def test_call_of_a_let_bound_pure_function_is_pure():
    x = relay.var("x", T)
    p = relay.var("p", T)
    f, r = relay.var("f"), relay.var("r")
    fn = relay.Function([p], relay.exp(p))
    before = relay.Function([x], relay.Let(f, fn, relay.Let(r, relay.Call(f, [x]), x)))
    assert_structural_equal(dce(before), run_infer_type(relay.Function([x], x)))


def test_dead_lets_inside_if_and_inner_functions():
    x = relay.var("x", T)
    c = relay.var("c", "bool")
    a, b = relay.var("a"), relay.var("b")
    p = relay.var("p", T)
    inner = relay.Function([p], relay.Let(b, relay.add(p, p), p))
    before = relay.Function([x, c], relay.If(
        c, relay.Let(a, relay.exp(x), relay.Call(inner, [x])), x))
    expected_inner = relay.Function([p], p)
    expected = relay.Function([x, c], relay.If(c, relay.Call(expected_inner, [x]), x))
    assert_structural_equal(dce(before), run_infer_type(expected))


def test_no_change_returns_the_same_function():
    x = relay.var("x", T)
    func = run_infer_type(relay.Function([x], relay.add(x, x)))
    assert eliminate_dead_code(func) is func


def test_semantics_preserved():
    x = relay.var("x", T)
    a, b, c = relay.var("a"), relay.var("b"), relay.var("c")
    body = relay.Let(a, relay.add(x, relay.const(1.0)),
                     relay.Let(b, relay.multiply(a, a),
                               relay.Let(c, relay.exp(x), relay.subtract(b, a))))
    func = relay.Function([x], body)
    data = np.arange(6, dtype="float32").reshape(2, 3)
    want = evaluate(func, [data])
    for inline in (False, True):
        out = dce(func, inline_once=inline)
        np.testing.assert_allclose(evaluate(out, [data]), want)
        assert "exp" not in str(out)


def test_pass_info_and_sequential_opt_level():
    p = DeadCodeElimination()
    assert p.info.name == "DeadCodeElimination"
    assert p.info.opt_level == 1
    assert list(p.info.required) == ["InferType"]
    assert "DeadCodeElimination" in str(p)
    assert relay.transform.DeadCodeElimination is DeadCodeElimination
    x = relay.var("x", T)
    a = relay.var("a")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Let(a, relay.exp(x), x)))
    seq = Sequential([DeadCodeElimination()])
    with PassContext(opt_level=0):
        untouched = seq(mod)
    assert isinstance(untouched["main"].body, relay.Let)
    with PassContext(opt_level=1):
        cleaned = seq(mod)
    assert isinstance(cleaned["main"].body, relay.Var)
    assert structural_equal(mod["main"].body.value, relay.exp(x))  # the input is untouched
