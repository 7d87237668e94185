"""structural_hash agrees with structural_equal (TVM's SEqual/SHash contract)."""
from __future__ import annotations

import compiler as tvm
from compiler import relay


def _agree(lhs, rhs, map_free_vars=False):
    equal = tvm.ir.structural_equal(lhs, rhs, map_free_vars=map_free_vars)
    same_hash = (tvm.ir.structural_hash(lhs, map_free_vars=map_free_vars)
                 == tvm.ir.structural_hash(rhs, map_free_vars=map_free_vars))
    return equal, same_hash


def test_distinct_free_vars_hash_apart_unless_mapped():
    x = relay.var("x", shape=(2,))
    y = relay.var("y", shape=(2,))
    assert _agree(relay.exp(x), relay.exp(y)) == (False, False)
    assert _agree(relay.exp(x), relay.exp(y), map_free_vars=True) == (True, True)
    assert _agree(relay.exp(x), relay.exp(x)) == (True, True)


def test_sharing_is_part_of_the_hash():
    x = relay.var("x", shape=(2,))
    shared = relay.exp(x)
    dag = relay.Function([x], relay.add(shared, shared))
    x2 = relay.var("x", shape=(2,))
    tree = relay.Function([x2], relay.add(relay.exp(x2), relay.exp(x2)))
    assert _agree(dag, tree) == (False, False)
    x3 = relay.var("x", shape=(2,))
    shared3 = relay.exp(x3)
    assert _agree(dag, relay.Function([x3], relay.add(shared3, shared3))) == (True, True)


def test_alpha_equivalent_functions_hash_alike():
    def make():
        a = relay.var("a", shape=(3,))
        b = relay.var("b", shape=(3,))
        v = relay.var("v")
        body = relay.Let(v, relay.add(a, b), relay.multiply(v, a))
        return relay.Function([a, b], body)
    assert _agree(make(), make()) == (True, True)
    a = relay.var("a", shape=(3,))
    b = relay.var("b", shape=(3,))
    swapped = relay.Function([a, b], relay.Let(relay.var("v"), relay.add(b, a), b))
    assert _agree(make(), swapped) == (False, False)


def test_function_attrs_holding_a_param_compare_under_the_mapping():
    def make():
        x = relay.var("x", shape=(2,))
        y = relay.var("y", shape=(2,))
        return relay.Function([x, y], relay.add(x, y)).with_attr("Donated", (x,))
    assert _agree(make(), make()) == (True, True)
    x = relay.var("x", shape=(2,))
    y = relay.var("y", shape=(2,))
    other = relay.Function([x, y], relay.add(x, y)).with_attr("Donated", (y,))
    assert _agree(make(), other) == (False, False)


def test_modules_hash_like_their_equality():
    def make(fn_name):
        x = relay.var("x", shape=(2,))
        return tvm.IRModule({relay.GlobalVar(fn_name): relay.Function([x], relay.exp(x))})
    assert _agree(make("f"), make("f")) == (True, True)
    assert _agree(make("f"), make("g")) == (False, False)
