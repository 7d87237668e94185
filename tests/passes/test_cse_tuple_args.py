"""EliminateCommonSubexpr compares tuple arguments by value, as TVM's does."""
from __future__ import annotations

import compiler as tvm
from compiler import relay


def _run_cse(func):
    mod = tvm.IRModule.from_expr(func)
    mod = relay.transform.InferType()(mod)
    return relay.transform.EliminateCommonSubexpr()(mod)


def test_calls_with_separate_equal_tuples_merge():
    a = relay.var("a", shape=(2, 3))
    b = relay.var("b", shape=(2, 3))
    c1 = relay.concatenate(relay.Tuple([a, b]), axis=0)
    c2 = relay.concatenate(relay.Tuple([a, b]), axis=0)
    before = relay.Function([a, b], relay.add(c1, c2))

    a2 = relay.var("a", shape=(2, 3))
    b2 = relay.var("b", shape=(2, 3))
    c = relay.concatenate(relay.Tuple([a2, b2]), axis=0)
    expected = tvm.IRModule.from_expr(relay.Function([a2, b2], relay.add(c, c)))
    expected = relay.transform.InferType()(expected)
    tvm.ir.assert_structural_equal(_run_cse(before), expected)


def test_nested_equal_tuples_merge_and_different_ones_do_not():
    a = relay.var("a", shape=(2,))
    b = relay.var("b", shape=(2,))

    def nested_concat(x, y):
        inner = relay.concatenate(relay.Tuple([x, y]), axis=0)
        return relay.concatenate(relay.Tuple([inner, relay.Tuple([x])[0]]), axis=0)

    merged = _run_cse(relay.Function([a, b], relay.add(nested_concat(a, b), nested_concat(a, b))))
    body = merged["main"].body
    assert body.args[0] is body.args[1]

    kept = _run_cse(relay.Function([a, b], relay.add(nested_concat(a, b), nested_concat(b, a))))
    body = kept["main"].body
    assert body.args[0] is not body.args[1]
