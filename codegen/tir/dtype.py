"""Dtype strings used by the loop-nest IR, and the facts about them codegen needs."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import CodegenError

# float16 and bfloat16 are storage types: codegen computes in float32 and rounds each result
# (see codegen/tir/half.py); buffers hold IEEE binary16 / bfloat16 (float32's top 16 bits)
FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
UINT_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


class SmallFloatFormat(NamedTuple):
    """An 8-bit (or 4-bit) float format: field widths, exponent bias, largest finite value, and
    which specials it has: "fn" (no infinity, NaN = S.1..1), "ieee" (infinities and NaNs in the
    top binade), "fnuz" (no infinity, no -0, one NaN 0x80), "sat" (no specials: overflow and
    infinities saturate, a NaN becomes the zero of the other sign, as ml_dtypes'
    float4_e2m1fn)."""

    exponent_bits: int
    mantissa_bits: int
    bias: int
    max: float
    kind: str
    bits: int = 8


# small float values are stored, loaded, selected and cast only (codegen/llvm/float8.py):
# they hold data (ONNX's FLOAT8 and FLOAT4 types, ml_dtypes' names), so no arithmetic is
# ever done on them; a 4-bit one takes a byte, in its low bits
SMALL_FLOATS = {"float8_e4m3fn": SmallFloatFormat(4, 3, 7, 448.0, "fn"),
                "float8_e4m3fnuz": SmallFloatFormat(4, 3, 8, 240.0, "fnuz"),
                "float8_e5m2": SmallFloatFormat(5, 2, 15, 57344.0, "ieee"),
                "float8_e5m2fnuz": SmallFloatFormat(5, 2, 16, 57344.0, "fnuz"),
                "float4_e2m1fn": SmallFloatFormat(2, 1, 1, 6.0, "sat", 4)}
# sub-byte integers (ml_dtypes' int4, uint4, int2, uint2): one per byte, in its low bits (the
# rest zero), like float8 only stored, loaded, selected and cast; a cast to one keeps the low
# bits of the value as int64 (numpy's conversion then a wrap, as ml_dtypes)
SUB_BYTE_INTS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True),
                 "uint2": (2, False)}
DATA_ONLY = frozenset([*SMALL_FLOATS, *SUB_BYTE_INTS])
ALL_DTYPES = frozenset([*FLOAT_BITS, *INT_BITS, *UINT_BITS, *DATA_ONLY, "bool"])
INDEX_DTYPE = "int64"


def as_dtype(dtype: object) -> str:
    """Normalise a dtype given as str or numpy dtype so nodes compare dtypes as plain strings."""
    name = dtype if isinstance(dtype, str) else str(getattr(dtype, "name", dtype))
    if name not in ALL_DTYPES:
        try:
            import numpy as np

            name = np.dtype(name).name
        except TypeError:
            pass
    if name not in ALL_DTYPES:
        raise CodegenError(
            f"unsupported dtype: expected one of {sorted(ALL_DTYPES)}, got {dtype!r}"
        )
    return name


def is_float(dtype: str) -> bool:
    """True for floating-point dtypes."""
    return dtype in FLOAT_BITS


def is_int(dtype: str) -> bool:
    """True for signed integer dtypes."""
    return dtype in INT_BITS


def is_uint(dtype: str) -> bool:
    """True for unsigned integer dtypes."""
    return dtype in UINT_BITS


def is_integer(dtype: str) -> bool:
    """True for signed or unsigned integer dtypes (not bool)."""
    return dtype in INT_BITS or dtype in UINT_BITS


def is_bool(dtype: str) -> bool:
    """True for the boolean dtype."""
    return dtype == "bool"


def bits(dtype: str) -> int:
    """Register width in bits (bool is 1)."""
    if dtype == "bool":
        return 1
    if dtype in DATA_ONLY:
        return 8
    return FLOAT_BITS.get(dtype) or INT_BITS.get(dtype) or UINT_BITS[dtype]


def itemsize(dtype: str) -> int:
    """Bytes per element in memory (bool is stored as one byte)."""
    return 1 if dtype == "bool" else bits(dtype) // 8


def min_value(dtype: str) -> float | int:
    """Smallest value of a dtype (-inf for floats): the identity of max-reductions."""
    if is_float(dtype):
        return float("-inf")
    if is_int(dtype):
        return -(1 << (bits(dtype) - 1))
    return 0


def max_value(dtype: str) -> float | int:
    """Largest value of a dtype (+inf for floats): the identity of min-reductions."""
    if is_float(dtype):
        return float("inf")
    if is_int(dtype):
        return (1 << (bits(dtype) - 1)) - 1
    if dtype == "bool":
        return 1
    return (1 << bits(dtype)) - 1


def float_to_int(value: float, dtype: str) -> int:
    """float -> integer dtype as numpy does on x86 (the emitter's semantics; no UB, no poison).

    cvttss2si/cvttsd2si give INT_MIN of their 32/64-bit register for NaN and out-of-range
    values; narrower types (and uint32) convert through the 32-bit (64-bit) instruction and
    keep the low bits; uint64 subtracts 2**63 from values >= 2**63 and flips the top bit back.
    (numpy's vectorised loops for uint32 take the uint64 route instead: results differ from
    its scalar loop for out-of-range inputs; this follows the scalar loop.)
    """
    if dtype == "uint64":
        high = value >= 2.0 ** 63
        r = _cvtt(value - 2.0 ** 63 if high else value, 64)
        return wrap_int(r ^ (-(1 << 63) if high else 0), dtype)
    width = 64 if dtype in ("int64", "uint32") else 32
    return wrap_int(_cvtt(value, width), dtype)


def _cvtt(value: float, width: int) -> int:
    """x86 truncating conversion to a signed `width`-bit register (INT_MIN when invalid)."""
    lo = -(1 << (width - 1))
    if value != value or not lo <= value < -lo:
        return lo
    return int(value)


def wrap_int(value: int, dtype: str) -> int:
    """Wrap a Python int to the range of an integer dtype, as the hardware does."""
    if dtype == "bool":
        return int(bool(value))
    n = bits(dtype)
    value &= (1 << n) - 1
    if is_int(dtype) and value >= 1 << (n - 1):
        value -= 1 << n
    return value


def round_bfloat16(value: float) -> float:
    """value rounded to the nearest bfloat16 (ties to even, via float32), as a Python float."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        single = np.float32(value)
    if np.isnan(single):
        return float("nan")
    bits = int(single.view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.uint32(bits).view(np.float32))
