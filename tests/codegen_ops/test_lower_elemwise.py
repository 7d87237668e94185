"""Elementwise / broadcast ops lowered alone, against the registry's numpy references."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.codegen_ops.lowering_harness import check_op, rand

FLOAT_UNARY = {  # op -> input range (lo, hi)
    "exp": (-10, 10), "fast_exp": (-10, 10), "log": (0.01, 100), "log2": (0.01, 100),
    "log10": (0.01, 100), "sqrt": (0, 100), "rsqrt": (0.01, 100), "tanh": (-5, 5),
    "fast_tanh": (-5, 5), "sigmoid": (-10, 10), "erf": (-3, 3), "fast_erf": (-3, 3),
    "sin": (-6, 6), "cos": (-6, 6), "tan": (-1.2, 1.2), "asin": (-1, 1), "acos": (-1, 1),
    "atan": (-10, 10), "sinh": (-5, 5), "cosh": (-5, 5), "asinh": (-10, 10),
    "acosh": (1, 10), "atanh": (-0.99, 0.99),
}
ANY_UNARY = ["negative", "abs", "floor", "ceil", "round", "trunc", "sign", "copy", "logical_not"]
BINARY_ARITH = ["add", "subtract", "multiply", "divide", "floor_divide", "trunc_divide",
                "floor_mod", "trunc_mod", "mod", "maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
LOGIC = ["logical_and", "logical_or", "logical_xor"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]
SHIFTS = ["left_shift", "right_shift"]
OPS_TESTED = {*FLOAT_UNARY, *ANY_UNARY, *BINARY_ARITH, *COMPARE, *LOGIC, *BITWISE, *SHIFTS,
              "power", "bitwise_not", "isnan", "isinf", "isfinite", "clip", "cast", "cast_like",
              "where", "zeros_like", "ones_like", "full_like", "nn.relu", "nn.leaky_relu",
              "nn.prelu", "nn.bias_add"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(FLOAT_UNARY))
def test_float_unary(op, dtype):
    lo, hi = FLOAT_UNARY[op]
    x = rand((3, 17), dtype, lo=lo, hi=hi)
    check_op(op, [x], rtol=2e-6 if dtype == "float32" else 1e-12, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
@pytest.mark.parametrize("op", ANY_UNARY)
def test_any_unary(op, dtype):
    x = rand((4, 9), dtype, lo=-4, hi=4, seed=1)
    if dtype == "float32":
        x[0, :5] = [0.5, -0.5, 1.5, 2.5, -2.5]  # rounding ties go to even, as numpy
    check_op(op, [x])


def test_unary_special_values():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0], dtype="float32")
    for op in ("abs", "negative", "floor", "sign", "exp", "sqrt", "isnan", "isinf", "isfinite"):
        check_op(op, [x])


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "int64", "bool"])
def test_bitwise(dtype):
    a, b = rand((5, 13), dtype, seed=2, lo=-12, hi=12), rand((13,), dtype, seed=3, lo=-12, hi=12)
    if dtype != "bool":
        info = np.iinfo(dtype)
        a[0, :4] = [info.min, info.max, -1 if info.min < 0 else 0, 0]
    for op in BITWISE + ["bitwise_not"]:
        check_op(op, [a, b] if op != "bitwise_not" else [a])


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "int64"])
def test_shifts(dtype):
    info = np.iinfo(dtype)
    bits = info.bits
    a = rand((3, 16), dtype, seed=4, lo=-12, hi=12)
    a[0, :3] = [info.min, info.max, 1]
    b = np.resize(np.arange(-2 if info.min < 0 else 0, bits + 3), a.shape).astype(dtype)
    for op in SHIFTS:
        check_op(op, [a, b])


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "uint8", "float64"])
def test_binary_arith(dtype):
    a = rand((4, 1, 6), dtype, seed=5, lo=-5, hi=5)
    b = rand((3, 6), dtype, seed=6, lo=-5, hi=5)
    if dtype[0] in "iu":
        b[0, :2] = 0  # integer x / 0 and x % 0 are 0, as the reference
    else:
        b[np.abs(b) < 0.1] = 0.5
    for op in BINARY_ARITH + COMPARE + LOGIC:
        check_op(op, [a, b], rtol=1e-6)


def test_int_division_extremes():
    a = np.array([-7, 7, -7, 7, -128, -128, 0, 5], dtype="int8")
    b = np.array([2, -2, -2, 2, -1, 1, 0, 0], dtype="int8")
    for op in ("divide", "floor_divide", "trunc_divide", "floor_mod", "trunc_mod", "mod"):
        check_op(op, [a, b])


def test_max_min_nan():
    a = np.array([np.nan, 1.0, np.nan, -0.0], dtype="float32")
    b = np.array([1.0, np.nan, np.nan, 0.0], dtype="float32")
    check_op("maximum", [a, b])
    check_op("minimum", [a, b])


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
def test_power(dtype):
    if dtype == "float32":
        a, b = rand((3, 7), dtype, lo=0.1, hi=4), rand((7,), dtype, seed=1, lo=-2, hi=3)
    else:
        a, b = rand((3, 7), dtype, lo=-0.5, hi=0.5), rand((7,), dtype, seed=1, lo=0, hi=0.7)
    check_op("power", [a, b], rtol=1e-5)


def test_bool_arith():
    a, b = rand((3, 4), "bool", seed=1), rand((4,), "bool", seed=2)
    for op in ("add", "multiply", "maximum", "minimum", "equal", "less", "logical_xor"):
        check_op(op, [a, b])


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=0, max_size=4),
       st.lists(st.booleans(), min_size=4, max_size=4), st.integers(0, 4))
def test_broadcast_shapes(shape, ones, drop):
    """Any numpy-broadcastable pair: size-1 dims and rank differences on either side."""
    a_shape = tuple(1 if o else d for d, o in zip(shape, ones))
    b_shape = tuple(shape[min(drop, len(shape)):])
    a, b = rand(a_shape, seed=7), rand(b_shape, seed=8)
    check_op("add", [a, b])
    check_op("less", [b, a])


@pytest.mark.parametrize("dtype,lo,hi", [("float32", -1.5, 2.25), ("int32", -1.5, 2.7),
                                         ("int8", -200.0, 100.5), ("int32", 3.0, 1.0),
                                         ("float32", -np.inf, 6.0), ("uint8", 2.5, 300.0)])
def test_clip(dtype, lo, hi):
    x = rand((5, 8), dtype, seed=9, lo=-4, hi=4)
    check_op("clip", [x], a_min=lo, a_max=hi)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"),
                                     ("float32", "bool"), ("int8", "uint8"),
                                     ("float64", "float32"), ("bool", "float32"),
                                     ("int64", "int16"), ("uint8", "float64")])
def test_cast(src, dst):
    x = rand((3, 5), src, seed=10, lo=-10, hi=10)
    check_op("cast", [x], dtype=dst)
    check_op("cast_like", [x, np.zeros((2,), dst)])


@pytest.mark.parametrize("cond_dtype", ["bool", "int32", "float32"])
def test_where(cond_dtype):
    c = rand((4, 1), cond_dtype, seed=11, lo=-0.1, hi=0.1)
    x, y = rand((4, 5), seed=12), rand((5,), seed=13)
    check_op("where", [c, x, y])


@pytest.mark.parametrize("dtype", ["float32", "int8", "bool"])
def test_like_fills(dtype):
    x = rand((2, 3), dtype)
    check_op("zeros_like", [x])
    check_op("ones_like", [x])
    check_op("full_like", [x, np.array(3.75, "float32").astype(dtype)])


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_activations(dtype):
    x = rand((2, 3, 4), dtype, seed=14)
    check_op("nn.relu", [x])
    check_op("nn.leaky_relu", [x], alpha=0.25)
    alpha = rand((3,), dtype, seed=15, lo=0, hi=1)
    check_op("nn.prelu", [x, alpha], axis=1)
    check_op("nn.bias_add", [x, alpha], axis=1)
    check_op("nn.bias_add", [x, rand((4,), dtype)], axis=-1)
