"""Every math intrinsic against numpy, float32 and float64, over wide ranges and special values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 1e-40,
           88.7, 88.8, -87.3, -103.0, -104.5, 89.5, 709.0, 710.0, 3.4e38, -3.4e38, 1e-7, 0.625,
           -0.625, 1.0000001, 0.9999999, 4.0, -4.0, 9.0, 20.0, -20.0, 100.0, -100.0]


def _inputs(lo: float, hi: float, dtype: str, positive: bool = False) -> np.ndarray:
    rng = np.random.default_rng(0)
    lin = np.linspace(lo, hi, 4001)
    logs = np.concatenate([np.geomspace(1e-30, max(hi, 1e-29), 500),
                           -np.geomspace(1e-30, max(-lo, 1e-29), 500)])
    x = np.concatenate([lin, logs, rng.uniform(lo, hi, 2000), SPECIAL]).astype(dtype)
    return np.abs(x) if positive else x


def _run1(name: str, x: np.ndarray) -> np.ndarray:
    X = te.placeholder(x.shape, str(x.dtype), "x")
    Y = te.compute(x.shape, lambda i: tir.call(name, X[i]), name="y")
    return build_te([X], [Y], f"math_{name}")(x)[0]


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    return np.array([math.erf(v) if not np.isnan(v) else np.nan for v in x.astype(np.float64)])


def _softplus(x):
    x64 = x.astype(np.float64)
    return np.logaddexp(0.0, x64)


# name -> (numpy reference, range lo, hi, positive only)
CASES = {
    "exp": (np.exp, -110, 90, False),
    "exp2": (np.exp2, -160, 130, False),
    "expm1": (np.expm1, -30, 30, False),
    "log": (np.log, 0, 1e30, True),
    "log2": (np.log2, 0, 1e30, True),
    "log10": (np.log10, 0, 1e30, True),
    "log1p": (np.log1p, -0.999, 1e6, False),
    "sqrt": (np.sqrt, 0, 1e30, True),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0, 1e30, True),
    "tanh": (np.tanh, -30, 30, False),
    "sigmoid": (_sigmoid, -100, 100, False),
    "erf": (_erf, -6, 6, False),
    "softplus": (_softplus, -50, 50, False),
    "floor": (np.floor, -1e6, 1e6, False),
    "ceil": (np.ceil, -1e6, 1e6, False),
    "round": (np.round, -1e3, 1e3, False),
    "trunc": (np.trunc, -1e6, 1e6, False),
    "fabs": (np.fabs, -1e30, 1e30, False),
    "sign": (np.sign, -10, 10, False),
    "sin": (np.sin, -1e4, 1e4, False),
    "cos": (np.cos, -1e4, 1e4, False),
    "tan": (np.tan, -10, 10, False),
    "asin": (np.arcsin, -1, 1, False),
    "acos": (np.arccos, -1, 1, False),
    "atan": (np.arctan, -1e4, 1e4, False),
    "sinh": (np.sinh, -80, 80, False),
    "cosh": (np.cosh, -80, 80, False),
    "asinh": (np.arcsinh, -1e4, 1e4, False),
    "acosh": (np.arccosh, 1, 1e4, True),
    "atanh": (np.arctanh, -1, 1, False),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_unary_math_matches_numpy(name: str, dtype: str) -> None:
    ref, lo, hi, positive = CASES[name]
    x = _inputs(lo, hi, dtype, positive)
    if name in ("sin", "cos"):
        x = x[np.abs(x) < 1e6]
    with np.errstate(all="ignore"):
        expected = ref(x.astype(np.float64)).astype(dtype)
    got = _run1(name, x)
    assert got.dtype == np.dtype(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), \
        f"{name}: nan mismatch at {x[np.isnan(got) != np.isnan(expected)][:5]}"
    rtol = 1e-6 if dtype == "float32" else 1e-13
    atol = {"sin": 1e-7, "cos": 1e-7, "expm1": 0, "erf": 1e-7}.get(name, 0.0)
    if dtype == "float64":
        atol = min(atol, 1e-15)
    atol = max(atol, float(np.finfo(dtype).tiny))  # subnormal results: relative error is moot
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    assert not bad.any(), f"{name} {dtype}: {x[bad][:5]} -> {got[bad][:5]} vs {expected[bad][:5]}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_predicates(dtype: str) -> None:
    x = np.array(SPECIAL, dtype=dtype)
    for name, ref in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
        got = _run1(name, x)
        assert got.dtype == np.bool_
        assert np.array_equal(got, ref(x)), name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_and_atan2(dtype: str) -> None:
    rng = np.random.default_rng(1)
    a = np.concatenate([rng.uniform(-5, 5, 300), [0, -0.0, 2, -2, np.inf, -np.inf, np.nan, 1]])
    b = np.concatenate([rng.uniform(-4, 4, 300), [-1, 3, 0.5, 3, -1, 2, 1, np.nan]])
    a, b = a.astype(dtype), b.astype(dtype)
    A, B = te.placeholder(a.shape, dtype, "a"), te.placeholder(b.shape, dtype, "b")
    P = te.compute(a.shape, lambda i: tir.pow(A[i], B[i]), name="p")
    T = te.compute(a.shape, lambda i: tir.atan2(A[i], B[i]), name="t")
    p, t = build_te([A, B], [P, T], "pow_atan2")(a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(p, np.power(a, b), rtol=1e-6)
    np.testing.assert_allclose(t, np.arctan2(a, b), rtol=1e-6)


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.0, 1.0])
def test_pow_by_small_constants_is_rewritten_and_exact(exponent: float) -> None:
    x = np.linspace(0.1, 10, 257).astype("float32")
    X = te.placeholder(x.shape, "float32", "x")
    Y = te.compute(x.shape, lambda i: tir.pow(X[i], exponent), name="y")
    run = build_te([X], [Y], "powc")
    assert "pow(" not in str(run.primfunc)
    np.testing.assert_allclose(run(x)[0], np.power(x, np.float32(exponent)), rtol=1e-6)


def test_round_is_half_to_even() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5], "float32")
    np.testing.assert_array_equal(_run1("round", x), np.round(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_min_propagate_nan_like_numpy(dtype: str) -> None:
    a = np.array([1, np.nan, 3, np.nan, -np.inf], dtype)
    b = np.array([np.nan, 2, 1, np.nan, 5], dtype)
    A, B = te.placeholder(a.shape, dtype, "a"), te.placeholder(b.shape, dtype, "b")
    M = te.compute(a.shape, lambda i: tir.max(A[i], B[i]), name="mx")
    N = te.compute(a.shape, lambda i: tir.min(A[i], B[i]), name="mn")
    mx, mn = build_te([A, B], [M, N], "maxmin")(a, b)
    np.testing.assert_array_equal(mx, np.maximum(a, b))
    np.testing.assert_array_equal(mn, np.minimum(a, b))
