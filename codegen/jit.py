"""Compile PrimFuncs to host object code with llvmlite (new pass manager) and load them.

A kernel set compiles to one object file per compile job (codegen.compile_jobs): each job
emits, optimises and machine-codes its share of the kernels (kernels that differ only in an
extent as one family body, codegen.kernel_families), and the first object also holds the
kernels' signature table. The micro-kernels the kernels call are objects of their own,
compiled once per target CPU and kept in the caches beside the kernel sets, so a build that
finds them there emits none; runtime.KernelLibrary loads all the objects into one engine.

Two in-process caches, both keyed by tir.structural's name-free digest: the object files per
(digest, kernel names), and the optimised modules (bitcode, one per object) per digest.
Identical kernels under other names reuse the optimised modules: the exported functions are
renamed and only machine-code emission runs, skipping the O-level pipeline. Behind them sits
the persistent disk cache (codegen.cache): a kernel set compiled by an earlier process loads
its object files from disk and skips LLVM altogether.

Where the time goes: within `with record_compile_stats() as stats:` every compilation in this
thread (or asyncio task) adds its seconds per stage and its cache outcomes to `stats`
(relay.build uses it for its timing report). The hooks are perf_counter calls around the
existing LLVM calls; no state is shared between threads.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import NamedTuple

import llvmlite.binding as llvm
from llvmlite import ir

from runtime.library import KernelLibrary, signature_table_ir
from runtime.target import TargetInfo, current_target, target_machine

from . import cache as disk_cache
from .compile_jobs import (auto_compile_jobs, collect, fork_jobs, measure_busy_cores,
                           note_compile_request, requested_compile_jobs, split_work)
from .errors import CodegenError
from .kernel_families import Family, emit_family, families_enabled, find_families
from .llvm import microkernels
from .llvm.emit import emit_module
from .tir.stmt import PrimFunc
from .tir.structural import kernel_text, structural_digest

# (digest, kernel names) -> object files; digest -> (kernel names, bitcode of each object)
_CACHE: OrderedDict[tuple[str, tuple[str, ...]], tuple[bytes, ...]] = OrderedDict()
_MODULES: OrderedDict[str, tuple[tuple[str, ...], tuple[bytes, ...]]] = OrderedDict()
_CACHE_SIZE = 256
_STATS = {"hits": 0, "renamed": 0, "disk": 0, "misses": 0, "microkernels": 0}
_lock = threading.Lock()


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


@contextlib.contextmanager
def _timed(stage: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        stats = _RECORD.get()
        if stats is not None:
            setattr(stats, stage, getattr(stats, stage) + time.perf_counter() - start)


def _note(**counts: int) -> None:
    stats = _RECORD.get()
    if stats is not None:
        for name, n in counts.items():
            setattr(stats, name, getattr(stats, name) + n)


def _target_machine(opt_level: int) -> llvm.TargetMachine:
    """For the CPU being built for (runtime.target.building_for; the host by default)."""
    return target_machine(current_target(), opt=opt_level)


def structural_key(funcs: list[PrimFunc], opt_level: int) -> str:
    """Digest of the generated code: kernels' structure, shapes, dtypes, attrs, the LLVM
    pipelines and the target CPU; not names."""
    cpu = current_target()
    pipelines = ",".join(sorted({str(tuple(pipeline_for(f, opt_level))) for f in funcs}))
    return structural_digest(funcs, f"opt{opt_level}\0{pipelines}\0{cpu.triple}\0{cpu.cpu}"
                                    f"\0{cpu.features}\0families{int(families_enabled())}")



Unit = PrimFunc | Family  # what one compile unit is: a kernel, or a family of them


def compile_units(funcs: list[PrimFunc]) -> list[Unit]:
    """The kernels as compile units: families where they form (families_enabled)."""
    return find_families(funcs) if families_enabled() else list(funcs)


def _lead(unit: Unit) -> PrimFunc:
    """The kernel whose text stands for the unit (a family's members share their pipeline
    and the micro-kernels they call)."""
    return unit.members[0] if isinstance(unit, Family) else unit


def _emit_units(units: list[Unit]) -> ir.Module:
    """One LLVM module: each kernel, and each family's body with its members' wrappers."""
    module = emit_module([u for u in units if isinstance(u, PrimFunc)])
    for unit in units:
        if isinstance(unit, Family):
            emit_family(module, unit)
    return module


def _optimised_module(funcs: list[PrimFunc], opt_level: int) -> tuple[llvm.ModuleRef,
                                                                       llvm.TargetMachine]:
    """The kernels optimised at opt_level in one module, with the micro-kernels they call
    linked in (what get_llvm_ir and get_assembly show)."""
    with _timed("digest"):
        names = microkernels_called(funcs)
        units = compile_units(funcs)
    mod, tm = _optimised_kernels(units, opt_level)
    _keep_microkernels(_link_microkernels(mod, tm, names))
    return mod, tm


class Share(NamedTuple):
    """What one compile job turns into one object file: kernels (and kernel families), and
    the micro-kernels they call (compiled by the same job when no cache has them)."""

    units: list[Unit]
    microkernels: list[str]

    def kernels(self) -> list[PrimFunc]:
        """The kernels the share's object defines (a family's members one by one)."""
        return [f for u in self.units
                for f in (u.members if isinstance(u, Family) else (u,))]


def _compile_share(share: Share, table: list[PrimFunc] | None, opt_level: int
                   ) -> tuple[bytes, bytes, dict[str, Microkernel]]:
    """One object file: the share's kernels optimised (their calls checked against the
    micro-kernels they call) and the signature table of the kernels `table` when given:
    (object code, the optimised bitcode it was emitted from, the micro-kernels compiled here,
    found in no cache)."""
    mod, tm = _optimised_kernels(share.units, opt_level)
    compiled: dict[str, Microkernel] = {}
    _check_calls(mod, _microkernels(share.microkernels, tm, compiled))
    if table is not None:
        with _timed("link"):
            mod.link_in(_signature_table(table, tm))
    with _timed("cache_write"):
        bitcode = mod.as_bitcode()
    with _timed("machine_code"):
        obj = tm.emit_object(mod)
    return obj, bitcode, compiled


class Pipeline(NamedTuple):
    """LLVM's O-level pipeline as a kernel gets it (loop unrolling always off)."""

    speed_level: int
    loop_vectorization: bool = True
    slp_vectorization: bool = True


