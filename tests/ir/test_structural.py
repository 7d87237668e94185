"""structural_equal / structural_hash / assert_structural_equal follow TVM's semantics."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from compiler import relay
from compiler.ir import (DictAttrs, IRModule, TensorType, assert_structural_equal,
                         structural_equal, structural_hash)
from tests.scaling import assert_scales_linearly

T4 = TensorType((4,), "float32")


def equal_and_hash_equal(a, b, map_free_vars=False) -> bool:
    """Equality, checked to agree with the hash whenever it holds."""
    same = structural_equal(a, b, map_free_vars)
    assert structural_equal(b, a, map_free_vars) == same
    if same:
        assert structural_hash(a, map_free_vars) == structural_hash(b, map_free_vars)
    return same


def make_fn(name="x", alpha=0.1, value=1.0):
    x = relay.var(name, shape=(4,))
    body = relay.nn.leaky_relu(relay.add(x, relay.const(value)), alpha=alpha)
    return relay.Function([x], body, T4)


def test_alpha_equivalent_functions_are_equal_and_hash_equal():
    assert equal_and_hash_equal(make_fn("x"), make_fn("renamed"))


def test_param_order_matters():
    x, y = relay.var("x", shape=(4,)), relay.var("y", shape=(4,))
    assert not equal_and_hash_equal(relay.Function([x, y], relay.subtract(x, y)),
                                    relay.Function([y, x], relay.subtract(x, y)))


def test_var_annotations_compared():
    a = relay.Function([relay.var("x", shape=(4,))], relay.const(1))
    b = relay.Function([relay.var("x", shape=(5,))], relay.const(1))
    c = relay.Function([relay.var("x")], relay.const(1))
    assert not equal_and_hash_equal(a, b)
    assert not equal_and_hash_equal(a, c)


def test_free_vars_equal_only_to_themselves_unless_mapped():
    x, y = relay.var("x", shape=(4,)), relay.var("y", shape=(4,))
    assert equal_and_hash_equal(relay.add(x, x), relay.add(x, x))
    assert not equal_and_hash_equal(relay.add(x, x), relay.add(y, y))
    assert equal_and_hash_equal(relay.add(x, x), relay.add(y, y), map_free_vars=True)
    # mapping stays a bijection: x cannot map to both y and x
    assert not equal_and_hash_equal(relay.add(x, x), relay.add(y, x), map_free_vars=True)
    assert not equal_and_hash_equal(relay.add(x, y), relay.add(y, y), map_free_vars=True)


def test_bound_var_never_matches_free_var():
    x, z = relay.var("x", shape=(4,)), relay.var("z", shape=(4,))
    assert not equal_and_hash_equal(relay.Function([x], relay.add(x, z)),
                                    relay.Function([z], relay.add(x, z)), map_free_vars=True)


def test_attrs_differ():
    assert not equal_and_hash_equal(make_fn(alpha=0.1), make_fn(alpha=0.2))
    assert equal_and_hash_equal(make_fn(alpha=0.1), make_fn(alpha=0.1))


def test_constant_value_dtype_and_shape_differ():
    assert not equal_and_hash_equal(make_fn(value=1.0), make_fn(value=2.0))
    assert not equal_and_hash_equal(relay.const(1, "int32"), relay.const(1, "int64"))
    assert not equal_and_hash_equal(relay.const(np.zeros((2, 3), "float32")),
                                    relay.const(np.zeros((3, 2), "float32")))
    big = np.arange(1000, dtype="float32")
    assert equal_and_hash_equal(relay.const(big), relay.const(big.copy()))


def test_sharing_differs():
    x = relay.var("x", shape=(4,))
    y = relay.exp(x)
    shared = relay.Function([x], relay.add(y, y))
    copies = relay.Function([x], relay.add(relay.exp(x), relay.exp(x)))
    assert not structural_equal(shared, copies)
    assert not structural_equal(copies, shared)
    assert structural_equal(shared, relay.Function([x], relay.add(y, y)))


def test_op_and_arity_differ():
    x = relay.var("x", shape=(4,))
    assert not equal_and_hash_equal(relay.add(x, x), relay.multiply(x, x))
    assert not equal_and_hash_equal(relay.Tuple([x]), relay.Tuple([x, x]))
    assert not equal_and_hash_equal(relay.TupleGetItem(relay.Tuple([x, x]), 0),
                                    relay.TupleGetItem(relay.Tuple([x, x]), 1))
    assert not equal_and_hash_equal(relay.add(x, x), relay.Tuple([x, x]))


def test_nested_functions_with_attrs():
    def fused(attr_value=1, pname="p0"):
        x = relay.var("x", shape=(4,))
        p = relay.var(pname, shape=(4,))
        inner = relay.Function([p], relay.exp(p), T4).with_attr("Primitive", attr_value)
        return relay.Function([x], relay.Call(inner, [x]), T4)

    assert equal_and_hash_equal(fused(pname="p0"), fused(pname="q"))
    assert not equal_and_hash_equal(fused(1), fused(0))
    no_attrs = relay.Function([relay.var("p")], relay.const(1))
    empty_attrs = relay.Function([relay.var("p")], relay.const(1), attrs=DictAttrs({}))
    assert equal_and_hash_equal(no_attrs, empty_attrs)


def test_ret_type_compared():
    x = relay.var("x", shape=(4,))
    assert not equal_and_hash_equal(relay.Function([x], x, T4), relay.Function([x], x))


def test_let_binding_is_a_definition_point():
    def program(name):
        x = relay.var("x", shape=(4,))
        v = relay.var(name, shape=(4,))
        return relay.Function([x], relay.Let(v, relay.exp(x), relay.add(v, x)))

    assert equal_and_hash_equal(program("a"), program("b"))
    x = relay.var("x", shape=(4,))
    v = relay.var("v", shape=(4,))
    uses_x = relay.Function([x], relay.Let(v, relay.exp(x), relay.add(x, x)))
    assert not equal_and_hash_equal(program("a"), uses_x)


def test_if_branches_compared():
    c = relay.var("c", "bool")
    x = relay.var("x", shape=(4,))
    a = relay.Function([c, x], relay.If(c, relay.exp(x), x))
    b = relay.Function([c, x], relay.If(c, x, relay.exp(x)))
    assert not equal_and_hash_equal(a, b)
    assert equal_and_hash_equal(a, relay.Function([c, x], relay.If(c, relay.exp(x), x)))


def test_modules_match_functions_by_name():
    def module(fname, pname):
        mod = IRModule()
        gv = relay.GlobalVar(fname)
        p = relay.var(pname, shape=(4,))
        mod[gv] = relay.Function([p], relay.exp(p))
        x = relay.var("x", shape=(4,))
        mod["main"] = relay.Function([x], relay.Call(gv, [x]))
        return mod

    assert equal_and_hash_equal(module("f", "a"), module("f", "b"))
    assert not equal_and_hash_equal(module("f", "a"), module("g", "a"))


def test_types_compare_by_value():
    assert equal_and_hash_equal(TensorType((1, 2), "float32"), TensorType([1, 2], "float32"))
    assert not structural_equal(TensorType((1, 2)), TensorType((2, 1)))


def test_assert_structural_equal_reports_path_and_both_sides():
    assert_structural_equal(make_fn("a"), make_fn("b"))
    with pytest.raises(ValueError) as info:
        assert_structural_equal(make_fn(alpha=0.1), make_fn(alpha=0.25))
    message = str(info.value)
    assert "at .body: call attrs differ" in message
    assert "alpha=0.1f" in message and "alpha=0.25f" in message
    with pytest.raises(ValueError, match=r"\.body\.args\[0\]\.args\[1\]: constant values"):
        assert_structural_equal(make_fn(value=1.0), make_fn(value=3.0))
    x = relay.var("x", shape=(4,))
    y = relay.exp(x)
    with pytest.raises(ValueError, match=r"at \.args\[1\]: .*share sub-expressions"):
        assert_structural_equal(relay.add(y, y), relay.add(relay.exp(x), relay.exp(x)))


def test_hash_is_stable_across_processes():
    code = ("from compiler import relay; from compiler.ir import structural_hash, TensorType;"
            "x = relay.var('x', shape=(4,));"
            "print(structural_hash(relay.Function([x], relay.nn.leaky_relu("
            "relay.add(x, relay.const(1.0)), alpha=0.1), TensorType((4,)))))")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONHASHSEED": seed},
                              cwd=_repo_root()).stdout.strip() for seed in ("1", "2")}
    assert outputs == {str(structural_hash(make_fn()))}


def _repo_root() -> str:
    from pathlib import Path
    return str(Path(__file__).resolve().parents[2])


@pytest.fixture
def default_recursion_limit():
    """Run under Python's default recursion limit whatever the test runner set."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


def chain(n: int):
    x = relay.var("x", shape=(1, 16))
    e = x
    for i in range(n):
        e = relay.nn.relu(e) if i % 2 else relay.add(e, relay.const(1.0))
    return relay.Function([x], e)


def test_ten_thousand_op_chain_compares_and_hashes(default_recursion_limit):
    a, b, shorter = chain(10_000), chain(10_000), chain(9_998)
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    assert not structural_equal(a, shorter)
    assert structural_hash(a) != structural_hash(shorter)

    def compare_and_hash(n):
        x, y = chain(n), chain(n)
        return lambda: (structural_equal(x, y), structural_hash(x), structural_hash(y))
    assert_scales_linearly(compare_and_hash, 2_500, 10_000, repeat=2)
