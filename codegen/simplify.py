"""Arithmetic simplification for index expressions: folding, identities, div/mod by constants.

Used by lowering after inlining substitutes loop variables into producer indices, so that
e.g. reshape's `(i*16 + j) // 16` becomes `i` when 0 <= j < 16 is known from loop bounds.
Float expressions are only constant-folded (IEEE-exact via numpy) and `x * 1` removed:
`x + 0.0` is not an identity for x = -0.0.
"""
from __future__ import annotations

import numpy as np

from .tir.dtype import bits, float_to_int, is_bool, is_float, is_integer, wrap_int
from .tir.expr import BinaryOp, Cast, Expr, FloatImm, IfThenElseExpr, IntImm, Not, Select, Var
from .tir.functor import rewrite

Bounds = dict[Var, tuple[int, int]]
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def simplify(e: Expr, bounds: Bounds | None = None) -> Expr:
    """Simplified e; `bounds` gives inclusive integer ranges of loop variables."""
    return _Simplifier(bounds or {}).run(e)


class _Simplifier:
    """One simplification run: memoised rewriting plus interval analysis over ints."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.ranges: dict[int, tuple[Expr, tuple[int, int] | None]] = {}

    def run(self, e: Expr) -> Expr:
        return rewrite(e, self.visit)

    # ---------------------------------------------------------------- intervals
    def range_of(self, e: Expr) -> tuple[int, int] | None:
        """Inclusive [lo, hi] of an integer expression, or None when unknown (explicit stack)."""
        got = self.ranges.get(id(e))
        if got is not None:
            return got[1]
        stack: list[tuple[Expr, bool]] = [(e, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in self.ranges:
                continue
            kids = _range_children(node)
            if not expanded and kids:
                stack.append((node, True))
                stack.extend((c, False) for c in kids if id(c) not in self.ranges)
                continue
            self.ranges[id(node)] = (node, self._range(node))  # node kept alive: ids unique
        return self.ranges[id(e)][1]

    def _known(self, e: Expr) -> tuple[int, int] | None:
        return self.ranges[id(e)][1]

    def _range(self, e: Expr) -> tuple[int, int] | None:
        """Range of e from its children's ranges (already computed by range_of)."""
        t = type(e)
        if t is IntImm:
            return (e.value, e.value)
        if t is Var:
            return self.bounds.get(e)
        if not _range_children(e):
            return None
        if t is Cast:
            return self._known(e.value)
        ra, rb = self._known(e.a), self._known(e.b)
        if ra is None or rb is None:
            return None
        k = e.kind
        if k == "add":
            return (ra[0] + rb[0], ra[1] + rb[1])
        if k == "sub":
            return (ra[0] - rb[1], ra[1] - rb[0])
        if k == "mul":
            c = [ra[0] * rb[0], ra[0] * rb[1], ra[1] * rb[0], ra[1] * rb[1]]
            return (min(c), max(c))
        if k == "min":
            return (min(ra[0], rb[0]), min(ra[1], rb[1]))
        if k == "max":
            return (max(ra[0], rb[0]), max(ra[1], rb[1]))
        if k == "floordiv" and rb[0] == rb[1] and rb[0] > 0:
            return (ra[0] // rb[0], ra[1] // rb[0])
        if k == "floormod" and rb[0] == rb[1] and rb[0] > 0:
            return (0, rb[0] - 1) if ra[1] - ra[0] >= rb[0] or ra[0] // rb[0] != ra[1] // rb[0] \
                else (ra[0] % rb[0], ra[1] % rb[0])
        return None

    # ---------------------------------------------------------------- rewriting
    def visit(self, e: Expr) -> Expr | None:
        t = type(e)
        if t is BinaryOp:
            return self._binary(e)
        if t is Not and type(e.a) is IntImm:
            return IntImm(1 - e.a.value, "bool")
        if (t is Select or t is IfThenElseExpr) and type(e.cond) is IntImm:
            return e.a if e.cond.value else e.b
        if t is Cast and type(e.value) in (IntImm, FloatImm):
            return _fold_cast(e)
        return None

    def _binary(self, e: BinaryOp) -> Expr | None:
        a, b, k = e.a, e.b, e.kind
        if type(a) in (IntImm, FloatImm) and type(b) in (IntImm, FloatImm):
            return _fold(e)
        if k in _CMP and is_integer(a.dtype):
            ra, rb = self.range_of(a), self.range_of(b)
            if ra is not None and rb is not None:
                decided = _decide(k, ra, rb)
                if decided is not None:
                    return IntImm(int(decided), "bool")
            return None
        if k in ("and", "or"):
            return _logic(k, a, b)
        if is_float(e.dtype):
            if k == "mul" and _is(b, 1):
                return a
            if k == "mul" and _is(a, 1):
                return b
            if k == "div" and _is(b, 1):
                return a
            return None
        if not is_integer(e.dtype):
            return None
        if k == "add":
            return b if _is(a, 0) else a if _is(b, 0) else None
        if k == "sub":
            return a if _is(b, 0) else None
        if k == "mul":
            if _is(a, 0) or _is(b, 0):
                return IntImm(0, e.dtype)
            return b if _is(a, 1) else a if _is(b, 1) else None
        if k in ("floordiv", "floormod", "div", "mod") and type(b) is IntImm and b.value > 0:
            return self._divmod(e, b.value)
        if k in ("min", "max"):
            ra, rb = self.range_of(a), self.range_of(b)
            if ra is not None and rb is not None:
                if ra[1] <= rb[0]:
                    return a if k == "min" else b
                if rb[1] <= ra[0]:
                    return b if k == "min" else a
        return None

    def _divmod(self, e: BinaryOp, c: int) -> Expr | None:
        """(q*c + r) // c -> q + r // c and (q*c + r) % c -> r % c, dropping r//c when 0<=r<c."""
        is_div = e.kind in ("floordiv", "div")
        if c == 1:
            return e.a if is_div else IntImm(0, e.dtype)
        ra = self.range_of(e.a)
        if ra is not None and ra[0] >= 0 and ra[1] < c:
            return IntImm(0, e.dtype) if is_div else e.a
        if e.kind in ("div", "mod") and (ra is None or ra[0] < 0):
            return None  # truncating semantics differ for negatives; leave alone
        terms = _linear(e.a)
        if terms is None:
            return None
        whole = [(t, coef // c) for t, coef in terms if t is not None and coef % c == 0]
        rest = [(t, coef) for t, coef in terms if t is None or coef % c != 0]
        const = sum(coef for t, coef in terms if t is None)
        rest = [(t, coef) for t, coef in rest if t is not None]
        # keep the constant's multiple of c with the quotient so the remainder stays small
        q_const, r_const = divmod(const, c)
        r_expr = _build(rest, r_const, e.dtype)
        rr = self.range_of(r_expr)
        if not whole and q_const == 0:
            if rr is not None and 0 <= rr[0] and rr[1] < c:
                return IntImm(0, e.dtype) if is_div else r_expr
            return None
        if rr is not None and 0 <= rr[0] and rr[1] < c:
            return _build(whole, q_const, e.dtype) if is_div else r_expr
        if e.kind in ("div", "mod"):
            return None
        if is_div:
            quotient = _build(whole, q_const, e.dtype)
            return BinaryOp("add", quotient, BinaryOp("floordiv", r_expr, IntImm(c, e.dtype),
                                                      e.dtype), e.dtype)
        return BinaryOp("floormod", r_expr, IntImm(c, e.dtype), e.dtype)


def _range_children(e: Expr) -> tuple[Expr, ...]:
    """Children whose ranges determine e's: int->int casts and integer binary ops."""
    t = type(e)
    if t is Cast and is_integer(e.dtype) and is_integer(e.value.dtype):
        return (e.value,)
    if t is BinaryOp and is_integer(e.dtype):
        return (e.a, e.b)
    return ()


def _is(e: Expr, v: int) -> bool:
    return type(e) in (IntImm, FloatImm) and e.value == v


def _decide(kind: str, ra: tuple[int, int], rb: tuple[int, int]) -> bool | None:
    if kind == "lt":
        return True if ra[1] < rb[0] else False if ra[0] >= rb[1] else None
    if kind == "le":
        return True if ra[1] <= rb[0] else False if ra[0] > rb[1] else None
    if kind == "gt":
        return True if ra[0] > rb[1] else False if ra[1] <= rb[0] else None
    if kind == "ge":
        return True if ra[0] >= rb[1] else False if ra[1] < rb[0] else None
    if kind == "eq" and (ra[1] < rb[0] or rb[1] < ra[0]):
        return False
    if kind == "ne" and (ra[1] < rb[0] or rb[1] < ra[0]):
        return True
    return None


def _logic(kind: str, a: Expr, b: Expr) -> Expr | None:
    for x, y in ((a, b), (b, a)):
        if type(x) is IntImm:
            if kind == "and":
                return y if x.value else IntImm(0, "bool")
            return IntImm(1, "bool") if x.value else y
    return None


def _linear(e: Expr) -> list[tuple[Expr | None, int]] | None:
    """e as [(term, coef)] with term None for the constant; None when not linear-ish."""
    out: list[tuple[Expr | None, int]] = []
    stack: list[tuple[Expr, int]] = [(e, 1)]
    while stack:
        node, coef = stack.pop()
        if type(node) is IntImm:
            out.append((None, coef * node.value))
        elif type(node) is BinaryOp and node.kind in ("add", "sub"):
            stack.append((node.b, -coef if node.kind == "sub" else coef))
            stack.append((node.a, coef))
        elif type(node) is BinaryOp and node.kind == "mul" and type(node.b) is IntImm:
            stack.append((node.a, coef * node.b.value))
        elif type(node) is BinaryOp and node.kind == "mul" and type(node.a) is IntImm:
            stack.append((node.b, coef * node.a.value))
        else:
            out.append((node, coef))
    return out


def _build(terms: list[tuple[Expr, int]], const: int, dtype: str) -> Expr:
    acc: Expr | None = None
    for t, coef in terms:
        if coef == 0:
            continue
        term = t if coef == 1 else BinaryOp("mul", t, IntImm(coef, dtype), dtype)
        acc = term if acc is None else BinaryOp("add", acc, term, dtype)
    if acc is None:
        return IntImm(const, dtype)
    return acc if const == 0 else BinaryOp("add", acc, IntImm(const, dtype), dtype)


def _np(e: Expr):
    return np.array(e.value, dtype=np.dtype(e.dtype if e.dtype != "bool" else "bool"))


def _fold(e: BinaryOp) -> Expr | None:
    """Fold a binary op on two constants with numpy semantics (ints wrap, x//0 stays)."""
    a, b, k, dt = e.a, e.b, e.kind, e.a.dtype
    if k in _CMP:
        return IntImm(int(bool(_CMP[k](a.value, b.value))), "bool")
    if k in ("and", "or"):
        v = (a.value and b.value) if k == "and" else (a.value or b.value)
        return IntImm(int(bool(v)), "bool")
    if k in _BIT:
        return IntImm(wrap_int(_BIT[k](a.value, b.value, dt), dt), dt)
    if is_bool(dt):
        return None
    if is_float(dt):
        x, y = _np(a), _np(b)
        with np.errstate(all="ignore"):
            ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                   "min": np.minimum, "max": np.maximum, "floordiv": np.floor_divide,
                   "floormod": np.mod, "mod": np.fmod}
            return FloatImm(float(ops[k](x, y)), dt) if k in ops else None
    x, y = a.value, b.value
    if k in ("div", "mod", "floordiv", "floormod") and y in (0, -1):
        return None  # leave guarded semantics to the emitter
    if k == "add":
        v = x + y
    elif k == "sub":
        v = x - y
    elif k == "mul":
        v = x * y
    elif k == "min":
        v = min(x, y)
    elif k == "max":
        v = max(x, y)
    elif k == "floordiv":
        v = x // y
    elif k == "floormod":
        v = x % y
    elif k == "div":
        v = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
    else:  # mod
        v = x - (abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)) * y
    return IntImm(wrap_int(v, dt), dt)


def _shift(x: int, y: int, dt: str, left: bool) -> int:
    """numpy's shift of constants: amounts outside [0, width) give 0 (or -1 for x < 0 >> y)."""
    if 0 <= y < bits(dt):
        return x << y if left else x >> y
    return -1 if not left and x < 0 else 0


# bit ops on the (wrapped) values; Python's & | ^ on negative ints are two's complement
_BIT = {"bitand": lambda x, y, dt: x & y, "bitor": lambda x, y, dt: x | y,
        "bitxor": lambda x, y, dt: x ^ y,
        "shl": lambda x, y, dt: _shift(x, y, dt, True),
        "shr": lambda x, y, dt: _shift(x, y, dt, False)}


def _fold_cast(e: Cast) -> Expr | None:
    v, dt = e.value, e.dtype
    if is_float(dt):
        return FloatImm(float(np.array(v.value).astype(dt)), dt)
    if is_bool(dt):
        return IntImm(int(v.value != 0), "bool")
    if type(v) is FloatImm:  # the value as its dtype holds it, then the emitter's conversion
        return IntImm(float_to_int(float(np.array(v.value, dtype=v.dtype)), dt), dt)
    return IntImm(wrap_int(v.value, dt), dt)