# Kernels that call micro-kernels are hand-scheduled: their hot loops are the micro-kernels
# (compiled on their own, above); what the pipeline sees is loop control, packing, padding and
# epilogue loops. O1 with the vectorisers runs them as fast as O3 (one thread, CPU time,
# same-process A/B: ResNet-50 x0.99-1.00, DenseNet-121 x0.99-1.00) for a fifth less LLVM time.
# Without the vectorisers they run 4-21% slower (their padding and epilogue loops).
HAND_SCHEDULED_SPEED_LEVEL = 1


def pipeline_for(func: PrimFunc, opt_level: int) -> Pipeline:
    """The pipeline kernel `func` is optimised with at opt_level."""
    if _MICROKERNEL_CALL.search(kernel_text(func)):
        return Pipeline(min(opt_level, HAND_SCHEDULED_SPEED_LEVEL))
    return Pipeline(opt_level)


def _optimised_kernels(units: list[Unit], opt_level: int) -> tuple[llvm.ModuleRef,
                                                                     llvm.TargetMachine]:
    """The kernels alone optimised at opt_level (the micro-kernels they call only declared):
    one module per pipeline (pipeline_for), linked into one."""
    tm = _target_machine(opt_level)
    groups: dict[Pipeline, list[Unit]] = {}
    for unit in units:
        groups.setdefault(pipeline_for(_lead(unit), opt_level), []).append(unit)
    if not groups:  # no kernels (a graph of reshapes and constants): one empty module
        groups[Pipeline(opt_level)] = []
    mods = [_optimised_group(group, tm, pipeline) for pipeline, group in groups.items()]
    with _timed("link"):
        for other in mods[1:]:
            mods[0].link_in(other)
    return mods[0], tm


