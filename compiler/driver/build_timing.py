"""Where one relay.build spent its time: BuildTiming (`factory.build_timing`) and its recorders.

relay.build times disjoint stretches of its own run, in order: binding params, each pass of
the pipeline (through a PassTimingInstrument), lowering fused functions to PrimFuncs, the
compile stages codegen.jit reports (digest, cache lookup, LLVM IR emission, parse + verify,
the optimisation pipeline, compile jobs, linking micro-kernels and the signature table in,
machine-code emission, cache write, kernel loading) and graph codegen with memory planning.
With several compile jobs the LLVM stages are the parent's own share; the jobs' note says what
the forked ones spent meanwhile. The stages never overlap, so they add up to at most
the wall time; what no stage covers shows as "other" in the table. The frontend runs before
relay.build: a caller that times it (the `relayjit` command) adds it with
`dataclasses.replace(timing, frontend=seconds)`.

    lib = relay.build(mod, params=params)
    print(lib.build_timing)            # the table
    lib.build_timing.as_dict()         # the same, as plain data
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

from codegen.compile_stats import COMPILE_STAGES, CompileStats
from codegen.optimise import HAND_SCHEDULED_SPEED_LEVEL
from compiler.transform import PassInstrument, PassTimingInstrument

__all__ = ["Stage", "BuildTiming", "TimingRecorder", "PipelineInstrument", "COMPILE_STAGE_NAMES"]

# CompileStats field -> the stage's name in the report
COMPILE_STAGE_NAMES = {
    "digest": "kernel set digest",
    "cache_lookup": "compile cache lookup",
    "emit_ir": "LLVM IR emission",
    "parse_verify": "LLVM IR parse + verify",
    "optimise": "LLVM optimisation pipeline",
    "jobs_wait": "compile jobs: fork + wait",
    "link": "link micro-kernels + table",
    "machine_code": "machine-code emission",
    "cache_write": "compile cache write",
    "load": "kernel loading (MCJIT)",
}
assert tuple(COMPILE_STAGE_NAMES) == COMPILE_STAGES


@dataclass(frozen=True)
class Stage:
    """One timed stretch of a build: its name, seconds, and what it covered."""

    name: str
    seconds: float
    note: str = ""


@dataclass(frozen=True)
class BuildTiming:
    """Seconds per build stage (disjoint, in order), relay.build's wall time, counts.

    counts: fused_functions (distinct primitive functions main calls), reshape_only (those
    that compile to nothing), kernels (in the library), kernels_compiled (by LLVM in this
    build), compile_jobs, cache_memory_hits / cache_renamed_hits / cache_disk_hits /
    cache_misses (the library's kernel set), constant_kernel_sets / constant_kernels_compiled
    (what the passes, FoldConstant mostly, built and ran at compile time).
    """

    stages: tuple[Stage, ...]
    wall: float
    counts: dict[str, int] = field(default_factory=dict)
    frontend: float | None = None

    @property
    def total(self) -> float:
        """Wall time including the frontend when it was recorded."""
        return self.wall + (self.frontend or 0.0)

    @property
    def other(self) -> float:
        """Part of relay.build's wall time no stage covers."""
        return max(0.0, self.wall - sum(s.seconds for s in self.stages))

    def seconds(self, name: str) -> float:
        """Seconds of the stages called `name` (a pass that runs twice counts twice)."""
        return sum(s.seconds for s in self.stages if s.name == name)

    def as_dict(self) -> dict:
        """Plain data (for JSON): stages as dicts, wall, other, total, frontend, counts."""
        return {"stages": [{"name": s.name, "seconds": s.seconds, "note": s.note}
                           for s in self.stages],
                "wall": self.wall, "other": self.other, "frontend": self.frontend,
                "total": self.total, "counts": dict(self.counts)}

    def table(self) -> str:
        """The report: one line per stage with seconds and share of the total, then counts."""
        c = self.counts
        total = self.total or 1e-12
        if c.get("build_cache_hits"):
            head = (f"relay.build timing: loaded from the build cache ({c.get('kernels', 0)} "
                    f"kernels; no pass or compiler ran)")
        else:
            head = (f"relay.build timing: {c.get('kernels', 0)} kernels from "
                    f"{c.get('fused_functions', 0)} fused functions")
        lines = [head, f"{'stage':<36} {'seconds':>9} {'share':>7}  note"]
        rows = list(self.stages) + [Stage("other (untimed)", self.other)]
        if self.frontend is not None:
            rows.insert(0, Stage("frontend (ONNX import)", self.frontend))
        for s in rows:
            lines.append(f"{s.name[:36]:<36} {s.seconds:>9.3f} {100 * s.seconds / total:>6.1f}%"
                         + (f"  {s.note}" if s.note else ""))
        lines.append(f"{'total':<36} {self.total:>9.3f} {100.0:>6.1f}%")
        if c.get("build_cache_hits"):
            return "\n".join(lines)
        lines.append(f"compile cache (kernel set): {c.get('cache_memory_hits', 0)} in memory, "
                     f"{c.get('cache_renamed_hits', 0)} renamed, "
                     f"{c.get('cache_disk_hits', 0)} from disk, {c.get('cache_misses', 0)} "
                     f"compiled ({c.get('kernels_compiled', 0)} kernels by LLVM in "
                     f"{c.get('compile_jobs', 1)} job(s))")
        lines.append(f"constant kernels built by passes: {c.get('constant_kernel_sets', 0)} "
                     f"({c.get('constant_kernels_compiled', 0)} compiled by LLVM)")
        return "\n".join(lines)

    __str__ = table


class TimingRecorder:
    """Collects relay.build's stages as they finish; finish() gives the BuildTiming."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._stages: list[Stage] = []
        self.constant_kernels = CompileStats()  # what the passes compiled (optimize sets it)

    @contextmanager
    def stage(self, name: str, note: str = ""):
        """Time the block as one stage; the block may set the yielded object's `note`."""
        start = time.perf_counter()
        current = SimpleNamespace(note=note)
        try:
            yield current
        finally:
            self._stages.append(Stage(name, time.perf_counter() - start, current.note))

    def add(self, stage: Stage) -> None:
        self._stages.append(stage)

    def add_compile_stats(self, stats: CompileStats) -> None:
        """One stage per compile stage codegen.jit reported."""
        bodies = stats.kernels_compiled - stats.family_members + stats.families
        families = (f", as {bodies} bodies: {stats.family_members} in {stats.families} "
                    f"families" if stats.families else "")
        notes = {"optimise": (f"{stats.kernels_compiled} kernels ("
                              f"{stats.hand_scheduled_compiled} hand-scheduled at "
                              f"O{HAND_SCHEDULED_SPEED_LEVEL}{families}); InstCombine, "
                              f"{stats.microkernels_compiled} micro-kernels"),
                 "jobs_wait": (f"{stats.jobs} jobs, an object each; the forked ones compiled "
                               f"for {stats.jobs_seconds:.3f} s" if stats.jobs > 1
                               else "1 job")
                              + (f" (auto: {stats.busy_cores:.1f} cores busy elsewhere)"
                                 if stats.busy_cores is not None else "")}
        for key in COMPILE_STAGES:
            self.add(Stage(COMPILE_STAGE_NAMES[key], getattr(stats, key), notes.get(key, "")))

    def finish(self, counts: dict[str, int]) -> BuildTiming:
        return BuildTiming(tuple(self._stages), time.perf_counter() - self._start, dict(counts))


class PipelineInstrument(PassInstrument):
    """Times relay.build's passes and announces each pipeline pass as it starts.

    The pipeline is a Sequential (depth 1) of `passes`; what runs at depth 2 is either the
    next of them or a pass it requires (InferType, mostly), which counts towards the pass
    that required it. Passes run inside a pass (FunctionPass's InferType) count within it.
    `compiled` is the CompileStats the passes' own kernel compilations (FoldConstant's) go
    to: each stage notes the LLVM time and kernel sets it spent.
    """

    def __init__(self, passes: list, report: Callable[[str], None] | None = None,
                 compiled: CompileStats | None = None):
        self.timing = PassTimingInstrument()
        self._infos = [p.info for p in passes]
        self._report = report
        self._compiled = compiled
        self._depth = 0
        self._next = 0                 # index of the pipeline pass to run next
        self._owner: list[int] = []    # per depth-2 run: the pipeline pass it counts for
        self._llvm: list[tuple] = []   # per depth-2 run: (LLVM seconds, kernel sets, compiled)
        self._before = (0.0, 0, 0)

    def _snapshot(self) -> tuple[float, int, int]:
        c = self._compiled
        return (c.llvm_seconds(), c.kernel_sets, c.misses) if c is not None else (0.0, 0, 0)

    def run_before_pass(self, mod, info) -> None:
        self.timing.run_before_pass(mod, info)
        self._depth += 1
        if self._depth != 2:
            return
        index = min(self._next, len(self._infos) - 1)
        self._owner.append(index)
        self._before = self._snapshot()
        if self._next < len(self._infos) and info is self._infos[self._next]:
            self._next += 1
            if self._report is not None:
                self._report(f"optimising (pass {self._next}/{len(self._infos)} {info.name})")

    def run_after_pass(self, mod, info) -> None:
        if self._depth == 2:
            after = self._snapshot()
            self._llvm.append(tuple(b - a for a, b in zip(self._before, after)))
        self._depth -= 1
        self.timing.run_after_pass(mod, info)

    def stages(self) -> list[Stage]:
        """One stage per pipeline pass that ran, in order, its required passes included."""
        runs = [p for root in self.timing.profiles() for p in root.children]
        groups: dict[int, list] = {}
        for run, owner, llvm in zip(runs, self._owner, self._llvm):
            groups.setdefault(owner, []).append((run, llvm))
        stages = []
        for owner, members in groups.items():
            name = self._infos[owner].name
            notes = [f"incl. required {run.name} {run.seconds:.3f} s"
                     for run, _ in members if run.name != name]
            seconds, sets, compiled = (sum(x) for x in zip(*(llvm for _, llvm in members)))
            if sets:
                notes.append(f"LLVM {seconds:.3f} s for {sets} constant kernel sets "
                             f"({compiled} compiled)")
            stages.append(Stage(f"pass {name}", sum(run.seconds for run, _ in members),
                                "; ".join(notes)))
        return stages
