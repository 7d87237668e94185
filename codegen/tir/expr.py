"""Expression nodes of the loop-nest IR: immutable, typed, compared by identity."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CodegenError
from .buffer import Buffer

ARITH_KINDS = frozenset(["add", "sub", "mul", "div", "floordiv", "floormod", "mod", "min", "max"])
COMPARE_KINDS = frozenset(["eq", "ne", "lt", "le", "gt", "ge"])
LOGIC_KINDS = frozenset(["and", "or"])
# integer bit ops (bool allowed for bitand/bitor/bitxor); shifts follow numpy for any amount
BIT_KINDS = frozenset(["bitand", "bitor", "bitxor", "shl", "shr"])
BINARY_KINDS = ARITH_KINDS | COMPARE_KINDS | LOGIC_KINDS | BIT_KINDS
REDUCE_KINDS = frozenset(["sum", "prod", "max", "min", "argmax", "argmin", "argmax_last",
                          "argmin_last"])


class Expr:
    """Base of all expressions; operators build nodes (`==`/`!=` stay identity: use tir.eq/ne)."""

    __slots__ = ()
    dtype: str

    def __add__(self, other: Any) -> Expr:
        return _ops().binary("add", self, other)

    def __radd__(self, other: Any) -> Expr:
        return _ops().binary("add", other, self)

    def __sub__(self, other: Any) -> Expr:
        return _ops().binary("sub", self, other)

    def __rsub__(self, other: Any) -> Expr:
        return _ops().binary("sub", other, self)

    def __mul__(self, other: Any) -> Expr:
        return _ops().binary("mul", self, other)

    def __rmul__(self, other: Any) -> Expr:
        return _ops().binary("mul", other, self)

    def __truediv__(self, other: Any) -> Expr:
        return _ops().binary("div", self, other)

    def __rtruediv__(self, other: Any) -> Expr:
        return _ops().binary("div", other, self)

    def __floordiv__(self, other: Any) -> Expr:
        return _ops().binary("floordiv", self, other)

    def __rfloordiv__(self, other: Any) -> Expr:
        return _ops().binary("floordiv", other, self)

    def __mod__(self, other: Any) -> Expr:
        return _ops().binary("floormod", self, other)

    def __rmod__(self, other: Any) -> Expr:
        return _ops().binary("floormod", other, self)

    def __neg__(self) -> Expr:
        return _ops().neg(self)

    def __lt__(self, other: Any) -> Expr:
        return _ops().binary("lt", self, other)

    def __le__(self, other: Any) -> Expr:
        return _ops().binary("le", self, other)

    def __gt__(self, other: Any) -> Expr:
        return _ops().binary("gt", self, other)

    def __ge__(self, other: Any) -> Expr:
        return _ops().binary("ge", self, other)

    def __and__(self, other: Any) -> Expr:
        return _ops().logical_and(self, other)

    def __or__(self, other: Any) -> Expr:
        return _ops().logical_or(self, other)

    def __invert__(self) -> Expr:
        return _ops().logical_not(self)

    def __bool__(self) -> bool:
        raise CodegenError(
            f"a tir expression ({type(self).__name__}) has no Python truth value; "
            "use tir.select/if_then_else/eq instead of `if`, `and`, `==`"
        )

    __hash__ = object.__hash__

    def __str__(self) -> str:
        return printer().expr_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


def _ops():
    """codegen.tir.ops, whose folding constructors the operators above build through."""
    from . import ops  # ops builds these nodes, so it imports this module

    return ops


def printer():
    """codegen.printer, through which every loop-IR node and PrimFunc prints."""
    from .. import printer as module  # the printer imports every node class

    return module


_NODE = dict(frozen=True, slots=True, eq=False, repr=False)


@dataclass(**_NODE)
class IntImm(Expr):
    """Integer (or bool) constant."""

    value: int
    dtype: str


@dataclass(**_NODE)
class FloatImm(Expr):
    """Floating-point constant (may be inf or nan)."""

    value: float
    dtype: str


@dataclass(**_NODE)
class Var(Expr):
    """A named scalar; loop and reduction variables. `dom` = (start, extent) for reduce axes."""

    name: str
    dtype: str = "int64"
    dom: tuple[int, int] | None = None


@dataclass(**_NODE)
class BinaryOp(Expr):
    """Binary operation; `kind` is in BINARY_KINDS. Comparisons and and/or produce bool."""

    kind: str
    a: Expr
    b: Expr
    dtype: str


@dataclass(**_NODE)
class Not(Expr):
    """Logical negation of a bool."""

    a: Expr
    dtype: str = "bool"


@dataclass(**_NODE)
class Select(Expr):
    """cond ? a : b with both sides evaluated (so both must be safe to evaluate)."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: str


@dataclass(**_NODE)
class IfThenElseExpr(Expr):
    """cond ? a : b evaluating only the taken side: guards loads (padding, bounds)."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: str


@dataclass(**_NODE)
class Cast(Expr):
    """Numeric conversion; float->int truncates toward zero, x->bool is x != 0."""

    dtype: str
    value: Expr


@dataclass(**_NODE)
class Reinterpret(Expr):
    """The bits of value read as dtype of the same width (LLVM bitcast, numpy .view)."""

    dtype: str
    value: Expr


@dataclass(**_NODE)
class Load(Expr):
    """Read one element of a buffer at int64 indices (one per buffer dimension)."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: str


@dataclass(**_NODE)
class Call(Expr):
    """Pure math intrinsic call by name (exp, log, sqrt, ...; see tir.ops.INTRINSICS)."""

    name: str
    args: tuple[Expr, ...]
    dtype: str


@dataclass(**_NODE)
class Reduce(Expr):
    """Reduction over `axis` (only before lowering). argmax/argmin produce an index dtype."""

    kind: str
    source: Expr
    axis: tuple[Var, ...]
    dtype: str
    where: Expr | None = None
