"""float -> int casts: numpy's x86 results for NaN, inf and out-of-range values, not poison."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te
from codegen.simplify import simplify
from codegen.tir.dtype import float_to_int

EDGES = [np.nan, np.inf, -np.inf, 1e20, -1e20, 300.7, -300.7, 3e9, -3e9, 70000.5, -1.5, -0.9,
         0.0, -0.0, 2.0**31, -2.0**31, 2.0**31 - 128, 2.0**63, -2.0**63, 2.0**64, 1.8e19,
         127.9, -128.9, 255.5, 65535.9, 4294967295.0]
INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint64"]


def _run(values: np.ndarray, dst: str) -> np.ndarray:
    X = te.placeholder(values.shape, str(values.dtype), "x")
    Y = te.compute(values.shape, lambda i: tir.cast(X[i], dst), name="y")
    return build_te([X], [Y], name=f"cast_{values.dtype}_{dst}")(values)[0]


def _numpy(values: np.ndarray, dst: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return values.astype(dst)


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", INT_TYPES)
def test_cast_edges_match_numpy(src, dst):
    values = np.array(EDGES, src)
    np.testing.assert_array_equal(_run(values, dst), _numpy(values, dst))


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", INT_TYPES + ["uint32"])
def test_reference_matches_numpy_scalar_loop(src, dst):
    """float_to_int is numpy's result for one-element arrays (its scalar loop) on x86."""
    for v in np.array(EDGES, src):
        want = int(_numpy(np.array([v], src), dst)[0])
        assert float_to_int(float(v), dst) == want, (v, dst)


@pytest.mark.parametrize("src", ["float32", "float64"])
def test_cast_uint32_follows_the_scalar_loop(src):
    values = np.array(EDGES, src)
    want = np.array([float_to_int(float(v), "uint32") for v in values], "uint32")
    np.testing.assert_array_equal(_run(values, "uint32"), want)
    assert want[0] == 0 and want[list(EDGES).index(-3e9)] == 1294967296  # NaN, -3e9 wraps


@pytest.mark.parametrize("dst", INT_TYPES + ["uint32"])
def test_constant_casts_fold_like_the_emitter(dst):
    for v in EDGES:
        folded = simplify(tir.cast(tir.const(v, "float32"), dst))
        assert type(folded) is tir.IntImm, folded
        assert folded.value == float_to_int(float(np.float32(v)), dst), (v, dst)


def test_cast_of_large_random_values():
    rng = np.random.default_rng(0)
    values = (rng.standard_normal(4096) * 10.0 ** rng.integers(0, 22, 4096)).astype("float32")
    values[::97] = np.nan
    for dst in ("int32", "int64", "int16", "uint8"):
        np.testing.assert_array_equal(_run(values, dst), _numpy(values, dst))