def _optimised_group(units: list[Unit], tm: llvm.TargetMachine,
                     pipeline: Pipeline) -> llvm.ModuleRef:
    """The kernels in one module, through `pipeline`."""
    with _timed("emit_ir"):
        ir_module = _emit_units(units)
        ir_module.triple = tm.triple
        ir_module.data_layout = str(tm.target_data)
        text = str(ir_module)
    try:
        with _timed("parse_verify"):
            mod = llvm.parse_assembly(text)
            mod.verify()
    except RuntimeError as err:
        names = [u.name for u in units]
        raise CodegenError(f"LLVM rejected the IR for kernels {names}: {err}") from None
    if pipeline.speed_level > 0:
        with _timed("optimise"):
            pto = llvm.create_pipeline_tuning_options(speed_level=pipeline.speed_level)
            pto.loop_vectorization = pipeline.loop_vectorization
            pto.slp_vectorization = pipeline.slp_vectorization
            # full unrolling of static-trip loops after vectorisation made 10x larger code
            # and 10x slower compiles for little speed (schedules unroll by hand where it pays)
            pto.loop_unrolling = False
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
    return mod


# ---- micro-kernels: compiled once per target CPU into objects of their own, loaded beside the
# kernel objects that call them (so a build finding them in the disk cache emits none)

_MICROKERNEL_CALL = re.compile(r"call (relayjit\.ukr\.\S+) ")


class Microkernel(NamedTuple):
    """A compiled micro-kernel: its object file, the optimised bitcode it was emitted from
    (what get_llvm_ir links in) and its LLVM function type (what every call must match)."""

    object: bytes
    bitcode: bytes
    signature: str


_MICROKERNELS: OrderedDict[tuple[str, TargetInfo], Microkernel] = OrderedDict()
# Disk cache key of a micro-kernel (the cache adds the target CPU, LLVM and codegen versions).
_MICROKERNEL_KEY = "microkernel\0{name}\0object"


def microkernels_called(funcs: list[PrimFunc]) -> list[str]:
    """Names of the micro-kernels (codegen.llvm.microkernels) the kernels call, in order."""
    names: dict[str, None] = {}
    for f in funcs:
        names.update(dict.fromkeys(_MICROKERNEL_CALL.findall(kernel_text(f))))
    return list(names)


def _cached_microkernel(name: str) -> Microkernel | None:
    """Micro-kernel `name` for the current target from memory or disk."""
    key = (name, current_target())
    with _lock:
        found = _MICROKERNELS.get(key)
    if found is None:
        with _timed("cache_lookup"):
            entry = disk_cache.lookup(_MICROKERNEL_KEY.format(name=name))
        if entry is not None and len(entry.names) == 2 and entry.names[0] == name \
                and len(entry.objects) == 1 and len(entry.bitcodes) == 1:
            found = Microkernel(entry.objects[0], entry.bitcodes[0], entry.names[1])
            with _lock:
                _remember(_MICROKERNELS, key, found)
    return found


