"""Where loop nests go parallel: the outer loops of a stage run on the runtime's thread pool.

The thread count is a run-time setting (runtime.threadpool), so the kernels do not know it:
a parallel loop only needs enough iterations that the pool's static split (contiguous chunks
that differ by one iteration) keeps every thread busy, and enough work per call that the
fork/join (about a microsecond with spinning workers) is noise.
"""
from __future__ import annotations

from dataclasses import dataclass

from .tir.expr import IntImm, Var
from .tir.ops import floordiv, floormod
from .tir.stmt import For, LetStmt, Stmt

INDEX = "int64"


@dataclass(frozen=True)
class ParallelPolicy:
    """When a loop nest goes parallel and how finely it splits (CodegenOptions.parallel)."""

    # Innermost-body executions below which a nest stays serial (~10 us of elementwise work).
    min_work: int = 1 << 15
    # Iterations a parallel loop aims for: balanced up to 8 threads within one iteration in 8.
    target_tasks: int = 64
    # A vectorised innermost loop split for parallelism keeps at least this many iterations.
    min_inner: int = 64

    def pays(self, work: int) -> bool:
        """Whether `work` innermost-body executions are enough for a parallel loop."""
        return work >= self.min_work

    def kind(self, work: int) -> str:
        """"parallel" when `work` pays for it, else "serial"."""
        return "parallel" if self.pays(work) else "serial"


def fused_parallel(loop_vars: list[Var], extents: list[int], body: Stmt, name: str) -> Stmt:
    """One parallel loop over the product of `extents`, binding each var of `loop_vars`
    (outermost first) from the fused index; vars of extent 1 are bound to 0."""
    total = 1
    for e in extents:
        total *= e
    if total == 0:
        return body
    fused = Var(f"{name}_par", INDEX)
    inner = 1
    for v, e in reversed(list(zip(loop_vars, extents))):
        if e == 1:
            value = IntImm(0, INDEX)
        else:
            value = fused if inner == 1 else floordiv(fused, inner)
            if inner * e != total:
                value = floormod(value, e)
        body = LetStmt(v, value, body)
        inner *= e
    return For(fused, total, body, "parallel")


def stage_nest(axis: tuple[Var, ...], shape: tuple[int, ...], body: Stmt, vectorize: bool,
               policy: ParallelPolicy, work_per_point: int = 1) -> Stmt:
    """The loop nest of one stage over `shape`: the innermost loop vectorised when asked, and
    the outer loops fused into one parallel loop when the stage has work enough.

    The parallel loop takes the fewest leading axes that give policy.target_tasks iterations
    (never the innermost when it is the vector loop); when they give fewer than two, a
    vectorised innermost axis is split into chunks instead.
    """
    ndim = len(axis)
    points = 1
    for e in shape:
        points *= e
    vector_kind = "vectorized" if vectorize else "serial"
    if not policy.pays(points * work_per_point) or ndim == 0:
        return serial_nest(axis, shape, body, vectorize)
    lead, prod = 0, 1
    while lead < ndim - (1 if vectorize else 0) and prod < policy.target_tasks:
        prod *= shape[lead]
        lead += 1
    if prod >= 2:
        nest = serial_nest(axis[lead:], shape[lead:], body, vectorize)
        return fused_parallel(list(axis[:lead]), list(shape[:lead]), nest, axis[0].name)
    last = shape[-1]
    for tasks in (policy.target_tasks, 48, 32, 24, 16, 12, 8, 6, 4, 2):
        if last % tasks == 0 and last // tasks >= policy.min_inner:
            chunk = last // tasks
            outer, inner = Var(f"{axis[-1].name}_o", INDEX), Var(f"{axis[-1].name}_i", INDEX)
            nest = For(inner, chunk, LetStmt(axis[-1], outer * chunk + inner, body),
                       vector_kind)
            return fused_parallel([*axis[:-1], outer], [*shape[:-1], tasks], nest,
                                  axis[-1].name)
    return serial_nest(axis, shape, body, vectorize)


def serial_nest(axis, shape, body: Stmt, vectorize: bool = False) -> Stmt:
    """Row-major loops over `shape` (the innermost vectorised when asked and longer than 1)."""
    for d in range(len(axis) - 1, -1, -1):
        inner = d == len(axis) - 1
        kind = "vectorized" if vectorize and inner and shape[d] > 1 else "serial"
        body = For(axis[d], shape[d], body, kind)
    return body
