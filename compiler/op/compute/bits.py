"""Bitwise integer ops for the compute rules: thin names over tir's native bit operations.

tir's shl/shr already give numpy's results for shift amounts outside [0, width) (0, or
-1 for a negative value shifted right), so the rules need no guards of their own.
"""
from __future__ import annotations

from codegen import tir

Expr = tir.Expr

_NATIVE = {"and": tir.bitwise_and, "or": tir.bitwise_or, "xor": tir.bitwise_xor}


def bit_not(a: Expr) -> Expr:
    """~a (a ^ -1, so for unsigned types it is max - a)."""
    return tir.bitwise_not(a)


def shift_left(a: Expr, b: Expr) -> Expr:
    """numpy.left_shift: shifts outside [0, bits) give 0."""
    return tir.shift_left(a, b)


def shift_right(a: Expr, b: Expr) -> Expr:
    """numpy.right_shift: arithmetic for signed types; large shifts give 0 or -1."""
    return tir.shift_right(a, b)


def bitwise(kind: str, a: Expr, b: Expr) -> Expr:
    """a & b, a | b or a ^ b for kind "and" / "or" / "xor"."""
    return _NATIVE[kind](a, b)