def _compile_microkernel(name: str, tm: llvm.TargetMachine) -> Microkernel:
    """Micro-kernel `name` compiled in a module of its own, with external linkage.

    The micro-kernels come out of codegen.llvm.microkernels unrolled, vectorised and in SSA
    form: on ResNet-50's 24 conv micro-kernels the O3 pipeline gave the same instructions as
    InstCombine alone (one spill slot fewer) for 10x its time, so InstCombine is all they get.
    """
    with _timed("emit_ir"):
        module = ir.Module(name=name)
        fn = microkernels.define(module, name)
        if fn is None:
            raise CodegenError(f"unknown micro-kernel {name}")
        fn.linkage = ""  # external: the kernel objects' calls resolve to it when loaded
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        text = str(module)
    with _timed("parse_verify"):
        mod = llvm.parse_assembly(text)
        mod.verify()
    with _timed("optimise"):
        passes = llvm.create_new_module_pass_manager()
        passes.add_instruction_combine_pass()
        passes.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(1)))
    with _timed("cache_write"):
        bitcode = mod.as_bitcode()
    with _timed("machine_code"):
        obj = tm.emit_object(mod)
    return Microkernel(obj, bitcode, str(mod.get_function(name).global_value_type))


def _keep_microkernels(compiled: dict[str, Microkernel]) -> None:
    """Cache freshly compiled micro-kernels in memory and on disk."""
    with _timed("cache_write"):
        for name, kernel in compiled.items():
            with _lock:
                _remember(_MICROKERNELS, (name, current_target()), kernel)
            disk_cache.store(_MICROKERNEL_KEY.format(name=name),
                             disk_cache.Entry((name, kernel.signature), (kernel.object,),
                                              (kernel.bitcode,)))
    _count("microkernels", len(compiled))
    _note(microkernels_compiled=len(compiled))


def _microkernels(names: list[str], tm: llvm.TargetMachine, compiled: dict[str, Microkernel]
                  ) -> dict[str, Microkernel]:
    """The micro-kernels `names`, from the caches or `compiled`, else compiled now (and added
    to `compiled`, for _keep_microkernels)."""
    found = {}
    for name in names:
        kernel = compiled.get(name) or _cached_microkernel(name)
        if kernel is None:
            kernel = compiled[name] = _compile_microkernel(name, tm)
        found[name] = kernel
    return found


def _check_calls(mod: llvm.ModuleRef, kernels: dict[str, Microkernel]) -> None:
    """Each micro-kernel mod declares is called as it is defined."""
    with _timed("link"):
        for name, kernel in kernels.items():
            try:
                declared = str(mod.get_function(name).global_value_type)
            except NameError:  # the optimiser removed every call
                continue
            if declared != kernel.signature:
                raise CodegenError(f"micro-kernel {name} is called as {declared} but defined "
                                   f"as {kernel.signature}")


def _link_microkernels(mod: llvm.ModuleRef, tm: llvm.TargetMachine, names: list[str]
                       ) -> dict[str, Microkernel]:
    """Link the micro-kernels mod calls into it as internal functions (what get_llvm_ir and
    get_assembly show); returns those compiled now (for _keep_microkernels)."""
    compiled: dict[str, Microkernel] = {}
    kernels = _microkernels(names, tm, compiled)
    _check_calls(mod, kernels)
    with _timed("link"):
        for name, kernel in kernels.items():
            try:
                mod.get_function(name)
            except NameError:
                continue
            mod.link_in(llvm.parse_bitcode(kernel.bitcode))
            mod.get_function(name).linkage = llvm.Linkage.internal
    return compiled


