"""Math functions emitted inline as branch-free LLVM IR, so loops using them vectorise.

float32 exp/log/tanh/sigmoid/erf/sin/cos/expm1/log1p/exp2/log2/log10 are polynomials
(Cephes-style) measured against numpy at rtol 1e-6 over wide ranges (tests/codegen); they
return IEEE special values (nan in -> nan out, exp(+-inf) = inf/0, log(0) = -inf,
log(x<0) = nan, tanh/erf saturate to +-1). sin/cos reduce the argument in double, which is
exact enough for |x| < 1e6; beyond that results lose accuracy (still in [-1, 1]).
Less common float32 functions (tan, asin, ..., pow, atan2) and every float64 function
call the C math library in double (`exp`, `log`, ...), which MCJIT resolves from the
process; they are correctly rounded for float32 but do not vectorise.
"""
from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from ..errors import CodegenError
from .types import F32, F64, I32, I64, get_function, intrinsic

Emit = Callable[[ir.IRBuilder, ir.Value], ir.Value]


def _c(x: ir.Value, v: float) -> ir.Constant:
    return ir.Constant(x.type, v)


# Horner steps may contract to one fused multiply-add (one rounding instead of two: as
# accurate, half the instructions; exp and erf bound softmax and GELU)
_FMA = ("contract",)


def _poly(b: ir.IRBuilder, x: ir.Value, coefs: list[float]) -> ir.Value:
    """Horner evaluation, highest coefficient first."""
    acc: ir.Value = _c(x, coefs[0])
    for c in coefs[1:]:
        acc = b.fadd(b.fmul(acc, x, flags=_FMA), _c(x, c), flags=_FMA)
    return acc


def _select_nan(b: ir.IRBuilder, x: ir.Value, result: ir.Value) -> ir.Value:
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


