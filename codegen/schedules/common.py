"""Small TIR-building helpers shared by the schedules."""
from __future__ import annotations

from typing import Callable

from ..llvm.microkernels.descriptors import PTR, Microkernel
from ..tir.expr import Call, Expr, IntImm, Load, Var
from ..tir.ops import cast, const
from ..tir.stmt import Buffer, Evaluate, For, Stmt, seq

Epilogue = Callable[[Expr, tuple], Expr]

F32 = "float32"
I64 = "int64"


def var(name: str) -> Var:
    return Var(name, I64)


def imm(v: int) -> IntImm:
    return IntImm(int(v), I64)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def loop(v: Var, extent: int, body: Stmt, kind: str = "serial") -> Stmt:
    """A For, or the body with v bound to 0 when the extent is 1 (via a LetStmt)."""
    if extent == 0:
        return seq()
    return For(v, extent, body, kind)


def addr(buf: Buffer, *indices) -> Load:
    """A micro-kernel pointer argument: the address of buf[indices]."""
    return Load(buf, tuple(imm(i) if isinstance(i, int) else cast(i, I64) for i in indices),
                buf.dtype)


def ukr_call(kernel: Microkernel, *args) -> Stmt:
    """Evaluate a call of the micro-kernel `kernel` describes (codegen.llvm.microkernels):
    its declared pointer arguments are addresses (addr), the others integer values."""
    if len(args) != len(kernel.args):
        raise ValueError(f"micro-kernel {kernel.symbol} takes {len(kernel.args)} arguments, "
                         f"got {len(args)}")
    out = []
    for k, (a, declared) in enumerate(zip(args, kernel.args)):
        a = imm(a) if isinstance(a, int) else a
        if (type(a) is Load) != (declared == PTR):
            raise ValueError(f"micro-kernel {kernel.symbol}: argument {k} is declared "
                             f"{declared}, got {a!r}")
        out.append(a)
    return Evaluate(Call(kernel.symbol, tuple(out), "int32"))


def zero() -> Expr:
    return const(0.0, F32)


def mark_epilogue(fn, in_place: bool = False, casts: bool | None = None):
    """Mark an extern fcompute as accepting `epilogue=` (codegen.lower fuses consumers).

    in_place: the statement it returns writes each output element once, through the
    epilogue, and never reads the output; an epilogue input read at the output's own index
    may then share the output's storage (codegen.lower records which).
    casts (default: in_place): the epilogue may change the dtype, the output buffer then of
    the consumer's dtype (a cast to float16, a comparison, later an int8 requantisation):
    the statement computes in its own dtype elsewhere (registers, scratch tiles) and stores
    each output element once, through the epilogue, when its output's dtype is not its own
    (an in_place statement always does)."""
    fn.supports_epilogue = True
    fn.epilogue_in_place = in_place
    fn.epilogue_casts = in_place if casts is None else casts
    return fn


def tree_reduce(values: list, combine):
    """combine over values as a balanced tree (log depth instead of one serial chain)."""
    while len(values) > 1:
        pairs = [combine(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        values = pairs + ([values[-1]] if len(values) % 2 else [])
    return values[0]


def padded_row(store: Callable[[Expr, Expr], Stmt], load: Callable[[Expr], Expr], width: int,
               step: int, offset: int, src_width: int, name: str) -> Stmt:
    """dst[q] = src[q*step + offset] for q in [0, width), zero where that column falls
    outside [0, src_width): a zero loop, a plain copy, a zero loop, with the bounds worked
    out here. A bounds test on every element kept the copy scalar (masked single loads: a
    3x3 conv's padded input cost 4% of a 16->64 conv at 55x55)."""
    lo = min(width, max(0, ceil_div(-offset, step)))
    hi = max(lo, min(width, (src_width - 1 - offset) // step + 1))
    q = [var(f"{name}_{part}") for part in ("l", "m", "r")]
    return seq(For(q[0], lo, store(q[0], zero()), "vectorized") if lo else None,
               For(q[1], hi - lo, store(q[1] + lo, load((q[1] + lo) * step + offset)),
                   "vectorized") if hi > lo else None,
               For(q[2], width - hi, store(q[2] + hi, zero()), "vectorized")
               if width > hi else None)
