"""Elementwise/broadcast ops: constructors, type relations, numpy references, errors."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op._opcheck import check, infer
from compiler.errors import CompilerError, TypeInferenceError
from compiler.ir.expr import const, var
from compiler.ir.types import TensorType
from compiler.op import tensor as T
from compiler.op.registry import OpPattern, get_def, make_call

RNG = np.random.default_rng(0)


def x(shape, dtype="float32", name="x"):
    return var(name, shape=shape, dtype=dtype)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                                  "sin", "cos", "tan", "atan", "floor", "ceil", "round", "trunc",
                                  "sign", "abs", "negative", "fast_exp", "fast_tanh", "copy",
                                  "log2", "asinh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_float(name, dtype):
    data = RNG.uniform(0.1, 3.0, (2, 3)).astype(dtype)
    out = check(getattr(T, name)(x((2, 3), dtype)), data)
    numpy_fn = {"rsqrt": lambda v: 1 / np.sqrt(v), "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
                "erf": lambda v: np.vectorize(__import__("math").erf)(v), "atan": np.arctan,
                "fast_exp": np.exp, "fast_tanh": np.tanh, "negative": np.negative,
                "copy": np.copy, "asinh": np.arcsinh}.get(name, getattr(np, name, None))
    np.testing.assert_allclose(out, numpy_fn(data), rtol=1e-6)
    assert get_def(name).pattern == OpPattern.ELEMWISE


def test_round_is_half_to_even_and_trunc_toward_zero():
    data = np.array([0.5, 1.5, 2.5, -0.5, -1.7], "float32")
    np.testing.assert_array_equal(check(T.round(x((5,))), data), [0, 2, 2, -0, -2])
    np.testing.assert_array_equal(check(T.trunc(x((5,))), data), [0, 1, 2, -0, -1])


def test_float_only_unary_rejects_int():
    with pytest.raises(TypeInferenceError, match="exp.*float dtype.*int32"):
        infer(T.exp(x((2,), "int32")))


def test_unary_int_ops_keep_dtype():
    data = np.array([-3, 0, 4], "int32")
    np.testing.assert_array_equal(check(T.abs(x((3,), "int32")), data), [3, 0, 4])
    np.testing.assert_array_equal(check(T.sign(x((3,), "int32")), data), [-1, 0, 1])
    np.testing.assert_array_equal(check(T.negative(x((3,), "int8")), data.astype("int8")),
                                  [3, 0, -4])


@pytest.mark.parametrize("name,fn", [("add", np.add), ("subtract", np.subtract),
                                     ("multiply", np.multiply), ("maximum", np.maximum),
                                     ("minimum", np.minimum), ("power", np.power)])
def test_binary_broadcast(name, fn):
    a = RNG.uniform(0.5, 2, (2, 1, 4)).astype("float32")
    b = RNG.uniform(0.5, 2, (3, 1)).astype("float32")
    call = getattr(T, name)(x((2, 1, 4)), x((3, 1), name="y"))
    assert infer(call) == TensorType((2, 3, 4), "float32")
    np.testing.assert_allclose(check(call, a, b), fn(a, b), rtol=1e-6)
    assert get_def(name).pattern == OpPattern.BROADCAST


def test_int_division_family_follows_tvm():
    a = np.array([7, -7, 7, -7], "int32")
    b = np.array([2, 2, -2, -2], "int32")
    xa, xb = x((4,), "int32"), x((4,), "int32", "y")
    np.testing.assert_array_equal(check(T.divide(xa, xb), a, b), [3, -3, -3, 3])  # truncdiv
    np.testing.assert_array_equal(check(T.trunc_divide(xa, xb), a, b), [3, -3, -3, 3])
    np.testing.assert_array_equal(check(T.floor_divide(xa, xb), a, b), [3, -4, -4, 3])
    np.testing.assert_array_equal(check(T.floor_mod(xa, xb), a, b), [1, 1, -1, -1])
    np.testing.assert_array_equal(check(T.mod(xa, xb), a, b), [1, -1, 1, -1])  # truncmod
    np.testing.assert_array_equal(check(T.trunc_mod(xa, xb), a, b), [1, -1, 1, -1])


def test_float_floor_ops():
    a = np.array([7.5, -7.5], "float32")
    b = np.array([2.0, 2.0], "float32")
    xa, xb = x((2,)), x((2,), name="y")
    np.testing.assert_array_equal(check(T.floor_divide(xa, xb), a, b), [3, -4])
    np.testing.assert_allclose(check(T.floor_mod(xa, xb), a, b), [1.5, 0.5])
    np.testing.assert_allclose(check(T.divide(xa, xb), a, b), [3.75, -3.75])


def test_comparisons_give_bool():
    a, b = np.array([1, 2, 3], "int32"), np.array([2], "int32")
    for name, fn in [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                     ("less_equal", np.less_equal), ("greater", np.greater),
                     ("greater_equal", np.greater_equal)]:
        call = getattr(T, name)(x((3,), "int32"), x((1,), "int32", "y"))
        assert infer(call) == TensorType((3,), "bool")
        np.testing.assert_array_equal(check(call, a, b), fn(a, b))


def test_logical_and_bitwise():
    p, q = np.array([True, False, True]), np.array([True, True, False])
    bp, bq = x((3,), "bool"), x((3,), "bool", "y")
    np.testing.assert_array_equal(check(T.logical_and(bp, bq), p, q), p & q)
    np.testing.assert_array_equal(check(T.logical_or(bp, bq), p, q), p | q)
    np.testing.assert_array_equal(check(T.logical_xor(bp, bq), p, q), p ^ q)
    np.testing.assert_array_equal(check(T.logical_not(bp), p), ~p)
    i, j = np.array([12, 10], "int32"), np.array([10, 1], "int32")
    ii, jj = x((2,), "int32"), x((2,), "int32", "y")
    np.testing.assert_array_equal(check(T.bitwise_and(ii, jj), i, j), [8, 0])
    np.testing.assert_array_equal(check(T.left_shift(ii, jj), i, j), [12 << 10, 20])
    with pytest.raises(TypeInferenceError, match="bitwise_and.*integer"):
        infer(T.bitwise_and(x((2,)), x((2,), name="y")))


def test_isnan_family():
    data = np.array([np.nan, np.inf, 1.0], "float32")
    np.testing.assert_array_equal(check(T.isnan(x((3,))), data), [True, False, False])
    np.testing.assert_array_equal(check(T.isinf(x((3,))), data), [False, True, False])
    np.testing.assert_array_equal(check(T.isfinite(x((3,))), data), [False, False, True])
    np.testing.assert_array_equal(check(T.isfinite(x((2,), "int32")),
                                        np.array([1, 2], "int32")), [True, True])


def test_clip_cast_where_like():
    data = np.array([-2.5, 0.5, 9.0], "float32")
    call = T.clip(x((3,)), 0, 6)
    assert call.attrs.a_min == 0.0 and call.attrs.a_max == 6.0
    assert call.attrs.type_key == "relay.attrs.ClipAttrs"
    np.testing.assert_array_equal(check(call, data), [0, 0.5, 6])
    out = check(T.cast(x((3,)), "int32"), data)
    np.testing.assert_array_equal(out, [-2, 0, 9])
    out = check(T.cast_like(x((3,)), x((1,), "int8", "y")), data, np.zeros(1, "int8"))
    assert out.dtype == np.int8
    cond = np.array([True, False, True])
    out = check(T.where(x((3,), "bool", "c"), x((3,)), x((1,), name="y")), cond, data,
                np.array([7], "float32"))
    np.testing.assert_array_equal(out, [-2.5, 7, 9])
    np.testing.assert_array_equal(check(T.zeros_like(x((3,))), data), [0, 0, 0])
    np.testing.assert_array_equal(check(T.ones_like(x((3,))), data), [1, 1, 1])
    out = check(T.full_like(x((3,)), const(4.0)), data, np.array(4.0, "float32"))
    np.testing.assert_array_equal(out, [4, 4, 4])


def test_sugar_builds_registered_calls():
    a, b = x((2,)), x((2,), name="y")
    assert (a + b).op is get_def("add").op
    assert (a / b).op.name == "divide"
    assert (-a).op.name == "negative"


def test_errors_name_the_op():
    with pytest.raises(TypeInferenceError, match=r"add: shapes \(2, 3\) and \(4,\)"):
        infer(T.add(x((2, 3)), x((4,), name="y")))
    with pytest.raises(TypeInferenceError, match="multiply: lhs and rhs must have the same "
                                                 "dtype, got float32 and int32"):
        infer(T.multiply(x((2,)), x((2,), "int32", "y")))
    with pytest.raises(TypeInferenceError, match="where: x and y"):
        infer(T.where(x((2,), "bool"), x((2,)), x((2,), "int32", "y")))
    with pytest.raises(CompilerError, match="add takes 2 argument"):
        make_call("add", [x((2,))])
    with pytest.raises(CompilerError, match="clip has no attribute 'low'"):
        make_call("clip", [x((2,))], low=0.0)
    with pytest.raises(CompilerError, match="unknown op 'ad'"):
        make_call("ad", [x((2,))])
    with pytest.raises(TypeInferenceError, match="cast: dtype 'float99'"):
        infer(make_call("cast", [x((2,))], dtype="float99"))
