"""relay.Any: symbolic dims, their printing and parsing (`?`), structural equality as TVM's,
and type inference through dynamic dims."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import CompilerError, TypeInferenceError
from compiler.ir.dims import (Any, bcast, broadcast_sides, collect_constraints, describe, dim_max,
                               dim_min, evaluate, symbols_of)
from compiler.ir.types import TensorType, structurally_equal_types


def infer(expr):
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(expr))
    return mod["main"].body.checked_type


def test_any_is_tvms_spelling_and_a_fresh_symbol():
    a, b = relay.Any(), tvm.tir.Any()
    assert isinstance(a, tvm.tir.Any) and str(a) == "?" and repr(b) == "?"
    assert a == a and a != b  # == is provable equality: two symbols are not known equal
    x = relay.var("x", shape=(a, 128))
    assert x.type_annotation.shape[0] is a and str(x.type_annotation) == "Tensor[(?, 128), float32]"


def test_arithmetic_is_kept_in_canonical_form():
    s = Any("s")
    assert s - s == 0 and isinstance(s - s, int)
    assert (2 * s + 4) // 2 == s + 2
    assert (s + 2 - 3) // 1 + 1 == s
    assert ((s + 2) // 2) * 2 != s + 2  # floor division does not cancel
    assert (s * 6) % 3 == 0 and (s + 1) % 1 == 0
    assert dim_min(1 << 60, s) == s and dim_max(0, s) == s and dim_min(0, s) == 0
    assert describe((s + 2 * Any("t") - 3) // 2 + 1) == "((s + 2*t - 3) // 2) + 1"


@pytest.mark.parametrize("use", [lambda d: d < 3, lambda d: bool(d), lambda d: int(d),
                                 lambda d: range(d), lambda d: d / 2])
def test_a_dynamic_dim_refuses_to_be_guessed(use):
    with pytest.raises(TypeError, match="dynamic dimension"):
        use(Any())


def test_printed_as_question_mark_and_parsed_back():
    mod = relay.parse("def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(2, ?), float32]) {\n"
                      "  add(%x, 1f)\n}")
    text = str(mod)
    assert "%x: Tensor[(?, 3), float32]" in text and "-> Tensor[(?, 3), float32]" in text
    again = relay.parse(text)
    tvm.ir.assert_structural_equal(again, mod)
    x, y = mod["main"].params
    assert x.type_annotation.shape[0] != y.type_annotation.shape[1]  # each ? is its own


def test_structural_equality_treats_every_any_alike_as_tvm():
    a, b = relay.Any(), relay.Any()
    ta, tb = TensorType((a, 3)), TensorType((b, 3))
    assert ta != tb and structurally_equal_types(ta, tb)
    assert not structurally_equal_types(ta, TensorType((4, 3)))
    fa = relay.Function([relay.var("x", ta)], relay.nn.relu(relay.var("x", ta)))
    xa, xb = relay.var("x", ta), relay.var("x", tb)
    fa, fb = relay.Function([xa], relay.nn.relu(xa)), relay.Function([xb], relay.nn.relu(xb))
    assert tvm.ir.structural_equal(fa, fb)
    assert tvm.ir.structural_hash(fa) == tvm.ir.structural_hash(fb)
    xc = relay.var("x", shape=(4, 3))
    assert not tvm.ir.structural_equal(fa, relay.Function([xc], relay.nn.relu(xc)))


def test_infer_type_propagates_symbols_through_a_network():
    n, h = relay.Any(), relay.Any()
    x = relay.var("x", shape=(n, 3, h, h))
    w = relay.var("w", shape=(8, 3, 3, 3))
    y = relay.nn.conv2d(x, w, padding=(1, 1), strides=(2, 2))
    y = relay.nn.max_pool2d(relay.nn.relu(y), pool_size=(2, 2), strides=(2, 2))
    out = relay.nn.dense(relay.nn.batch_flatten(y), relay.var("d", shape=(10, 8 * 56 * 56)))
    ty = infer(relay.Function([x, w], relay.nn.softmax(out)))
    assert str(ty) == "Tensor[(?, 10), float32]"
    assert ty.shape[0] is n  # the batch symbol itself, not a new unknown


def test_static_conflicts_are_still_errors_and_dynamic_ones_are_recorded():
    x = relay.var("x", shape=(relay.Any(), 512))
    w = relay.var("w", shape=(768, 768))
    with pytest.raises(TypeInferenceError, match="reduction dims differ"):
        infer(relay.Function([x, w], relay.nn.dense(x, w)))
    x = relay.var("x", shape=(relay.Any(), relay.Any()))
    with collect_constraints() as found:
        ty = infer(relay.Function([x, w], relay.nn.dense(x, w)))
    assert str(ty) == "Tensor[(?, 768), float32]"
    assert [(k, b) for k, _, b, _ in found] == [("eq", 768)]


def test_broadcast_follows_tvm():
    a, b = relay.Any(), relay.Any()
    x, y, z = (relay.var("x", shape=(a, 1)), relay.var("y", shape=(5,)),
               relay.var("z", shape=(b, 5)))
    assert infer(relay.add(x, y)).shape == (a, 5)  # ? against 5 gives 5, checked at run time
    assert str(infer(relay.add(x, z))) == "Tensor[(?, 5), float32]"


def test_if_branches_unify_to_any():
    c = relay.var("c", shape=(), dtype="bool")
    x, y = relay.var("x", shape=(relay.Any(), 3)), relay.var("y", shape=(4, 3))
    assert str(infer(relay.Function([c, x, y], relay.If(c, x, y)))) == \
        "Tensor[(?, 3), float32]"


def test_interpreter_runs_dynamic_inputs_and_shape_of_is_not_folded():
    x = relay.var("x", shape=(relay.Any(), 3))
    f = relay.Function([x], relay.Tuple([relay.shape_of(x), relay.ndarray_size(x)]))
    mod = relay.transform.FoldConstant()(tvm.IRModule.from_expr(f))
    assert "shape_of(%x)" in str(mod)
    run = relay.create_executor("debug", mod=mod).evaluate()
    shape, size = run(np.zeros((7, 3), "float32"))
    assert shape.numpy().tolist() == [7, 3] and size.numpy() == 21


def test_relay_build_refuses_dynamic_shapes_with_advice():
    x = relay.var("x", shape=(relay.Any(), 3))
    with pytest.raises(CompilerError, match=r"dynamic shapes \(inputs 'x' Tensor\[\(\?, 3\), "
                                            r"float32\]\).*VM"):
        relay.build(relay.Function([x], relay.nn.relu(x)))


def test_concrete_shape_of_a_dynamic_type_is_a_clear_error():
    with pytest.raises(TypeError, match=r"Tensor\[\(\?, 3\), float32\] has dynamic"):
        TensorType((relay.Any(), 3)).concrete_shape


def test_a_dim_evaluates_at_values_of_its_symbols():
    b, s = Any("b"), Any("s")
    d = (2 * b * s + 4) // 2 + dim_max(s, 3) % 5
    assert set(symbols_of(d)) == {b.symbol, s.symbol} and symbols_of(7) == []
    assert evaluate(d, {b.symbol: 3, s.symbol: 7}) == 3 * 7 + 2 + 7 % 5
    assert evaluate(12, {}) == 12
    m = bcast(s, Any("t"))
    (left, right), = broadcast_sides(m)
    assert left == [s.symbol] and len(right) == 1
    assert evaluate(m, {s.symbol: 1, right[0]: 6}) == 6
    with pytest.raises(ValueError, match="do not broadcast"):
        evaluate(m, {s.symbol: 2, right[0]: 6})
    with pytest.raises(KeyError):
        evaluate(b + 1, {})