def _compile_objects(funcs: list[PrimFunc], opt_level: int, jobs: int | None
                     ) -> list[tuple[bytes, bytes]]:
    """The kernels compiled to object files, [(object code, bitcode)], the first with the
    signature table: one object, or one per compile job (jobs None: $RELAYJIT_COMPILE_JOBS,
    else auto_compile_jobs, asked only when the set has kernels enough to split).

    Job k compiles share k (_shares) to its own object, machine code included, so
    every LLVM stage runs in parallel. The parent does the first share itself; each forked
    child sends back its object, bitcode and the micro-kernels it compiled (after the
    seconds it spent, for CompileStats.jobs_seconds). A child that fails in any way is redone
    in the parent: same result, only slower. The micro-kernels' objects are not among these
    (compile_primfuncs adds them).
    """
    stats = _RECORD.get()
    if len(funcs) >= 2 * PARALLEL_MIN_KERNELS and opt_level > 0 and hasattr(os, "fork"):
        if jobs is None:
            jobs = requested_compile_jobs()
        if jobs is None:  # auto
            busy = measure_busy_cores()
            jobs = auto_compile_jobs(busy=busy)
            if stats is not None:
                stats.add(CompileStats(busy_cores=busy))
        jobs = min(jobs, len(funcs) // PARALLEL_MIN_KERNELS)
    else:
        jobs = 1
    with _timed("digest"):
        units = compile_units(funcs)
        shares = _shares(units, jobs)
    families = [u for u in units if isinstance(u, Family)]
    _note(families=len(families), family_members=sum(len(f.members) for f in families))
    if stats is not None:
        stats.jobs = max(stats.jobs, len(shares))
    with _timed("jobs_wait"):
        children = fork_jobs(_compile_forked, [(share, opt_level) for share in shares[1:]])
    try:
        obj, bitcode, compiled = _compile_share(shares[0], funcs, opt_level)
    finally:
        with _timed("jobs_wait"):
            replies = [collect(child) for child in children]
    objects = [(obj, bitcode)]
    for child, (blobs, seconds) in zip(children, replies):
        if blobs is not None and len(blobs) >= 2 and (len(blobs) - 2) % 4 == 0:
            _note(jobs_seconds=seconds)
            objects.append((blobs[0], blobs[1]))
            compiled.update((blobs[i].decode(), Microkernel(blobs[i + 1], blobs[i + 2],
                                                            blobs[i + 3].decode()))
                            for i in range(2, len(blobs), 4))
        else:  # the child failed: redo its share here
            share, _ = child.share
            obj, bitcode, more = _compile_share(share, None, opt_level)
            objects.append((obj, bitcode))
            compiled.update(more)
    _keep_microkernels(compiled)
    return objects


def _compile_forked(work: tuple[Share, int]) -> tuple[float, list[bytes]]:
    """A forked job's share: (seconds spent, [object, bitcode, then each micro-kernel it
    compiled as name, object, bitcode, signature])."""
    share, opt_level = work
    with record_compile_stats() as spent:
        obj, bitcode, compiled = _compile_share(share, None, opt_level)
    blobs = [obj, bitcode]
    for name, kernel in compiled.items():
        blobs += [name.encode(), kernel.object, kernel.bitcode, kernel.signature.encode()]
    return spent.llvm_seconds(), blobs


PARALLEL_MIN_KERNELS = 8  # fewer kernels per process than this: not worth a fork
# Estimated LLVM cost of a kernel in characters of its kernel_text: a fixed part plus its
# text, about 4 us a character on the Zen 4 VM (ResNet-50/DenseNet-121: 70 ms for a pooling
# kernel of 5k characters, 180 ms for a Winograd conv of 31k); a micro-kernel about 10k.
_KERNEL_COST, _MICROKERNEL_COST = 12_000, 10_000
_MEMBER_COST = 500  # a family member's wrapper


def _shares(units: list[Unit], jobs: int) -> list[Share]:
    """The compile units in at most `jobs` shares of about equal estimated cost (split_work),
    each in library order; units that call a common micro-kernel share a share, so every
    micro-kernel is compiled and emitted once."""
    texts = [kernel_text(_lead(u)) for u in units]
    calls = [list(dict.fromkeys(_MICROKERNEL_CALL.findall(text))) for text in texts]
    if jobs < 2:
        return [Share(list(units), list(dict.fromkeys(n for names in calls for n in names)))]
    costs = [_KERNEL_COST + len(text) + _MEMBER_COST * len(getattr(u, "members", ()))
             for u, text in zip(units, texts)]
    return [Share([units[k] for k in share],
                  list(dict.fromkeys(n for k in share for n in calls[k])))
            for share in split_work(costs, calls, _MICROKERNEL_COST, jobs)]


def compile_primfuncs(funcs: list[PrimFunc], opt_level: int = 3,
                      jobs: int | None = None) -> tuple[bytes, ...]:
    """Object files holding all kernels, the first with their signature table (cached by
    structural key): one per compile job, then one per micro-kernel they call.

    jobs: processes to compile in on a miss (default: $RELAYJIT_COMPILE_JOBS, else auto).
    """
    with _timed("digest"):
        key = structural_key(funcs, opt_level)
    names = tuple(f.name for f in funcs)
    _note(kernel_sets=1, kernels=len(funcs))
    with _lock:
        objects = _CACHE.get((key, names))
        if objects is not None:
            _CACHE.move_to_end((key, names))
            _STATS["hits"] += 1
        known = _MODULES.get(key)
    if objects is not None:
        _note(memory_hits=1)
        return objects
    objects = _renamed_objects(known, names, opt_level) if known is not None else None
    if objects is not None:
        _count("renamed")
        _note(renamed_hits=1)
    else:
        objects = _from_disk(key, names, opt_level)
    if objects is None:
        _count("misses")
        _note(misses=1, kernels_compiled=len(funcs),
              hand_scheduled_compiled=sum(pipeline_for(f, opt_level).speed_level < opt_level
                                          for f in funcs))
        compiled = _compile_objects(funcs, opt_level, jobs)
        objects = tuple(obj for obj, _ in compiled)
        bitcodes = tuple(bitcode for _, bitcode in compiled)
        with _timed("cache_write"):
            with _lock:
                _remember(_MODULES, key, (names, bitcodes))
            disk_cache.store(key, disk_cache.Entry(names, objects, bitcodes))
    compiled: dict[str, Microkernel] = {}
    kernels = _microkernels(microkernels_called(funcs), _target_machine(opt_level), compiled)
    _keep_microkernels(compiled)
    objects += tuple(kernel.object for kernel in kernels.values())
    with _lock:
        _remember(_CACHE, (key, names), objects)
    return objects


def _signature_table(funcs: list[PrimFunc], tm: llvm.TargetMachine) -> llvm.ModuleRef:
    """A module defining the kernels' signature table (runtime.library.SIGNATURE_SYMBOL), in
    kernel order (by position, so a cached module renamed for other kernels keeps a valid
    table). It travels inside the object code, so a module file's graph is checked against
    what its machine code was built for, not against another editable section."""
    mod = llvm.parse_assembly(signature_table_ir(
        (tuple((b.shape, b.dtype) for b in f.params) for f in funcs),
        (dict(f.attrs.get("in_place", ())) for f in funcs)))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return mod


def _from_disk(key: str, names: tuple[str, ...], opt_level: int) -> tuple[bytes, ...] | None:
    """Object files for this kernel set from the persistent cache (None on a miss)."""
    with _timed("cache_lookup"):
        entry = disk_cache.lookup(key)
    if entry is None or not entry.objects or len(entry.bitcodes) != len(entry.objects) \
            or len(entry.names) != len(names):
        return None
    if entry.names == names:
        objects = entry.objects
    else:
        try:
            objects = _renamed_objects((entry.names, entry.bitcodes), names, opt_level)
        except (RuntimeError, ValueError, NameError):  # unreadable bitcode: recompile
            objects = None
        if objects is None:
            return None
    _count("disk")
    _note(disk_hits=1)
    with _lock:
        _remember(_MODULES, key, (entry.names, entry.bitcodes))
    return objects


def _count(what: str, n: int = 1) -> None:
    with _lock:
        _STATS[what] += n


def _renamed_objects(known: tuple[tuple[str, ...], tuple[bytes, ...]],
                     names: tuple[str, ...], opt_level: int) -> tuple[bytes, ...] | None:
    """Object files of cached optimised modules with their kernels renamed, position for
    position (None if a name clashes or a kernel is missing)."""
    old_names, bitcodes = known
    position = {name: k for k, name in enumerate(old_names)}
    objects, renamed = [], 0
    with _timed("machine_code"):
        for bitcode in bitcodes:
            mod = llvm.parse_bitcode(bitcode)
            fns = [(position[fn.name], fn) for fn in mod.functions
                   if not fn.is_declaration and fn.name in position]
            for k, fn in fns:  # via temporary names, so swapped names cannot collide
                fn.name = f"relayjit.rename.{k}"
            for k, fn in fns:
                fn.name = names[k]
                if fn.name != names[k]:  # LLVM renamed on a clash with another global
                    return None
            renamed += len(fns)
            objects.append(_target_machine(opt_level).emit_object(mod))
    return tuple(objects) if renamed == len(names) else None


def _remember(cache: OrderedDict, key, value) -> None:
    cache[key] = value
    while len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


def cache_stats() -> dict[str, int]:
    """Counts of exact hits, hits under other kernel names (renamed), kernel sets loaded from
    the disk cache (disk), misses (compiled by LLVM) and micro-kernels compiled (not found in
    memory or on disk); disk_cache_stats has the disk side."""
    with _lock:
        return dict(_STATS)


def build_library(funcs: list[PrimFunc], opt_level: int = 3) -> KernelLibrary:
    """Compile and load the kernels: a runtime.KernelLibrary with one function per PrimFunc."""
    requested_compile_jobs()  # checked on every build, so a bad value fails cached builds too
    note_compile_request()  # opens the window auto_compile_jobs measures busy cores over
    objects = compile_primfuncs(funcs, opt_level)
    with _timed("load"):
        return KernelLibrary(objects, [f.name for f in funcs], target=current_target())


def get_llvm_ir(funcs: list[PrimFunc], optimized: bool = True, opt_level: int = 3) -> str:
    """LLVM IR text of the kernels, after the O-level pipeline when optimized (then with the
    micro-kernels they call linked in; unoptimised, those are only declared)."""
    if not optimized:
        return str(_emit_units(compile_units(funcs)))
    mod, _ = _optimised_module(funcs, opt_level)
    return str(mod)


def get_assembly(funcs: list[PrimFunc], opt_level: int = 3) -> str:
    """Host assembly of the kernels (from a module no execution engine owns)."""
    mod, tm = _optimised_module(funcs, opt_level)
    return tm.emit_assembly(mod)


def clear_cache() -> None:
    """Forget compiled objects (tests, benchmarks of compile time)."""
    with _lock:
        _CACHE.clear()
        _MODULES.clear()
        _MICROKERNELS.clear()


def build_te(inputs: list, outputs: list, name: str = "kernel", opt_level: int = 3):
    """Lower + compile tensor expressions; returns f(*numpy inputs) -> list of numpy outputs.

    The small JIT fixture for tests and for checking compute rules against numpy.
    """
    import numpy as np

    from .lower import lower

    func = lower(name, inputs, outputs)
    lib = build_library([func], opt_level)
    kernel = lib[name]
    n_in = len(inputs)

    def run(*arrays):
        if len(arrays) != n_in:
            raise CodegenError(f"kernel {name}: expected {n_in} inputs, got {len(arrays)}")
        ins = []
        for t, a in zip(inputs, arrays):
            a = np.require(np.asarray(a, dtype=t.dtype), requirements="CW")
            if a.shape != t.shape:
                raise CodegenError(f"kernel {name}: input {t.name} expects shape {t.shape}, "
                                   f"got {a.shape}")
            ins.append(a)
        outs = [np.empty(b.shape, dtype=b.dtype) for b in func.params[n_in:]]
        kernel(*ins, *outs)
        return outs

    run.primfunc = func
    run.library = lib
    return run
