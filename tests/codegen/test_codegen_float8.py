"""float8 and sub-byte int casts (codegen/llvm/float8.py) bit for bit against ml_dtypes, ONNX's
reference: every float16 value and random float32 bit patterns into each format, every code
out."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te
from codegen.tir.dtype import SMALL_FLOATS

pytest.importorskip("ml_dtypes")
RNG = np.random.default_rng(8)
EDGES = np.array([448, 464, 465, 480, 240, 248, 57344, 61440, 61441, 1e-9, 2.0 ** -10,
                  -0.0, 0.0, np.inf, -np.inf, np.nan], np.float32)


def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    A = te.placeholder(x.shape, x.dtype.name, "A")
    return build_te([A], [te.compute(x.shape, lambda i: tir.cast(A[i], dtype), name="c")])(x)[0]


@pytest.mark.parametrize("fmt", sorted(SMALL_FLOATS))
@pytest.mark.parametrize("src", ["float16", "float32"])
def test_encode_rounds_as_ml_dtypes(fmt, src):
    if src == "float16":
        x = np.arange(65536, dtype=np.uint16).view(np.float16)
    else:
        bits = RNG.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32)
        x = np.concatenate([bits.view(np.float32), EDGES])
    got = _cast(x, fmt)
    with np.errstate(all="ignore"):
        want = x.astype(np.dtype(fmt))
    assert got.dtype == want.dtype
    nan = np.isnan(want.astype(np.float32))
    assert (np.isnan(got.astype(np.float32)) == nan).all()
    np.testing.assert_array_equal(got.view(np.uint8)[~nan], want.view(np.uint8)[~nan])


@pytest.mark.parametrize("fmt", sorted(SMALL_FLOATS))
@pytest.mark.parametrize("dst", ["float32", "float16", "float64", "int32", "bool"])
def test_decode_every_code(fmt, dst):
    codes = np.arange(1 << SMALL_FLOATS[fmt].bits, dtype=np.uint8).view(np.dtype(fmt))
    if dst in ("int32", "bool"):  # finite codes only (NaN has no integer value)
        codes = codes[np.isfinite(codes.astype(np.float32))]
    got = _cast(codes, dst)
    want = codes.astype(np.float32).astype(dst)
    np.testing.assert_array_equal(got, want)
    if dst.startswith("float"):
        finite = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


def test_arithmetic_on_float8_is_a_clear_error():
    from codegen.errors import CodegenError
    A = te.placeholder((4,), "float8_e4m3fn", "A")
    with pytest.raises(CodegenError, match="are only cast, loaded and stored"):
        build_te([A], [te.compute((4,), lambda i: A[i] + A[i], name="add")])


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "uint2"])
@pytest.mark.parametrize("src", ["float16", "float32", "int32", "int64", "bool"])
def test_sub_byte_int_casts_wrap_as_ml_dtypes(dtype, src):
    """To int4/uint4/int2/uint2: numpy's conversion to int64, then the low bits (ml_dtypes);
    stored one per byte, the rest of it zero."""
    if src == "float16":
        x = np.arange(65536, dtype=np.uint16).view(np.float16)
    elif src == "float32":
        x = np.concatenate([RNG.uniform(-40, 40, 3000), RNG.integers(-2 ** 40, 2 ** 40, 500),
                            [np.nan, np.inf, -np.inf, 1e30]]).astype(np.float32)
    elif src == "bool":
        x = np.array([True, False])
    else:
        x = RNG.integers(-2 ** 31, 2 ** 31, 2000).astype(src)
    got = _cast(x, dtype)
    with np.errstate(all="ignore"):
        want = x.astype(np.dtype(dtype))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "uint2"])
@pytest.mark.parametrize("dst", ["float32", "float16", "int8", "uint8", "int64", "bool"])
def test_sub_byte_int_values_read_back(dtype, dst):
    width = 4 if "4" in dtype else 2
    codes = np.arange(1 << width, dtype=np.uint8).view(np.dtype(dtype))
    np.testing.assert_array_equal(_cast(codes, dst), codes.astype(dst))
