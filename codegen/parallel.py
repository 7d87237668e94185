"""Where loop nests go parallel, and on how many threads: the thread policy.

The thread count is a run-time setting (runtime.threadpool), so the kernels do not know it:
a parallel loop needs enough iterations that the pool's static split (contiguous chunks that
differ by one iteration) keeps every thread busy. How many threads its work pays for is known
at compile time: ParallelPolicy.threads prices the loop's FLOPs and bytes and gives each thread
at least min_thread_ns of it, so a fork/join (about a microsecond with spinning workers, far
more when a worker waits for a core) is never a large share of a thread's work. The loop
carries that count (For.threads); the pool runs it on at most that many threads, serially on
the caller for one, so a small kernel runs no slower on many threads than on one.
"""
from __future__ import annotations

from dataclasses import dataclass

from .tir.expr import IntImm, Var
from .tir.ops import floordiv, floormod
from .tir.stmt import For, LetStmt, Stmt

INDEX = "int64"


@dataclass(frozen=True)
class ParallelPolicy:
    """When a loop nest goes parallel, on how many threads and how finely it splits
    (CodegenOptions.parallel; part of the compile caches' keys)."""

    # Iterations a parallel loop aims for: balanced up to 8 threads within one iteration in 8.
    target_tasks: int = 64
    # A vectorised innermost loop split for parallelism keeps at least this many iterations.
    min_inner: int = 64
    # What a loop's work costs one thread: FLOPs (vectorised FMA code, well below peak) and
    # bytes moved (memory or a far cache), per nanosecond
    flops_per_ns: int = 32
    bytes_per_ns: int = 8
    # the work a thread must get for a loop to use it (a fork/join is ~1 us; on a loaded
    # machine a worker may first wait for its core)
    min_thread_ns: int = 20_000
    # the threads the build expects to run on (the pool's count when it was built; 0: not
    # known): schedules whose split is a trade-off split finer for more (conv2d min_tasks)
    pool_threads: int = 0

    def threads(self, flops: int = 0, nbytes: int = 0) -> int:
        """Threads a loop of this much work pays for (1: serial)."""
        ns = flops / self.flops_per_ns + nbytes / self.bytes_per_ns
        return max(1, int(ns // self.min_thread_ns))

    def contraction(self, macs: int, floats: int) -> int:
        """threads() of a product of `macs` multiply-adds over `floats` float32 operands and
        results."""
        return self.threads(2 * macs, 4 * floats)

    def loop(self, var: Var, extent: int, body: Stmt, flops: int = 0, nbytes: int = 0) -> For:
        """For over extent: parallel on the threads its work pays for when that is more than
        one (and it has two iterations or more), else serial."""
        return parallel_loop(var, extent, body, self.threads(flops, nbytes))

    def copy_loops(self, loop_vars: list[Var], extents: list[int], body: Stmt,
                   elements: int, name: str) -> Stmt:
        """Nested loops over `extents` around body, copying `elements` floats in all (the
        schedules' padding and packing: 8 bytes an element moved): fused into one parallel
        loop (fused_parallel) when that pays for more than one thread, else serial."""
        n = self.threads(nbytes=8 * elements)
        if n > 1:
            return fused_parallel(loop_vars, extents, body, name, n)
        for v, e in reversed(list(zip(loop_vars, extents))):
            body = For(v, e, body)
        return body


def parallel_loop(var: Var, extent: int, body: Stmt, threads: int) -> For:
    """For over extent, parallel on `threads` threads when that is more than one and the loop
    has two iterations or more, else serial."""
    if threads > 1 and extent > 1:
        return For(var, extent, body, "parallel", threads)
    return For(var, extent, body)


def fused_parallel(loop_vars: list[Var], extents: list[int], body: Stmt, name: str,
                   threads: int = 0) -> Stmt:
    """One parallel loop over the product of `extents`, binding each var of `loop_vars`
    (outermost first) from the fused index; vars of extent 1 are bound to 0. threads: the
    loop's cap (For.threads)."""
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
    return For(fused, total, body, "parallel", threads)


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
    # a point reads work_per_point values and writes one
    threads = policy.threads(points * work_per_point, 4 * points * (work_per_point + 1))
    if threads < 2 or ndim == 0:
        return serial_nest(axis, shape, body, vectorize)
    lead, prod = 0, 1
    while lead < ndim - (1 if vectorize else 0) and prod < policy.target_tasks:
        prod *= shape[lead]
        lead += 1
    if prod >= 2:
        nest = serial_nest(axis[lead:], shape[lead:], body, vectorize)
        return fused_parallel(list(axis[:lead]), list(shape[:lead]), nest, axis[0].name,
                              threads)
    last = shape[-1]
    for tasks in (policy.target_tasks, 48, 32, 24, 16, 12, 8, 6, 4, 2):
        if last % tasks == 0 and last // tasks >= policy.min_inner:
            chunk = last // tasks
            outer, inner = Var(f"{axis[-1].name}_o", INDEX), Var(f"{axis[-1].name}_i", INDEX)
            nest = For(inner, chunk, LetStmt(axis[-1], outer * chunk + inner, body),
                       vector_kind)
            return fused_parallel([*axis[:-1], outer], [*shape[:-1], tasks], nest,
                                  axis[-1].name, threads)
    return serial_nest(axis, shape, body, vectorize)


def serial_nest(axis, shape, body: Stmt, vectorize: bool = False) -> Stmt:
    """Row-major loops over `shape` (the innermost vectorised when asked and longer than 1)."""
    for d in range(len(axis) - 1, -1, -1):
        inner = d == len(axis) - 1
        kind = "vectorized" if vectorize and inner and shape[d] > 1 else "serial"
        body = For(axis[d], shape[d], body, kind)
    return body
