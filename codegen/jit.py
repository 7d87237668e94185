"""Compile PrimFuncs to host object code with llvmlite (new pass manager) and load them.

Two in-process caches, both keyed by tir.structural's name-free digest: object code per
(digest, kernel names), and the optimised module per digest. Identical kernels under other
names reuse the optimised module: the exported functions are renamed and only machine-code
emission runs, skipping the O-level pipeline. Behind them sits the persistent disk cache
(codegen.cache): a kernel set compiled by an earlier process loads its object code from
disk and skips LLVM altogether.

Where the time goes: within `with record_compile_stats() as stats:` every compilation in this
thread (or asyncio task) adds its seconds per stage and its cache outcomes to `stats`
(relay.build uses it for its timing report). The hooks are perf_counter calls around the
existing LLVM calls; no state is shared between threads.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import struct
import threading
import time
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, fields

import llvmlite.binding as llvm
from llvmlite import ir

from runtime.library import KernelLibrary, signature_table_ir
from runtime.target import TargetInfo, current_target, target_machine
from runtime.thread_config import available_cores

from . import cache as disk_cache
from .errors import CodegenError
from .llvm import microkernels
from .llvm.emit import emit_module
from .tir.stmt import PrimFunc
from .tir.structural import kernel_text, structural_digest

_CACHE: OrderedDict[tuple[str, tuple[str, ...]], bytes] = OrderedDict()
_MODULES: OrderedDict[str, tuple[tuple[str, ...], bytes]] = OrderedDict()  # digest -> bitcode
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
    jobs_wait: float = 0.0       # forking compile jobs, then waiting for their bitcode
    link: float = 0.0            # reading the jobs' bitcode, linking it into one module
    machine_code: float = 0.0    # emit_object (also for cached modules under new names)
    cache_write: float = 0.0     # bitcode for the caches + the disk cache write
    load: float = 0.0            # loading object code into an MCJIT engine
    jobs_seconds: float = 0.0    # what forked jobs spent (emit + parse + optimise), elsewhere
    kernel_sets: int = 0         # build_library / compile_primfuncs calls
    kernels: int = 0             # kernels in those sets
    kernels_compiled: int = 0    # kernels that went through LLVM's pipeline here
    microkernels_compiled: int = 0  # micro-kernels compiled (not found in the caches)
    jobs: int = 1                # most processes one kernel set was compiled in
    memory_hits: int = 0         # kernel sets found in this process's cache...
    renamed_hits: int = 0        # ...under other kernel names (only machine code emitted)
    disk_hits: int = 0           # ...in the persistent disk cache
    misses: int = 0              # compiled by LLVM

    def add(self, other: CompileStats) -> None:
        """Add another record's seconds and counts to this one (jobs: the larger)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
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
    """Digest of the generated code: kernels' structure, shapes, dtypes, attrs and the target
    CPU; not names."""
    cpu = current_target()
    return structural_digest(funcs, f"opt{opt_level}\0{cpu.triple}\0{cpu.cpu}\0{cpu.features}")


