"""Where compile time goes: seconds per compile stage and cache outcomes, per caller.

Within `with record_compile_stats() as stats:` every compilation in this thread (or asyncio
task) adds its seconds per stage and its cache outcomes to `stats` (relay.build uses it for
its timing report). The hooks (`timed`, `note`) are perf_counter calls around the existing
LLVM calls; no state is shared between threads.
"""
from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar
from dataclasses import dataclass, fields


@dataclass
class CompileStats:
    """Seconds per compile stage and cache outcomes, summed over a record_compile_stats block.

    The seconds fields are disjoint stretches of this process's wall time, except
    `jobs_seconds`: time forked compile jobs spent in their own processes, in parallel.
    """

    digest: float = 0.0          # structural key of each kernel set
    cache_lookup: float = 0.0    # reading the disk cache
    emit_ir: float = 0.0         # TIR -> LLVM IR text (our emitter)
    parse_verify: float = 0.0    # llvm.parse_assembly + verify
    optimise: float = 0.0        # the O-level pipeline
    jobs_wait: float = 0.0       # forking compile jobs, then waiting for their objects
    link: float = 0.0            # linking micro-kernels and the signature table in
    machine_code: float = 0.0    # emit_object (also for cached modules under new names)
    cache_write: float = 0.0     # bitcode for the caches + the disk cache write
    load: float = 0.0            # loading object code into an MCJIT engine
    jobs_seconds: float = 0.0    # what forked jobs spent (all their stages), elsewhere
    kernel_sets: int = 0         # build_library / compile_primfuncs calls
    kernels: int = 0             # kernels in those sets
    kernels_compiled: int = 0    # kernels that went through LLVM's pipeline here
    families: int = 0            # of those, families compiled as one body each...
    family_members: int = 0      # ...holding this many kernels
    hand_scheduled_compiled: int = 0  # of those, how many at HAND_SCHEDULED_SPEED_LEVEL
    microkernels_compiled: int = 0  # micro-kernels compiled (not found in the caches)
    jobs: int = 1                # most processes one kernel set was compiled in
    busy_cores: float | None = None  # auto's estimate of cores busy elsewhere (None: not asked)
    memory_hits: int = 0         # kernel sets found in this process's cache...
    renamed_hits: int = 0        # ...under other kernel names (only machine code emitted)
    disk_hits: int = 0           # ...in the persistent disk cache
    misses: int = 0              # compiled by LLVM

    def add(self, other: CompileStats) -> None:
        """Add another record's seconds and counts to this one (jobs, busy_cores: the larger)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "busy_cores":
                known = [v for v in (mine, theirs) if v is not None]
                setattr(self, f.name, max(known) if known else None)
            else:
                setattr(self, f.name, max(mine, theirs) if f.name == "jobs" else mine + theirs)

    def llvm_seconds(self) -> float:
        """Wall time of all stages together (COMPILE_STAGES)."""
        return sum(getattr(self, name) for name in COMPILE_STAGES)


# CompileStats' wall-clock stage fields, in pipeline order
COMPILE_STAGES = ("digest", "cache_lookup", "emit_ir", "parse_verify", "optimise", "jobs_wait",
                  "link", "machine_code", "cache_write", "load")


_RECORD: ContextVar[CompileStats | None] = ContextVar("relayjit_compile_stats", default=None)


@contextlib.contextmanager
def record_compile_stats():
    """Within this block, compilations in this context add their costs to the yielded stats.

    Blocks nest: on exit an inner block's figures are added to the enclosing block's too.
    """
    outer = _RECORD.get()
    stats = CompileStats()
    token = _RECORD.set(stats)
    try:
        yield stats
    finally:
        _RECORD.reset(token)
        if outer is not None:
            outer.add(stats)


def recording() -> CompileStats | None:
    """The stats of the innermost record_compile_stats block in this context (None: none)."""
    return _RECORD.get()


@contextlib.contextmanager
def timed(stage: str):
    """Add the block's wall time to stage `stage` of the stats being recorded, if any."""
    start = time.perf_counter()
    try:
        yield
    finally:
        stats = _RECORD.get()
        if stats is not None:
            setattr(stats, stage, getattr(stats, stage) + time.perf_counter() - start)


def note(**counts: int) -> None:
    """Add counts to the stats being recorded, if any."""
    stats = _RECORD.get()
    if stats is not None:
        for name, n in counts.items():
            setattr(stats, name, getattr(stats, name) + n)
