"""float16 and bfloat16 as storage types: a compute stage works in float32 and rounds its
result to the narrow type (below, "half" stands for either).

numpy (and ONNX's reference) evaluates each float16 op in float32 and rounds the result to
float16, so every op's result is a half. Here one te.compute stage is one op: `promote`
rewrites a stage body so everything typed float16 inside it is computed in float32 (loads
of half buffers widen, constants are already half values, reductions accumulate in
float32) and the body's result is rounded once, `float16(body)`. A consumer that inlines the
stage sees that rounding as `float32(float16(...))`, so a fused chain of float16 ops still
rounds after every op, exactly as the unfused graph would. The emitter also handles the
float16 nodes hand-written TIR may contain, rounding after each one (IEEE half arithmetic).
"""
from __future__ import annotations

from .expr import (
    BinaryOp, Call, Cast, Expr, FloatImm, IfThenElseExpr, Load, Reduce, Reinterpret, Select, Var,
)
from .dtype import bits
from .functor import post_order, rewrite

HALF, BFLOAT, WORK = "float16", "bfloat16", "float32"
NARROW = (HALF, BFLOAT)  # the float types computed in float32


def has_half(e: Expr) -> bool:
    """True when any node of e is typed float16 or bfloat16."""
    return any(n.dtype in NARROW for n in post_order(e))


def promote(body: Expr) -> Expr:
    """body computed in float32 wherever it is narrow, rounded to its type once at the root."""
    out = rewrite(body, _widen)
    if body.dtype not in NARROW:
        return out
    if type(out) is Cast and out.value.dtype == body.dtype:  # already narrow (a load, a cast)
        return out.value
    return Cast(body.dtype, out)


def _widen(e: Expr) -> Expr | None:
    """e (children already widened) as a float32 node, or a float32 view of a half value."""
    t = type(e)
    if t is Cast:
        if e.dtype in NARROW:  # a rounding point: keep it, read the half back as float32
            return Cast(WORK, e)
        if e.value.dtype == e.dtype:  # float32(x) of a widened x: nothing left to convert
            return e.value
        return None
    if t is Reinterpret and e.value.dtype == WORK and bits(e.dtype) == 16:  # a half's bits
        v = e.value
        return Reinterpret(e.dtype, v.value if type(v) is Cast and v.value.dtype == HALF
                           else Cast(HALF, v))
    if e.dtype not in NARROW:
        return None
    if t is Load or t is Var:
        return Cast(WORK, e)
    if t is FloatImm:
        return FloatImm(e.value, WORK)
    if t is BinaryOp:
        return BinaryOp(e.kind, e.a, e.b, WORK)
    if t is Select:
        return Select(e.cond, e.a, e.b, WORK)
    if t is IfThenElseExpr:
        return IfThenElseExpr(e.cond, e.a, e.b, WORK)
    if t is Call:
        return Call(e.name, e.args, WORK)
    if t is Reduce:
        return Reduce(e.kind, e.source, e.axis, WORK, e.where)
    return Cast(WORK, e)  # anything else yielding a half (reinterpret, ...): widen its value