# ------------------------------------------------------------------------------- exp
def _scale_pow2(b: ir.IRBuilder, y: ir.Value, n: ir.Value) -> ir.Value:
    """y * 2**n for float32 y and i32 n in [-150, 130], in two exact steps (denormals, inf)."""
    n1 = b.ashr(n, ir.Constant(I32, 1))
    n2 = b.sub(n, n1)
    s1 = b.bitcast(b.shl(b.add(n1, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)
    s2 = b.bitcast(b.shl(b.add(n2, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)
    return b.fmul(b.fmul(y, s1), s2)


_EXP_P = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1]


def _exp_reduced(b: ir.IRBuilder, r: ir.Value, n: ir.Value) -> ir.Value:
    """exp(r) * 2**n for |r| <= ln2/2 (Cephes expf polynomial, ~1 ulp)."""
    z = b.fmul(r, r)
    y = b.fadd(b.fadd(b.fmul(_poly(b, r, _EXP_P), z, flags=_FMA), r, flags=_FMA), _c(r, 1.0))
    return _scale_pow2(b, y, b.fptosi(n, I32))


def _clamp(b: ir.IRBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    x = b.select(b.fcmp_ordered(">", x, _c(x, hi)), _c(x, hi), x)
    return b.select(b.fcmp_ordered("<", x, _c(x, lo)), _c(x, lo), x)


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp for float32: n = round(x/ln2), Cody-Waite reduction, degree-7 polynomial."""
    xc = _clamp(b, x, -104.0, 89.0)
    n = intrinsic(b, "roundeven", b.fmul(xc, _c(x, 1.44269504088896341)))
    r = b.fsub(b.fsub(xc, b.fmul(n, _c(x, 0.693359375), flags=_FMA), flags=_FMA),
               b.fmul(n, _c(x, -2.12194440e-4), flags=_FMA), flags=_FMA)
    return _select_nan(b, x, _exp_reduced(b, r, n))


def exp2_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """2**x for float32: exact split into integer and fraction, then the exp polynomial."""
    xc = _clamp(b, x, -151.0, 129.0)
    n = intrinsic(b, "roundeven", xc)
    r = b.fmul(b.fsub(xc, n), _c(x, math.log(2.0)))
    return _select_nan(b, x, _exp_reduced(b, r, n))


# ------------------------------------------------------------------------------- log
_LOG_P = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1]


def log_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural log for float32 (Cephes logf: mantissa in [sqrt(.5), sqrt(2)), degree-9 poly)."""
    tiny = b.fcmp_ordered("<", x, _c(x, 1.17549435e-38))
    xs = b.select(tiny, b.fmul(x, _c(x, 8388608.0)), x)  # scale denormals by 2**23
    bias = b.select(tiny, ir.Constant(I32, 23 + 126), ir.Constant(I32, 126))
    bits_ = b.bitcast(xs, I32)
    e = b.sub(b.lshr(bits_, ir.Constant(I32, 23)), bias)
    m = b.bitcast(b.or_(b.and_(bits_, ir.Constant(I32, 0x007FFFFF)),
                        ir.Constant(I32, 0x3F000000)), F32)
    small = b.fcmp_ordered("<", m, _c(x, 0.707106781186547524))
    e = b.select(small, b.sub(e, ir.Constant(I32, 1)), e)
    m = b.select(small, b.fsub(b.fadd(m, m), _c(x, 1.0)), b.fsub(m, _c(x, 1.0)))
    ef = b.sitofp(e, F32)
    z = b.fmul(m, m)
    y = b.fmul(b.fmul(_poly(b, m, _LOG_P), m), z)
    y = b.fadd(y, b.fmul(ef, _c(x, -2.12194440e-4)))
    y = b.fsub(y, b.fmul(z, _c(x, 0.5)))
    r = b.fadd(b.fadd(m, y), b.fmul(ef, _c(x, 0.693359375)))
    r = b.select(b.fcmp_ordered("==", x, _c(x, math.inf)), x, r)
    r = b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), _c(x, -math.inf), r)
    return b.select(b.fcmp_unordered("<", x, _c(x, 0.0)), _c(x, math.nan), r)  # x<0 or nan


def log2_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log2 = log * log2(e) (relative errors add: ~2 ulp)."""
    return b.fmul(log_f32(b, x), _c(x, 1.4426950408889634))


def log10_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log10 = log * log10(e) (~2 ulp)."""
    return b.fmul(log_f32(b, x), _c(x, 0.4342944819032518))


def log1p_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log(1+x) accurate near 0: log(u) * x / (u - 1) with u = 1 + x (Goldberg's trick)."""
    u = b.fadd(x, _c(x, 1.0))
    d = b.fsub(u, _c(x, 1.0))
    lu = log_f32(b, u)
    r = b.fdiv(b.fmul(lu, x), d)
    r = b.select(b.fcmp_ordered("==", d, _c(x, 0.0)), x, r)
    return b.select(b.fcmp_ordered("<", intrinsic(b, "fabs", x), _c(x, 0.5)), r, lu)


def expm1_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp(x)-1 accurate near 0: (u-1) * x / log(u) with u = exp(x) (Kahan's trick)."""
    u = exp_f32(b, x)
    um1 = b.fsub(u, _c(x, 1.0))
    r = b.fdiv(b.fmul(um1, x), log_f32(b, u))
    r = b.select(b.fcmp_ordered("==", u, _c(x, 1.0)), x, r)
    r = b.select(b.fcmp_ordered("<", intrinsic(b, "fabs", x), _c(x, 0.5)), r, um1)
    return _select_nan(b, x, r)


# ------------------------------------------------------------------ tanh, sigmoid, erf
_TANH_P = [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1]


def tanh_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh for float32: odd polynomial for |x| < 0.625, else 1 - 2/(exp(2|x|)+1)."""
    ax = intrinsic(b, "fabs", x)
    s = exp_f32(b, b.fadd(ax, ax))
    big = b.fsub(_c(x, 1.0), b.fdiv(_c(x, 2.0), b.fadd(s, _c(x, 1.0))))
    big = intrinsic(b, "copysign", big, x)
    z = b.fmul(x, x)
    small = b.fadd(b.fmul(b.fmul(_poly(b, z, _TANH_P), z), x), x)
    return b.select(b.fcmp_ordered(">=", ax, _c(x, 0.625)), big, small)


def sigmoid(b: ir.IRBuilder, x: ir.Value, exp: Emit) -> ir.Value:
    """1/(1+e) for x >= 0 and e/(1+e) for x < 0, e = exp(-|x|): no overflow, exact tails."""
    e = exp(b, b.fneg(intrinsic(b, "fabs", x)))
    r = b.fdiv(_c(x, 1.0), b.fadd(_c(x, 1.0), e))
    return b.select(b.fcmp_unordered(">=", x, _c(x, 0.0)), r, b.fmul(e, r))


_ERF_T = [7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3,
          -2.685381193529856e-2, 1.128358514861418e-1, -3.761262582423300e-1,
          1.128379165726710e0]
# log(erfc(x)) on [1, 4] in u = x - 2.5: a degree-8 Chebyshev fit (numpy, float64), as a
# monomial in u. erf = 1 - exp(p(u)) there, abs err 1e-7 (A&S 7.1.26's 2e-7) and no division
# (its 1/(1 + p|x|) was a vector divide per 16 values). One thread, CPU time, same process:
# 128x768 @ 768x3072 with BERT's GELU in the epilogue 4.52 -> 4.49 ms; the GELU's polynomials
# are still about 0.3 ms of it (two 512-bit ports).
_ERFC_LOG = [1.626414199037281e-06, -1.3290575073668244e-05, 7.734438355217374e-05,
             -0.00042021029945455904, 0.002165222543204717, -0.010858452968730167,
             -0.9438936644358548, -5.352680696127023, -7.8068152756381926]


def erf_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf for float32: Cephes x*T(x^2) for |x| < 1, else 1 - exp(log erfc fit) (abs err 1e-7,
    branch-free and without a division)."""
    ax = intrinsic(b, "fabs", x)
    small = b.fmul(x, _poly(b, b.fmul(x, x), _ERF_T))
    tail = exp_f32(b, _poly(b, b.fsub(ax, _c(x, 2.5)), _ERFC_LOG))
    big = b.fsub(_c(x, 1.0), tail)
    big = b.select(b.fcmp_ordered(">=", ax, _c(x, 4.0)), _c(x, 1.0), big)
    big = intrinsic(b, "copysign", big, x)
    return b.select(b.fcmp_ordered(">=", ax, _c(x, 1.0)), big, small)


# ---------------------------------------------------------------------------- sin/cos
_SIN_D = [-1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6]   # r + r^3 * P(r^2)
_COS_D = [1 / 479001600, -1 / 3628800, 1 / 40320, -1 / 720, 1 / 24, -0.5, 1.0]


def _sincos_f32(b: ir.IRBuilder, x: ir.Value, want_cos: bool) -> ir.Value:
    """sin/cos: reduce by pi/2 in double (two-part constant), Taylor polynomials in double."""
    xd = b.fpext(x, F64)
    j = intrinsic(b, "roundeven", b.fmul(xd, ir.Constant(F64, 2.0 / math.pi)))
    r = b.fsub(b.fsub(xd, b.fmul(j, ir.Constant(F64, 1.57079632673412561417e+00))),
               b.fmul(j, ir.Constant(F64, 6.07710050650619224932e-11)))
    r2 = b.fmul(r, r)
    s = b.fadd(r, b.fmul(b.fmul(r, r2), _poly(b, r2, _SIN_D)))
    c = _poly(b, r2, _COS_D)
    ji = b.fptosi(b.select(b.fcmp_unordered("uno", j, j), ir.Constant(F64, 0.0), j), I64)
    q = b.and_(b.add(ji, ir.Constant(I64, 1 if want_cos else 0)), ir.Constant(I64, 3))
    use_cos = b.trunc(q, ir.IntType(1))          # q odd -> the other function
    neg = b.icmp_unsigned(">=", q, ir.Constant(I64, 2))
    v = b.select(use_cos, c, s)
    v = b.select(neg, b.fneg(v), v)
    return b.fptrunc(v, F32)


def sin_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """sin for float32 (see module docstring for the argument range)."""
    return _sincos_f32(b, x, False)


def cos_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """cos for float32 (see module docstring for the argument range)."""
    return _sincos_f32(b, x, True)


# ------------------------------------------------------------------------------ libm
_LIBM = {"exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
         "log10": "log10", "log1p": "log1p", "tanh": "tanh", "erf": "erf", "sin": "sin",
         "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
         "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
         "pow": "pow", "atan2": "atan2"}


def libm_call(b: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    """Call the double-precision C function `name`, converting float32 in and out."""
    cname = _LIBM.get(name)
    if cname is None:
        raise CodegenError(f"no math library function for {name!r}")
    ty = args[0].type
    dargs = [a if ty == F64 else b.fpext(a, F64) for a in args]
    fn = get_function(b.module, cname, F64, [F64] * len(args), readnone=False)
    out = b.call(fn, dargs)
    return out if ty == F64 else b.fptrunc(out, F32)


F32_POLY: dict[str, Emit] = {
    "exp": exp_f32, "exp2": exp2_f32, "log": log_f32, "log2": log2_f32, "log10": log10_f32,
    "log1p": log1p_f32, "expm1": expm1_f32, "tanh": tanh_f32, "erf": erf_f32,
    "sin": sin_f32, "cos": cos_f32,
}


def exp_any(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp for float32 (polynomial) or float64 (libm)."""
    return exp_f32(b, x) if x.type == F32 else libm_call(b, "exp", [x])


def log_any(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log for float32 (polynomial) or float64 (libm)."""
    return log_f32(b, x) if x.type == F32 else libm_call(b, "log", [x])


def log1p_any(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log1p for float32 (polynomial) or float64 (libm)."""
    return log1p_f32(b, x) if x.type == F32 else libm_call(b, "log1p", [x])
