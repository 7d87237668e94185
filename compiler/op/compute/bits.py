"""Bitwise integer ops built from arithmetic, because tir has no bitwise/shift operators yet.

Two's-complement identities keep them exact: ~a = -1 - a, a << b = a * 2**b (wrapping), an
arithmetic right shift is floor division by 2**b, and and/or/xor assemble bit by bit. When
codegen grows native bit ops these helpers are the only place to change.
"""
from __future__ import annotations

from codegen import tir
from codegen.tir.dtype import bits, is_int

Expr = tir.Expr


def bit_not(a: Expr) -> Expr:
    """~a (for unsigned types -1 wraps to the maximum, so the identity still holds)."""
    return tir.const(-1, a.dtype) - a


def _pow2(b: Expr, dtype: str) -> Expr:
    """2**b in dtype (wrapping at the top bit) for 0 <= b < bits(dtype)."""
    n = bits(dtype)
    out = tir.const(1, dtype)
    k = 0
    while (1 << k) < n:
        bit = tir.eq(tir.floormod(tir.floordiv(b, 1 << k), 2), tir.const(1, b.dtype))
        out = out * tir.select(bit, tir.const(1 << (1 << k), dtype), tir.const(1, dtype))
        k += 1
    return out


def _in_range(b: Expr, n: int) -> Expr:
    cond = tir.lt(b, tir.const(n, b.dtype))
    return tir.logical_and(tir.ge(b, tir.const(0, b.dtype)), cond) if is_int(b.dtype) else cond


def shift_left(a: Expr, b: Expr) -> Expr:
    """numpy.left_shift: shifts outside [0, bits) give 0."""
    n = bits(a.dtype)
    safe = tir.select(_in_range(b, n), b, tir.const(0, b.dtype))
    return tir.select(_in_range(b, n), a * _pow2(safe, a.dtype), tir.const(0, a.dtype))


def shift_right(a: Expr, b: Expr) -> Expr:
    """numpy.right_shift: arithmetic for signed types; large shifts give 0 or -1."""
    n, dt = bits(a.dtype), a.dtype
    signed = is_int(dt)
    fill = tir.select(tir.lt(a, tir.const(0, dt)), tir.const(-1, dt), tir.const(0, dt)) \
        if signed else tir.const(0, dt)
    top = n - 1 if signed else n  # 2**(n-1) is negative in a signed type: handled by `fill`
    ok = _in_range(b, top)
    safe = tir.select(ok, b, tir.const(0, b.dtype))
    return tir.select(ok, tir.floordiv(a, _pow2(safe, dt)), fill)


def _bit(a: Expr, k: int) -> Expr:
    """Bit k of a as a 0/1 value of a's dtype."""
    dt = a.dtype
    if is_int(dt) and k == bits(dt) - 1:
        return tir.cast(tir.lt(a, tir.const(0, dt)), dt)
    return tir.floormod(tir.floordiv(a, tir.const(1 << k, dt)), tir.const(2, dt))


def bitwise(kind: str, a: Expr, b: Expr) -> Expr:
    """and / or / xor assembled from the bits (each bit: a*b, a+b-a*b, a+b-2ab)."""
    dt = a.dtype
    out: Expr = tir.const(0, dt)
    for k in range(bits(dt)):
        x, y = _bit(a, k), _bit(b, k)
        if kind == "and":
            r = x * y
        elif kind == "or":
            r = x + y - x * y
        else:
            r = x + y - tir.const(2, dt) * x * y
        out = out + r * tir.const(1 << k, dt)
    return out
