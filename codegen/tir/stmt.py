"""Statement nodes, buffers and PrimFunc of the loop-nest IR."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CodegenError
from .dtype import as_dtype, itemsize
from .expr import Expr, Var

LOOP_KINDS = frozenset(["serial", "vectorized", "unrolled", "parallel"])
_NODE = dict(frozen=True, slots=True, eq=False, repr=False)


@dataclass(**_NODE)
class Buffer:
    """A typed n-d array in memory; strides in elements (None = row-major contiguous)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None = None
    alignment: int = 64

    def __post_init__(self) -> None:
        shape = tuple(self.shape)
        for dim in shape:
            if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
                raise CodegenError(
                    f"buffer {self.name}: shape must be static ints >= 0, got {self.shape!r}"
                )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if self.strides is not None:
            if len(self.strides) != len(shape):
                raise CodegenError(
                    f"buffer {self.name}: {len(shape)} dims but {len(self.strides)} strides"
                )
            object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for dim in self.shape:
            n *= dim
        return n

    @property
    def nbytes(self) -> int:
        """Bytes spanned by the buffer (used for `dereferenceable` and scratch sizing)."""
        if self.strides is None:
            return self.size * itemsize(self.dtype)
        if self.size == 0:
            return 0
        span = 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides))
        return span * itemsize(self.dtype)

    def elem_strides(self) -> tuple[int, ...]:
        """Strides in elements, computing row-major ones when not given."""
        if self.strides is not None:
            return self.strides
        out, acc = [], 1
        for dim in reversed(self.shape):
            out.append(acc)
            acc *= dim
        return tuple(reversed(out))

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.dtype})"

    __hash__ = object.__hash__


class Stmt:
    """Base of statements."""

    __slots__ = ()

    def __str__(self) -> str:
        from ..printer import stmt_str

        return stmt_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


@dataclass(**_NODE)
class ConstantBuffer(Buffer):
    """A read-only buffer whose bytes are compiled into the kernel (a Relay constant kept
    inside a fused function when relay.FuseOps.link_params is on); never a parameter."""

    data: bytes = b""

    def __post_init__(self) -> None:
        Buffer.__post_init__(self)
        if self.strides is not None or len(self.data) != self.nbytes:
            raise CodegenError(f"constant buffer {self.name}: {len(self.data)} bytes of data "
                               f"for a contiguous {self.shape} {self.dtype} buffer "
                               f"({self.nbytes} bytes)")


@dataclass(**_NODE)
class For(Stmt):
    """for var in [0, extent): body; kind is a hint to the emitter (vectorized adds metadata).

    The extent is a static int, except in a kernel family's shared body, where it may be an
    expression of the family's extent argument (codegen.kernel_families)."""

    var: Var
    extent: int | Expr
    body: Stmt
    kind: str = "serial"

    def __post_init__(self) -> None:
        if self.kind not in LOOP_KINDS:
            raise CodegenError(f"For {self.var.name}: kind must be one of {sorted(LOOP_KINDS)}, "
                               f"got {self.kind!r}")
        if isinstance(self.extent, Expr):  # a kernel family's extent (codegen.kernel_families)
            if self.extent.dtype != "int64":
                raise CodegenError(f"For {self.var.name}: an extent expression must be int64, "
                                   f"got {self.extent.dtype}")
        elif not isinstance(self.extent, int) or self.extent < 0:
            raise CodegenError(f"For {self.var.name}: extent must be a static int >= 0 or an "
                               f"int64 expression, got {self.extent!r}")


@dataclass(**_NODE)
class Store(Stmt):
    """buffer[indices] = value."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(**_NODE)
class Allocate(Stmt):
    """Scratch buffer live for `body` (stack for small, a static arena for large)."""

    buffer: Buffer
    body: Stmt


@dataclass(**_NODE)
class IfThenElse(Stmt):
    """if (cond) then_body else else_body."""

    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None


@dataclass(**_NODE)
class LetStmt(Stmt):
    """Bind var = value (evaluated once) inside body."""

    var: Var
    value: Expr
    body: Stmt


@dataclass(**_NODE)
class SeqStmt(Stmt):
    """Statements in order."""

    stmts: tuple[Stmt, ...]


@dataclass(**_NODE)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (a no-op for pure expressions)."""

    value: Expr


@dataclass(**_NODE)
class PrimFunc:
    """One kernel: params are buffers (inputs then outputs) and a loop-nest body."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        if not self.name.isidentifier():
            raise CodegenError(f"PrimFunc name must be an identifier, got {self.name!r}")

    def __str__(self) -> str:
        from ..printer import primfunc_str

        return primfunc_str(self)

    __hash__ = object.__hash__


def seq(*stmts: Stmt | None) -> Stmt:
    """Build a SeqStmt, flattening nested sequences and dropping None."""
    out: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            out.extend(s.stmts)
        else:
            out.append(s)
    return out[0] if len(out) == 1 else SeqStmt(tuple(out))
