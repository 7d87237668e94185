"""Constructors for expressions: type checking, constant promotion, math intrinsic table."""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..errors import CodegenError
from .dtype import as_dtype, bits, is_bool, is_float, is_integer, itemsize, round_bfloat16, wrap_int
from .expr import (
    ARITH_KINDS, BINARY_KINDS, BIT_KINDS, COMPARE_KINDS, BinaryOp, Call, Cast, Expr, FloatImm,
    IfThenElseExpr, IntImm, Not, Reinterpret, Select,
)

# name -> (arity, kind); kind: "float" (float in/out), "pred" (float in, bool out),
# "numeric" (any number in, same dtype out).
INTRINSICS: dict[str, tuple[int, str]] = {
    **{n: (1, "float") for n in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh",
        "sigmoid", "erf", "floor", "ceil", "round", "trunc", "sin", "cos", "tan", "asin",
        "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "softplus")},
    "fabs": (1, "numeric"), "abs": (1, "numeric"), "sign": (1, "numeric"),
    "isnan": (1, "pred"), "isinf": (1, "pred"), "isfinite": (1, "pred"),
    "pow": (2, "float"), "atan2": (2, "float"),
}

Number = int | float | bool


def const(value: Number, dtype: str = "float32") -> Expr:
    """A constant of the given dtype (ints wrap to the dtype's range, floats may be inf/nan)."""
    dtype = as_dtype(dtype)
    if dtype == "float16":  # the constant as a half holds it (numpy's weak scalars round so)
        import numpy as np

        with np.errstate(over="ignore"):
            return FloatImm(float(np.float16(value)), dtype)
    if dtype == "bfloat16":
        return FloatImm(round_bfloat16(value), dtype)
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    if isinstance(value, float) and not value.is_integer():
        raise CodegenError(f"const: {value!r} is not representable as {dtype}")
    return IntImm(wrap_int(int(value), dtype), dtype)


def convert(value: Any, like: Expr | None = None) -> Expr:
    """Turn a Python scalar into a constant with the dtype of `like` (default float32/int64)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return IntImm(int(value), "bool") if like is None or is_bool(like.dtype) else \
            const(int(value), like.dtype)
    if isinstance(value, (int, float)) or hasattr(value, "dtype"):
        if like is None:
            if hasattr(value, "dtype"):  # numpy scalar
                return const(value.item(), str(value.dtype))
            return const(value, "int64" if isinstance(value, int) else "float32")
        if is_bool(like.dtype):
            raise CodegenError(f"cannot combine a bool expression with the number {value!r}")
        if is_integer(like.dtype) and isinstance(value, float) and not value.is_integer():
            raise CodegenError(
                f"cannot combine {like.dtype} expression with float constant {value!r}; cast first"
            )
        return const(value.item() if hasattr(value, "item") else value, like.dtype)
    raise CodegenError(f"expected a tir expression or a number, got {type(value).__name__}")


def _pair(a: Any, b: Any, what: str) -> tuple[Expr, Expr]:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a = convert(a)
    a = convert(a, b if isinstance(b, Expr) else None)
    b = convert(b, a)
    if a.dtype != b.dtype:
        raise CodegenError(f"{what}: operand dtypes differ: {a.dtype} vs {b.dtype}; cast first")
    return a, b


def binary(kind: str, a: Any, b: Any) -> Expr:
    """Build BinaryOp(kind, a, b), promoting Python numbers to the other operand's dtype."""
    if kind not in BINARY_KINDS:
        raise CodegenError(f"unknown binary op {kind!r}")
    a, b = _pair(a, b, kind)
    if kind in COMPARE_KINDS:
        return BinaryOp(kind, a, b, "bool")
    if kind in ("and", "or"):
        if not is_bool(a.dtype):
            raise CodegenError(f"logical {kind}: expected bool operands, got {a.dtype}")
        return BinaryOp(kind, a, b, "bool")
    bool_ok = kind in ("bitand", "bitor", "bitxor")
    if kind in BIT_KINDS and not (is_integer(a.dtype) or bool_ok and is_bool(a.dtype)):
        raise CodegenError(f"{kind}: expected integer operands, got {a.dtype}")
    if is_bool(a.dtype) and kind in ARITH_KINDS - {"min", "max"}:
        raise CodegenError(f"{kind}: arithmetic on bool operands; cast to a number first")
    return BinaryOp(kind, a, b, a.dtype)


def add(a: Any, b: Any) -> Expr:
    """a + b."""
    return binary("add", a, b)


def sub(a: Any, b: Any) -> Expr:
    """a - b."""
    return binary("sub", a, b)


def mul(a: Any, b: Any) -> Expr:
    """a * b."""
    return binary("mul", a, b)


def div(a: Any, b: Any) -> Expr:
    """a / b: true division for floats, truncating (C) division for ints."""
    return binary("div", a, b)


def truncdiv(a: Any, b: Any) -> Expr:
    """Integer division rounding toward zero (C semantics)."""
    return binary("div", a, b)


def truncmod(a: Any, b: Any) -> Expr:
    """Remainder with the sign of a (C % / fmod)."""
    return binary("mod", a, b)


def floordiv(a: Any, b: Any) -> Expr:
    """Division rounding toward -inf (numpy //); x // 0 is 0 for ints."""
    return binary("floordiv", a, b)


def floormod(a: Any, b: Any) -> Expr:
    """Remainder with the sign of b (numpy %); x % 0 is 0 for ints."""
    return binary("floormod", a, b)


def max(a: Any, b: Any) -> Expr:  # noqa: A001 - TVM name
    """Elementwise maximum; NaN propagates like numpy.maximum."""
    return binary("max", a, b)


def min(a: Any, b: Any) -> Expr:  # noqa: A001 - TVM name
    """Elementwise minimum; NaN propagates like numpy.minimum."""
    return binary("min", a, b)


def eq(a: Any, b: Any) -> Expr:
    """a == b (bool); `==` on Expr stays identity so nodes can be hashed."""
    return binary("eq", a, b)


def ne(a: Any, b: Any) -> Expr:
    """a != b (bool); true when either side is NaN."""
    return binary("ne", a, b)


def lt(a: Any, b: Any) -> Expr:
    """a < b (bool)."""
    return binary("lt", a, b)


def le(a: Any, b: Any) -> Expr:
    """a <= b (bool)."""
    return binary("le", a, b)


def gt(a: Any, b: Any) -> Expr:
    """a > b (bool)."""
    return binary("gt", a, b)


def ge(a: Any, b: Any) -> Expr:
    """a >= b (bool)."""
    return binary("ge", a, b)


def logical_and(a: Any, b: Any) -> Expr:
    """a && b on bools."""
    return binary("and", a, b)


def logical_or(a: Any, b: Any) -> Expr:
    """a || b on bools."""
    return binary("or", a, b)


def bitwise_and(a: Any, b: Any) -> Expr:
    """a & b on integers (or bools)."""
    return binary("bitand", a, b)


def bitwise_or(a: Any, b: Any) -> Expr:
    """a | b on integers (or bools)."""
    return binary("bitor", a, b)


def bitwise_xor(a: Any, b: Any) -> Expr:
    """a ^ b on integers (or bools)."""
    return binary("bitxor", a, b)


def bitwise_not(a: Any) -> Expr:
    """~a: a ^ -1 on integers (logical not on bools)."""
    a = convert(a)
    if is_bool(a.dtype):
        return Not(a)
    return binary("bitxor", a, const(-1, a.dtype))


def shift_left(a: Any, b: Any) -> Expr:
    """numpy.left_shift: a << b, 0 when b is negative or >= the bit width."""
    return binary("shl", a, b)


def shift_right(a: Any, b: Any) -> Expr:
    """numpy.right_shift: arithmetic for signed a; b out of [0, width) gives 0 or -1 (a < 0)."""
    return binary("shr", a, b)


def logical_not(a: Any) -> Expr:
    """!a on a bool."""
    a = convert(a)
    if not is_bool(a.dtype):
        raise CodegenError(f"logical_not: expected bool, got {a.dtype}")
    return Not(a)


def neg(a: Any) -> Expr:
    """-a (as -0.0 - a for floats, so the sign of zero flips like numpy.negative)."""
    a = convert(a)
    if is_bool(a.dtype):
        raise CodegenError("neg: expected a number, got bool")
    zero = FloatImm(-0.0, a.dtype) if is_float(a.dtype) else IntImm(0, a.dtype)
    return BinaryOp("sub", zero, a, a.dtype)


def cast(value: Any, dtype: str) -> Expr:
    """Convert to dtype (no-op when equal)."""
    value, dtype = convert(value), as_dtype(dtype)
    return value if value.dtype == dtype else Cast(dtype, value)


def reinterpret(value: Any, dtype: str) -> Expr:
    """The bits of value read as dtype (LLVM bitcast; numpy's .view); widths must match.

    bool counts as one byte, as stored: bool -> uint8 gives 0/1, int8/uint8 -> bool is x != 0.
    """
    value, dtype = convert(value), as_dtype(dtype)
    if value.dtype == dtype:
        return value
    if itemsize(value.dtype) != itemsize(dtype):
        raise CodegenError(f"reinterpret: {value.dtype} ({bits(value.dtype)} bits) cannot be "
                           f"read as {dtype} ({bits(dtype)} bits); the widths must match")
    return Reinterpret(dtype, value)


def _cond(c: Any, what: str) -> Expr:
    c = convert(c)
    if not is_bool(c.dtype):
        raise CodegenError(f"{what}: condition must be bool, got {c.dtype}")
    return c


def select(cond: Any, a: Any, b: Any) -> Expr:
    """cond ? a : b with both sides evaluated (use if_then_else to guard loads)."""
    cond = _cond(cond, "select")
    a, b = _pair(a, b, "select")
    return Select(cond, a, b, a.dtype)


def if_then_else(cond: Any, a: Any, b: Any) -> Expr:
    """cond ? a : b evaluating only the taken side (guards out-of-bounds loads)."""
    cond = _cond(cond, "if_then_else")
    a, b = _pair(a, b, "if_then_else")
    return IfThenElseExpr(cond, a, b, a.dtype)


CHECKED_INDEX = "relayjit.checked_index"


def checked_index(i: Any, n: int) -> Expr:
    """An int64 index into an axis of length n: negatives count from the end once; the kernel
    reports an index outside [-n, n) through its status (and clamps it meanwhile)."""
    return Call(CHECKED_INDEX, (cast(i, "int64"), IntImm(int(n), "int64")), "int64")


def call(name: str, *args: Any) -> Expr:
    """Call a math intrinsic by name; checks arity and dtypes."""
    if name not in INTRINSICS:
        raise CodegenError(f"unknown intrinsic {name!r}; known: {sorted(INTRINSICS)}")
    arity, kind = INTRINSICS[name]
    if len(args) != arity:
        raise CodegenError(f"{name}: expected {arity} arguments, got {len(args)}")
    exprs = list(_pair(args[0], args[1], name)) if arity == 2 else [convert(args[0])]
    dtype = exprs[0].dtype
    if kind in ("float", "pred") and not is_float(dtype):
        raise CodegenError(f"{name}: expected a float argument, got {dtype}")
    if kind == "numeric" and is_bool(dtype):
        raise CodegenError(f"{name}: expected a number, got bool")
    return Call(name, tuple(exprs), "bool" if kind == "pred" else dtype)


def pow(a: Any, b: Any) -> Expr:  # noqa: A001 - TVM name
    """a ** b; small constant exponents become multiplies/sqrt (exact and vectorisable)."""
    a, b = _pair(a, b, "pow")
    if isinstance(b, FloatImm):
        e = b.value
        if e == 1.0:
            return a
        if e == 2.0:
            return a * a
        if e == 3.0:
            return a * a * a
        if e == 0.5:
            return call("sqrt", a)
        if e == -1.0:
            return const(1.0, a.dtype) / a
    return call("pow", a, b)


power = pow


def _unary(name: str):
    def fn(x: Any) -> Expr:
        return call(name, x)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (math intrinsic)."
    return fn


exp, exp2, expm1 = _unary("exp"), _unary("exp2"), _unary("expm1")
log, log2, log10, log1p = _unary("log"), _unary("log2"), _unary("log10"), _unary("log1p")
sqrt, rsqrt, tanh, sigmoid, erf = (_unary(n) for n in ("sqrt", "rsqrt", "tanh", "sigmoid", "erf"))
floor, ceil, round, trunc = (_unary(n) for n in ("floor", "ceil", "round", "trunc"))
sin, cos, tan, asin, acos, atan = (_unary(n) for n in ("sin", "cos", "tan", "asin", "acos", "atan"))
sinh, cosh, asinh, acosh, atanh = (_unary(n) for n in ("sinh", "cosh", "asinh", "acosh", "atanh"))
fabs, abs, sign, softplus = _unary("fabs"), _unary("abs"), _unary("sign"), _unary("softplus")
isnan, isinf, isfinite = _unary("isnan"), _unary("isinf"), _unary("isfinite")


def atan2(y: Any, x: Any) -> Expr:
    """Elementwise atan2(y, x)."""
    return call("atan2", y, x)


def all(*conds: Any) -> Expr:  # noqa: A001 - TVM name
    """Logical and of several bool conditions (True when none given)."""
    flat: list[Any] = []
    for c in conds:
        flat.extend(c if isinstance(c, Sequence) else [c])
    if not flat:
        return IntImm(1, "bool")
    out = _cond(flat[0], "all")
    for c in flat[1:]:
        out = logical_and(out, c)
    return out


def any(*conds: Any) -> Expr:  # noqa: A001 - TVM name
    """Logical or of several bool conditions (False when none given)."""
    flat: list[Any] = []
    for c in conds:
        flat.extend(c if isinstance(c, Sequence) else [c])
    if not flat:
        return IntImm(0, "bool")
    out = _cond(flat[0], "any")
    for c in flat[1:]:
        out = logical_or(out, c)
    return out


def is_const(e: Expr, value: float | None = None) -> bool:
    """True when e is a constant (equal to value, when given)."""
    if not isinstance(e, (IntImm, FloatImm)):
        return False
    return value is None or (e.value == value and not math.isnan(e.value))
