"""Casts between float32 and the 8- and 4-bit float formats (codegen/tir/dtype.py
SMALL_FLOATS), in integer and float32 arithmetic on the byte that stores the value; and
between int64 and the sub-byte integers (SUB_BYTE_INTS).

A float8 value is only stored, loaded, selected and cast (no arithmetic: the formats exist to
hold data), so these two conversions are all codegen needs. They round as ml_dtypes does
(ONNX's reference casts with it): to nearest, ties to even; past the largest finite value to
infinity (e5m2), NaN (e4m3fn, the fnuz formats) or the largest value (float4_e2m1fn, where a
NaN becomes the zero of the other sign); -0 stays -0 except in the fnuz formats, which have one zero and one NaN (0x80).

decode: sign, exponent field e, mantissa field m -> (e ? 2^M + m : m) * 2^(max(e, 1) - bias
- M), the power of two built from its float32 exponent bits (every float8 exponent is a
normal float32 one), then the format's NaN and infinity codes.

encode: |x| is rounded on its own binade's grid, 2^(max(k, 1 - bias) - M) for x's exponent k
(subnormals share the lowest binade's spacing), with llvm.rint (ties to even): exact, as
the division and product are by powers of two. The rounded value r is then read back: its
float32 exponent gives e (0 below the normal range, where m = r / spacing) and its top
mantissa bits give m; r above the largest finite value is the overflow code.
"""
from __future__ import annotations

from llvmlite import ir

from ..tir.dtype import SMALL_FLOATS, SUB_BYTE_INTS
from .types import F32, I8, I32, intrinsic


def _c(value: int) -> ir.Constant:
    return ir.Constant(I32, value)


def _pow2(bld, k: ir.Value) -> ir.Value:
    """2.0 ** k as float32, for -126 <= k <= 127 (an i32 k)."""
    return bld.bitcast(bld.shl(bld.add(k, _c(127)), _c(23)), F32)


def decode(bld, v: ir.Value, dtype: str) -> ir.Value:
    """The float32 value of a small float's byte (exact)."""
    fmt = SMALL_FLOATS[dtype]
    bits_ = bld.zext(v, I32)
    field = (1 << fmt.exponent_bits) - 1
    e = bld.and_(bld.lshr(bits_, _c(fmt.mantissa_bits)), _c(field))
    m = bld.and_(bits_, _c((1 << fmt.mantissa_bits) - 1))
    normal = bld.icmp_unsigned("!=", e, _c(0))
    significand = bld.select(normal, bld.or_(m, _c(1 << fmt.mantissa_bits)), m)
    scale = bld.sub(bld.select(normal, e, _c(1)), _c(fmt.bias + fmt.mantissa_bits))
    magnitude = bld.fmul(bld.uitofp(significand, F32), _pow2(bld, scale))
    top_bit = 1 << (fmt.bits - 1)
    negative = bld.icmp_unsigned("!=", bld.and_(bits_, _c(top_bit)), _c(0))
    value = bld.select(negative, bld.fsub(ir.Constant(F32, -0.0), magnitude), magnitude)
    nan = ir.Constant(F32, float("nan"))
    if fmt.kind == "sat":  # every code is a number
        return value
    if fmt.kind == "fnuz":
        return bld.select(bld.icmp_unsigned("==", bits_, _c(0x80)), nan, value)
    top = bld.icmp_unsigned("==", e, _c(field))
    if fmt.kind == "fn":  # S.1111.111 is NaN, the rest of the top binade is finite
        is_nan = bld.and_(top, bld.icmp_unsigned("==", m, _c((1 << fmt.mantissa_bits) - 1)))
        return bld.select(is_nan, nan, value)
    inf = bld.select(negative, ir.Constant(F32, float("-inf")), ir.Constant(F32, float("inf")))
    special = bld.select(bld.icmp_unsigned("==", m, _c(0)), inf, nan)
    return bld.select(top, special, value)


def encode(bld, v: ir.Value, dtype: str) -> ir.Value:
    """A float32 rounded to the small float format (see the module docstring), as its byte."""
    fmt = SMALL_FLOATS[dtype]
    mb = fmt.mantissa_bits
    bits_ = bld.bitcast(v, I32)
    top_bit = 1 << (fmt.bits - 1)
    sign = bld.and_(bld.lshr(bits_, _c(32 - fmt.bits)), _c(top_bit))
    a = intrinsic(bld, "fabs", v)
    k = bld.sub(bld.and_(bld.lshr(bld.bitcast(a, I32), _c(23)), _c(0xFF)), _c(127))
    lowest = 1 - fmt.bias
    low = bld.icmp_signed("<", k, _c(lowest))
    spacing = _pow2(bld, bld.sub(bld.select(low, _c(lowest), k), _c(mb)))
    r = bld.fmul(intrinsic(bld, "rint", bld.fdiv(a, spacing)), spacing)
    r_bits = bld.bitcast(r, I32)
    rk = bld.sub(bld.lshr(r_bits, _c(23)), _c(127))
    subnormal = bld.icmp_signed("<", rk, _c(lowest))
    smallest = _pow2(bld, _c(lowest - mb))
    m_sub = bld.fptosi(bld.fdiv(r, smallest), I32)  # 0 .. 2^M, exact
    e_norm = bld.add(rk, _c(fmt.bias))
    m_norm = bld.and_(bld.lshr(r_bits, _c(23 - mb)), _c((1 << mb) - 1))
    code = bld.select(subnormal, m_sub, bld.or_(bld.shl(e_norm, _c(mb)), m_norm))
    if fmt.kind == "fnuz":  # one zero: no sign on it; every special is 0x80
        zero = bld.fcmp_ordered("==", r, ir.Constant(F32, 0.0))
        code = bld.or_(code, bld.select(zero, _c(0), sign))
        special = _c(0x80)
        overflow = special
    elif fmt.kind == "sat":  # no specials: NaN becomes a zero of the other sign (as ml_dtypes),
        code = bld.or_(code, sign)  # anything larger the largest value
        special = bld.xor(sign, _c(top_bit))
        overflow = bld.or_(sign, _c(top_bit - 1))
    else:
        code = bld.or_(code, sign)
        special = bld.or_(sign, _c(0x7F if fmt.kind == "fn" else 0x7E))
        overflow = special if fmt.kind == "fn" else bld.or_(sign, _c(0x7C))
    too_big = bld.fcmp_unordered(">", r, ir.Constant(F32, fmt.max))  # also NaN
    is_nan = bld.fcmp_unordered("uno", v, v)
    code = bld.select(too_big, overflow, code)
    code = bld.select(is_nan, special, code)
    return bld.trunc(code, I8)


def widen_int(bld, v: ir.Value, dtype: str) -> ir.Value:
    """A sub-byte int's byte (value in the low bits) as an i8 holding its value: sign-extended
    for int4 / int2, as it is for the unsigned ones."""
    width, signed = SUB_BYTE_INTS[dtype]
    if not signed:
        return v
    shift = ir.Constant(I8, 8 - width)
    return bld.ashr(bld.shl(v, shift), shift)


def narrow_int(bld, v: ir.Value, dtype: str) -> ir.Value:
    """An int64 wrapped to a sub-byte int: its low bits, the rest of the byte zero."""
    width, _ = SUB_BYTE_INTS[dtype]
    return bld.and_(bld.trunc(v, I8), ir.Constant(I8, (1 << width) - 1))
