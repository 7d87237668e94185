"""compiler.analysis: free/bound/all vars in first-occurrence order, well_formed, post-order."""
from __future__ import annotations

import sys

import pytest

from compiler.analysis import all_vars, bound_vars, free_vars, post_order_visit, well_formed
from compiler.ir import Call, Function, If, Let, Op, TensorType, Tuple, TupleGetItem, Var
from compiler.op import registry
from compiler.op.registry import OpDef, OpPattern

T = TensorType((3,), "float32")


@pytest.fixture(autouse=True, scope="module")
def _pair_op_registered():
    """A two-input test op, so these tests need no op library."""
    with registry.temporary_ops(OpDef("test.analysis_pair", 2, lambda types, attrs: types[0],
                                      OpPattern.BROADCAST, lambda xs, attrs: xs[0])):
        yield


def _pair_op() -> Op:
    return Op.get("test.analysis_pair")


def pair(a, b):
    return Call(_pair_op(), [a, b])


def test_free_vars_in_order_of_first_occurrence():
    x, y, z = Var("x", T), Var("y", T), Var("z", T)
    expr = pair(pair(y, x), pair(z, y))
    assert free_vars(expr) == [y, x, z]
    assert bound_vars(expr) == []
    assert all_vars(expr) == [y, x, z]


def test_params_and_let_vars_are_bound():
    x, p, v = Var("x", T), Var("p", T), Var("v", T)
    fn = Function([p], pair(p, x))
    expr = Let(v, x, Tuple([Call(fn, [v]), TupleGetItem(Tuple([v]), 0)]))
    assert free_vars(expr) == [x]
    assert bound_vars(expr) == [v, p]
    assert all_vars(expr) == [v, x, p]
    assert free_vars(fn) == [x]
    assert bound_vars(fn) == [p]


def test_if_branches_are_scanned():
    c, a, b = Var("c", TensorType((), "bool")), Var("a", T), Var("b", T)
    assert free_vars(If(c, a, b)) == [c, a, b]


def test_post_order_visit_children_first():
    x, y = Var("x", T), Var("y", T)
    inner = pair(x, y)
    outer = pair(inner, x)
    seen = []
    post_order_visit(outer, seen.append)
    assert seen.index(inner) < seen.index(outer)
    assert seen.count(x) == 1 and seen[-1] is outer


def test_well_formed_accepts_normal_programs():
    x, v, w = Var("x", T), Var("v", T), Var("w", T)
    expr = Let(v, x, Let(w, pair(v, x), pair(w, v)))
    assert well_formed(expr)
    assert well_formed(Function([x], expr))


def test_var_bound_twice_is_ill_formed():
    x, v = Var("x", T), Var("v", T)
    assert not well_formed(Let(v, x, Let(v, x, v)))
    assert not well_formed(Tuple([Function([x], x), Function([x], x)]))
    assert not well_formed(Function([x, x], x))


def test_bound_var_used_outside_its_scope_is_ill_formed():
    x, p = Var("x", T), Var("p", T)
    fn = Function([p], p)
    assert not well_formed(Tuple([fn, p]))
    v = Var("v", T)
    assert not well_formed(Tuple([Let(v, x, v), v]))


def test_long_let_chain_is_fine_under_the_recursion_limit():
    assert sys.getrecursionlimit() <= 10000
    x = Var("x", T)
    lets = []
    prev = x
    for i in range(10000):
        v = Var(f"v{i}", T)
        lets.append((v, pair(prev, x)))
        prev = v
    body = prev
    for v, value in reversed(lets):
        body = Let(v, value, body)
    assert well_formed(body)
    assert free_vars(body) == [x]
    assert len(bound_vars(body)) == 10000
