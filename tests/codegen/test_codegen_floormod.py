"""Float floor_mod is numpy.mod exactly: infinite divisors, signed zeros, NaN."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te
from compiler.op.registry import get_def

EDGES = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, 7.0, -7.0, 1e-30, -1e-30, 1e30, -1e30,
         np.inf, -np.inf, np.nan, 5e-324, 0.1, -0.1]


def _grid(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.meshgrid(np.array(EDGES, dtype), np.array(EDGES, dtype))
    return a.ravel(), b.ravel()


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal values, equal signs of zero, NaN where NaN."""
    np.testing.assert_array_equal(got, want)
    both = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[both]), np.signbit(want[both]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_floormod_kernel_is_numpy_mod(dtype):
    a, b = _grid(dtype)
    A, B = te.placeholder(a.shape, dtype, "a"), te.placeholder(b.shape, dtype, "b")
    C = te.compute(a.shape, lambda i: tir.floormod(A[i], B[i]), name="c")
    got = build_te([A, B], [C], name=f"floormod_{dtype}")(a, b)[0]
    with np.errstate(all="ignore"):
        _same(got, np.mod(a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_floor_mod_reference_is_numpy_mod(dtype):
    from compiler.ir.attrs import Attrs

    a, b = _grid(dtype)
    got = get_def("floor_mod").reference([a, b], Attrs({}))
    assert got.dtype == dtype
    with np.errstate(all="ignore"):
        _same(got, np.mod(a, b))
    # the old formula a - floor(a/b)*b gave NaN here
    assert get_def("floor_mod").reference([np.array([-1.0]), np.array([np.inf])],
                                          Attrs({}))[0] == np.inf


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_floor_mod_op_matches_numpy_mod(dtype):
    """The relay op end to end: compute rule lowered and run, against np.mod."""
    from tests.codegen_ops.lowering_harness import run_op

    a, b = _grid(dtype)
    (got,), (ref,) = run_op("floor_mod", [a, b])
    with np.errstate(all="ignore"):
        _same(got, np.mod(a, b))
    _same(got, ref)


def test_floor_mod_constant_folds_like_numpy():
    from codegen.simplify import simplify

    folded = simplify(tir.floormod(tir.const(-1.0, "float32"), tir.const(np.inf, "float32")))
    assert type(folded) is tir.FloatImm and folded.value == np.inf
    folded = simplify(tir.floormod(tir.const(-0.0, "float32"), tir.const(3.0, "float32")))
    assert folded.value == 0.0 and not np.signbit(folded.value)
