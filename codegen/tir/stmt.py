"""Statement nodes and PrimFunc of the loop-nest IR."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CodegenError
from .buffer import Buffer
from .expr import Expr, Var, printer

LOOP_KINDS = frozenset(["serial", "vectorized", "unrolled", "parallel"])
_NODE = dict(frozen=True, slots=True, eq=False, repr=False)


class Stmt:
    """Base of statements."""

    __slots__ = ()

    def __str__(self) -> str:
        return printer().stmt_str(self)

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
    # a parallel loop runs on at most this many threads (0: all the pool has): the count its
    # work pays for (codegen.parallel.ParallelPolicy.threads)
    threads: int = 0

    def __post_init__(self) -> None:
        if self.kind not in LOOP_KINDS:
            raise CodegenError(f"For {self.var.name}: kind must be one of {sorted(LOOP_KINDS)}, "
                               f"got {self.kind!r}")
        if not isinstance(self.threads, int) or self.threads < 0:
            raise CodegenError(f"For {self.var.name}: threads must be an int >= 0, got "
                               f"{self.threads!r}")
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
    """Scratch buffer live for `body` (stack for small, the heap for large). `size`, in a
    symbolic kernel (codegen.symbolic) only: the number of elements as an int64 expression of
    its symbols, the buffer declaring none (its size is known at run time)."""

    buffer: Buffer
    body: Stmt
    size: Expr | None = None


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
        return printer().primfunc_str(self)

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