def _optimised_module(funcs: list[PrimFunc], opt_level: int, jobs: int = 1
                      ) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """The kernels optimised at opt_level, with the micro-kernels they call linked in; with
    jobs > 1 the work is shared out to forked processes (_in_parallel)."""
    with _timed("digest"):  # the same kernel text the structural key reads
        names = microkernels_called(funcs)
    missing = [name for name in names if _cached_microkernel(name) is None]
    jobs = min(jobs, len(funcs) // PARALLEL_MIN_KERNELS)
    if jobs < 2 or not hasattr(os, "fork") or opt_level == 0:
        mod, tm, bitcodes = _compile_unit(funcs, missing, opt_level)
        compiled = dict(zip(missing, bitcodes))
    else:
        mod, tm, compiled = _in_parallel(funcs, missing, opt_level, jobs)
    for name, bitcode in compiled.items():
        _remember_microkernel(name, bitcode)
    _count("microkernels", len(compiled))
    _note(microkernels_compiled=len(compiled))
    _link_microkernels(mod, tm, names, compiled)
    return mod, tm


def _compile_unit(funcs: list[PrimFunc], microkernel_names: list[str], opt_level: int
                  ) -> tuple[llvm.ModuleRef, llvm.TargetMachine, list[bytes]]:
    """One share of the work: the kernels optimised (micro-kernels declared only), and the
    named micro-kernels' optimised bitcode."""
    mod, tm = _optimised_kernels(funcs, opt_level)
    return mod, tm, [_compile_microkernel(name, tm) for name in microkernel_names]


def _optimised_kernels(funcs: list[PrimFunc], opt_level: int) -> tuple[llvm.ModuleRef,
                                                                         llvm.TargetMachine]:
    """The kernels alone optimised at opt_level (the micro-kernels they call only declared)."""
    tm = _target_machine(opt_level)
    with _timed("emit_ir"):
        ir_module = emit_module(list(funcs))
        ir_module.triple = tm.triple
        ir_module.data_layout = str(tm.target_data)
        text = str(ir_module)
    try:
        with _timed("parse_verify"):
            mod = llvm.parse_assembly(text)
            mod.verify()
    except RuntimeError as err:
        names = [f.name for f in funcs]
        raise CodegenError(f"LLVM rejected the IR for kernels {names}: {err}") from None
    if opt_level > 0:
        with _timed("optimise"):
            pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            # full unrolling of static-trip loops after vectorisation made 10x larger code
            # and 10x slower compiles for little speed (schedules unroll by hand where it pays)
            pto.loop_unrolling = False
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
    return mod, tm


# ---- micro-kernels: compiled once per target CPU, linked into the kernel modules calling them

_MICROKERNEL_CALL = re.compile(r"call (relayjit\.ukr\.\S+) ")
_MICROKERNELS: OrderedDict[tuple[str, TargetInfo], bytes] = OrderedDict()  # -> bitcode
# Disk cache key of a micro-kernel (the cache adds the target CPU, LLVM and codegen versions).
_MICROKERNEL_KEY = "microkernel\0{name}\0instcombine"


def microkernels_called(funcs: list[PrimFunc]) -> list[str]:
    """Names of the micro-kernels (codegen.llvm.microkernels) the kernels call, in order."""
    names: dict[str, None] = {}
    for f in funcs:
        names.update(dict.fromkeys(_MICROKERNEL_CALL.findall(kernel_text(f))))
    return list(names)


def _cached_microkernel(name: str) -> bytes | None:
    """Optimised bitcode of a micro-kernel for the current target from memory or disk."""
    key = (name, current_target())
    with _lock:
        bitcode = _MICROKERNELS.get(key)
    if bitcode is None:
        with _timed("cache_lookup"):
            entry = disk_cache.lookup(_MICROKERNEL_KEY.format(name=name))
        if entry is not None:
            bitcode = entry.bitcode
            with _lock:
                _remember(_MICROKERNELS, key, bitcode)
    return bitcode


def _compile_microkernel(name: str, tm: llvm.TargetMachine) -> bytes:
    """Optimised bitcode of micro-kernel `name` in a module of its own.

    The micro-kernels come out of codegen.llvm.microkernels unrolled, vectorised and in SSA
    form: on ResNet-50's 24 conv micro-kernels the O3 pipeline gave the same instructions as
    InstCombine alone (one spill slot fewer) for 10x its time, so InstCombine is all they get.
    """
    with _timed("emit_ir"):
        module = ir.Module(name=name)
        fn = microkernels.define(module, name)
        if fn is None:
            raise CodegenError(f"unknown micro-kernel {name}")
        fn.linkage = ""  # external: kept on its own, resolved by the kernel module's declaration
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
        return mod.as_bitcode()


def _remember_microkernel(name: str, bitcode: bytes) -> None:
    with _timed("cache_write"):
        with _lock:
            _remember(_MICROKERNELS, (name, current_target()), bitcode)
        disk_cache.store(_MICROKERNEL_KEY.format(name=name),
                         disk_cache.Entry((name,), b"", bitcode))


def _link_microkernels(mod: llvm.ModuleRef, tm: llvm.TargetMachine, names: list[str],
                       compiled: dict[str, bytes]) -> None:
    """Link each micro-kernel mod still declares (from `compiled`, else the caches) into it,
    as an internal function, after checking the declaration matches the definition."""
    with _timed("link"):
        for name in names:
            try:
                declared = mod.get_function(name)
            except NameError:  # the optimiser removed every call
                continue
            bitcode = compiled.get(name) or _cached_microkernel(name)
            if bitcode is None:  # dropped from the cache meanwhile
                bitcode = compiled[name] = _compile_microkernel(name, tm)
            definition = llvm.parse_bitcode(bitcode)
            got = str(definition.get_function(name).global_value_type)
            if got != str(declared.global_value_type):
                raise CodegenError(f"micro-kernel {name} is called as "
                                   f"{declared.global_value_type} but defined as {got}")
            mod.link_in(definition)
            mod.get_function(name).linkage = llvm.Linkage.internal


JOBS_ENV = "RELAYJIT_COMPILE_JOBS"


def compile_jobs() -> int:
    """Processes that optimise one kernel set: $RELAYJIT_COMPILE_JOBS, a count or "auto".

    Why auto by default: LLVM (IR emission, the O3 pipeline, machine code) is most of a cold
    build and the kernels optimise independently. Cold ResNet-50 builds (opt_level 3, no
    disk cache, 2-core VM): with the machine otherwise idle (load average 0.3-0.65), one job
    took 4.7-4.8 s and two jobs 3.95-4.1 s; while another process kept about one core busy
    (load 1.1-1.4), two jobs took 5.2-5.3 s against 4.6-4.7 s for one. Extra jobs pay only
    on idle cores, which auto_compile_jobs estimates. Why jobs gave little even when forced:
    machine-code emission (about a third of the LLVM time) stays in the parent, which links
    one object; forked jobs compete with other work for the same two cores; and each job
    used to emit and optimise its own copy of every micro-kernel its kernels called (now
    each is compiled once, by one job, then cached per target CPU). Anything but "auto" or
    a whole number >= 1 is a ValueError naming the variable, so a typo does not silently
    change the plan.
    """
    value = os.environ.get(JOBS_ENV, "").strip()
    if value == "" or value.lower() == "auto":
        return auto_compile_jobs()
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise ValueError(f"environment variable {JOBS_ENV} must be 'auto' or a whole number of "
                         f"compile processes >= 1, got {value!r}")
    return jobs


def auto_compile_jobs(cores: int | None = None, load: float | None = None,
                      own: float | None = None) -> int:
    """One job per core this process may run on, less the cores other work keeps busy; >= 1.

    Other work is the 1-minute load average (`load`) less this process's own part of it
    (`own`, by default estimated from its CPU time and its reaped children's: a process
    busy for the last t seconds adds 1 - exp(-t/60) to the average). Without that, a script
    that builds several models in a row would see its own load and stop parallelising on
    an idle machine. The estimate takes past CPU time as recent, so a long-lived process
    that was busy long ago may count one busy core too few.
    """
    if cores is None:
        cores = available_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this platform
            load = 0.0
    if own is None:
        t = os.times()
        own = 1.0 - math.exp(-(t.user + t.system + t.children_user + t.children_system) / 60.0)
    busy = round(max(0.0, load - own))
    return max(1, cores - busy)


def _in_parallel(funcs: list[PrimFunc], microkernel_names: list[str], opt_level: int,
                 jobs: int) -> tuple[llvm.ModuleRef, llvm.TargetMachine, dict[str, bytes]]:
    """_compile_unit's work split over `jobs` processes: (kernel module, target machine,
    {micro-kernel name: bitcode}).

    llvmlite serialises every LLVM call behind one process-wide lock, so threads cannot
    overlap LLVM work; forked children can. Job k takes every jobs-th kernel and every
    jobs-th micro-kernel still to compile, so each micro-kernel is compiled once, whichever
    kernels call it. The parent does the first share itself; each child returns its share's
    optimised bitcode through a pipe (after the seconds it spent, for
    CompileStats.jobs_seconds) and the parent links the kernel modules into one (kernel
    helpers are internal, so nothing clashes). A child that fails in any way is redone in
    the parent: same result, only slower.
    """
    stats = _RECORD.get()
    if stats is not None:
        stats.jobs = max(stats.jobs, jobs)
    shares = [(funcs[k::jobs], microkernel_names[k::jobs]) for k in range(jobs)]
    with _timed("jobs_wait"):
        children = _fork_jobs(shares[1:], opt_level)
    try:
        mod, tm, bitcodes = _compile_unit(*shares[0], opt_level)
    finally:
        with _timed("jobs_wait"):
            parts = [_collect(pid, fd) for pid, fd, _ in children]
    compiled = dict(zip(shares[0][1], bitcodes))
    for (_, _, (share, names)), (blobs, seconds) in zip(children, parts):
        if blobs is not None and len(blobs) == 1 + len(names):
            _note(jobs_seconds=seconds)
            with _timed("link"):
                other = llvm.parse_bitcode(blobs[0])
            bitcodes = blobs[1:]
        else:  # the child failed: redo its share here
            other, _, bitcodes = _compile_unit(share, names, opt_level)
        compiled.update(zip(names, bitcodes))
        with _timed("link"):
            mod.link_in(other)
    return mod, tm, compiled


def _fork_jobs(shares: list[tuple], opt_level: int) -> list:
    """One forked child per share, compiling it: [(pid, read fd, share)], (None, None, share)
    where no pipe could be made."""
    children = []
    ffi_lock = getattr(getattr(llvm.ffi, "lib", None), "_lock", None)
    for share in shares:
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            children.append((None, None, share))
            continue
        # no other thread may be inside LLVM while we fork (the child would inherit its lock)
        with ffi_lock if ffi_lock is not None else _nolock():
            pid = os.fork()
        if pid == 0:  # child: compile the share, send seconds + bitcodes, never return
            status = 1
            try:
                os.close(read_fd)
                with record_compile_stats() as spent:
                    mod, _, bitcodes = _compile_unit(*share, opt_level)
                    blobs = [mod.as_bitcode(), *bitcodes]
                with os.fdopen(write_fd, "wb") as out:
                    out.write(_SECONDS.pack(spent.llvm_seconds()))
                    for blob in blobs:
                        out.write(_LENGTH.pack(len(blob)))
                        out.write(blob)
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        children.append((pid, read_fd, share))
    return children


PARALLEL_MIN_KERNELS = 8  # fewer kernels per process than this: not worth a fork


# a child's message: seconds spent, then each bitcode blob after its length
_SECONDS = struct.Struct("<d")
_LENGTH = struct.Struct("<Q")


def _collect(pid: int | None, fd: int | None) -> tuple[list[bytes] | None, float]:
    """(bitcode blobs, seconds) a child sent (blobs None if it failed); reaps the child."""
    if pid is None:
        return None, 0.0
    chunks = []
    try:
        with os.fdopen(fd, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    if status != 0 or len(data) < _SECONDS.size:
        return None, 0.0
    blobs, at = [], _SECONDS.size
    while at + _LENGTH.size <= len(data):
        (n,) = _LENGTH.unpack_from(data, at)
        at += _LENGTH.size
        blobs.append(data[at:at + n])
        at += n
    if at != len(data):
        return None, 0.0
    return blobs, _SECONDS.unpack_from(data)[0]


class _nolock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def compile_primfuncs(funcs: list[PrimFunc], opt_level: int = 3,
                      jobs: int | None = None) -> bytes:
    """Object code of one LLVM module holding all kernels (cached by structural key).

    jobs: processes to optimise in on a miss (default compile_jobs()).
    """
    with _timed("digest"):
        key = structural_key(funcs, opt_level)
    names = tuple(f.name for f in funcs)
    _note(kernel_sets=1, kernels=len(funcs))
    with _lock:
        obj = _CACHE.get((key, names))
        if obj is not None:
            _CACHE.move_to_end((key, names))
            _STATS["hits"] += 1
        known = _MODULES.get(key)
    if obj is not None:
        _note(memory_hits=1)
        return obj
    obj = _renamed_object(known, names, opt_level) if known is not None else None
    if obj is not None:
        _count("renamed")
        _note(renamed_hits=1)
    else:
        obj = _from_disk(key, names, opt_level)
    if obj is None:
        _count("misses")
        _note(misses=1, kernels_compiled=len(funcs))
        mod, tm = _optimised_module(funcs, opt_level, jobs if jobs is not None
                                    else compile_jobs())
        with _timed("link"):
            mod.link_in(_signature_table(funcs, tm))
        with _timed("cache_write"):
            bitcode = mod.as_bitcode()
        with _timed("machine_code"):
            obj = tm.emit_object(mod)
        with _timed("cache_write"):
            with _lock:
                _remember(_MODULES, key, (names, bitcode))
            disk_cache.store(key, disk_cache.Entry(names, obj, bitcode))
    with _lock:
        _remember(_CACHE, (key, names), obj)
    return obj


def _signature_table(funcs: list[PrimFunc], tm: llvm.TargetMachine) -> llvm.ModuleRef:
    """A module defining the kernels' signature table (runtime.library.SIGNATURE_SYMBOL), in
    kernel order (by position, so a cached module renamed for other kernels keeps a valid
    table). It travels inside the object code, so a module file's graph is checked against
    what its machine code was built for, not against another editable section."""
    mod = llvm.parse_assembly(signature_table_ir(
        tuple((b.shape, b.dtype) for b in f.params) for f in funcs))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return mod


def _from_disk(key: str, names: tuple[str, ...], opt_level: int) -> bytes | None:
    """Object code for this kernel set from the persistent cache (None on a miss)."""
    with _timed("cache_lookup"):
        entry = disk_cache.lookup(key)
    if entry is None:
        return None
    if entry.names == names:
        obj = entry.object_code
    else:
        try:
            obj = _renamed_object((entry.names, entry.bitcode), names, opt_level)
        except (RuntimeError, ValueError, NameError):  # unreadable bitcode: recompile
            obj = None
        if obj is None:
            return None
    _count("disk")
    _note(disk_hits=1)
    with _lock:
        _remember(_MODULES, key, (entry.names, entry.bitcode))
    return obj


def _count(what: str, n: int = 1) -> None:
    with _lock:
        _STATS[what] += n


def _renamed_object(known: tuple[tuple[str, ...], bytes], names: tuple[str, ...],
                    opt_level: int) -> bytes | None:
    """Object code of a cached optimised module with its kernels renamed (None if not)."""
    old_names, bitcode = known
    with _timed("machine_code"):
        mod = llvm.parse_bitcode(bitcode)
        fns = [mod.get_function(n) for n in old_names]
        for k, fn in enumerate(fns):  # via temporary names, so swapped names cannot collide
            fn.name = f"relayjit.rename.{k}"
        for fn, name in zip(fns, names):
            fn.name = name
            if fn.name != name:  # LLVM renames on a clash with another global: compile afresh
                return None
        return _target_machine(opt_level).emit_object(mod)


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
    jobs = compile_jobs()  # checked on every build, so a bad value fails cached builds too
    obj = compile_primfuncs(funcs, opt_level, jobs)
    with _timed("load"):
        return KernelLibrary(obj, [f.name for f in funcs], target=current_target())


def get_llvm_ir(funcs: list[PrimFunc], optimized: bool = True, opt_level: int = 3) -> str:
    """LLVM IR text of the kernels, after the O-level pipeline when optimized (then with the
    micro-kernels they call linked in; unoptimised, those are only declared)."""
    if not optimized:
        return str(emit_module(list(funcs)))
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
