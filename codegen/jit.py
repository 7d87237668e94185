"""Compile PrimFuncs to host object code with llvmlite (new pass manager) and load them.

A kernel set compiles to one object file per compile job (codegen.compile_objects): each job
emits, optimises (codegen.optimise) and machine-codes its share of the kernels (kernels that
differ only in an extent as one family body, codegen.kernel_families), and the first object
also holds the kernels' signature table. The micro-kernels the kernels call are objects of
their own, compiled once per target CPU and kept in the caches beside the kernel sets
(codegen.microkernel_objects), so a build that finds them there emits none;
runtime.KernelLibrary loads all the objects into one engine.

Two in-process caches, both keyed by tir.structural's name-free digest: the object files per
(digest, kernel names), and the optimised modules (bitcode, one per object) per digest.
Identical kernels under other names reuse the optimised modules: the exported functions are
renamed and only machine-code emission runs, skipping the O-level pipeline. Behind them sits
the persistent disk cache (codegen.cache): a kernel set compiled by an earlier process loads
its object files from disk and skips LLVM altogether.

Where the time goes: codegen.compile_stats (`with record_compile_stats() as stats:`).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import llvmlite.binding as llvm
import numpy as np

from runtime.library import KernelLibrary
from runtime.target import TargetInfo

from . import cache as disk_cache
from . import microkernel_objects
from .cache import remember
from .compile_jobs import note_compile_request, requested_compile_jobs
from .compile_objects import compile_objects
from .compile_stats import note, timed
from .errors import CodegenError
from .lower import lower
from .microkernel_objects import (Microkernel, find_microkernels, keep_microkernels,
                                  link_microkernels, microkernels_called)
from .optimise import (compile_units, emit_units, optimised_kernels, pipeline_for,
                       target_machine_for)
from .options import CodegenOptions
from .tir.stmt import PrimFunc
from .tir.structural import structural_digest

# (digest, kernel names) -> object files; digest -> (kernel names, bitcode of each object)
_CACHE: OrderedDict[tuple[str, tuple[str, ...]], tuple[bytes, ...]] = OrderedDict()
_MODULES: OrderedDict[str, tuple[tuple[str, ...], tuple[bytes, ...]]] = OrderedDict()
_STATS = {"hits": 0, "renamed": 0, "disk": 0, "misses": 0}
_lock = threading.Lock()


def structural_key(funcs: list[PrimFunc], options: CodegenOptions, opt_level: int) -> str:
    """Digest of the generated code: kernels' structure, shapes, dtypes, attrs (what the
    options' vector width and schedule configurations made of them), the LLVM pipelines, the
    target CPU and kernel families; not names."""
    cpu = options.cpu
    pipelines = ",".join(sorted({str(tuple(pipeline_for(f, opt_level))) for f in funcs}))
    return structural_digest(funcs, f"opt{opt_level}\0{pipelines}\0{cpu.triple}\0{cpu.cpu}"
                                    f"\0{cpu.features}\0families{int(options.kernel_families)}")


def _optimised_module(funcs: list[PrimFunc], options: CodegenOptions, opt_level: int
                      ) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """The kernels optimised at opt_level in one module, with the micro-kernels they call
    linked in (what get_llvm_ir and get_assembly show)."""
    with timed("digest"):
        names = microkernels_called(funcs)
        units = compile_units(funcs, options.kernel_families)
    mod, tm = optimised_kernels(units, opt_level, options.cpu)
    keep_microkernels(link_microkernels(mod, options.cpu, names), options.cpu)
    return mod, tm


def compile_primfuncs(funcs: list[PrimFunc], opt_level: int = 3, jobs: int | None = None, *,
                      options: CodegenOptions) -> tuple[bytes, ...]:
    """Object files holding all kernels, compiled for options.cpu, the first with their
    signature table (cached by structural key): one per compile job, then one per
    micro-kernel they call.

    jobs: processes to compile in on a miss (default: $RELAYJIT_COMPILE_JOBS, else auto).
    """
    cpu = options.cpu
    with timed("digest"):
        key = structural_key(funcs, options, opt_level)
    names = tuple(f.name for f in funcs)
    note(kernel_sets=1, kernels=len(funcs))
    with _lock:
        objects = _CACHE.get((key, names))
        if objects is not None:
            _CACHE.move_to_end((key, names))
            _STATS["hits"] += 1
        known = _MODULES.get(key)
    if objects is not None:
        note(memory_hits=1)
        return objects
    objects = _renamed_objects(known, names, opt_level, cpu) if known is not None else None
    if objects is not None:
        _count("renamed")
        note(renamed_hits=1)
    else:
        objects = _from_disk(key, names, opt_level, cpu)
    if objects is None:
        _count("misses")
        note(misses=1, kernels_compiled=len(funcs),
             hand_scheduled_compiled=sum(pipeline_for(f, opt_level).speed_level < opt_level
                                         for f in funcs))
        compiled = compile_objects(funcs, opt_level, jobs, options)
        objects = tuple(obj for obj, _ in compiled)
        bitcodes = tuple(bitcode for _, bitcode in compiled)
        with timed("cache_write"):
            with _lock:
                remember(_MODULES, key, (names, bitcodes))
            disk_cache.store(key, disk_cache.Entry(names, objects, bitcodes), cpu)
    compiled: dict[str, Microkernel] = {}
    kernels = find_microkernels(microkernels_called(funcs), cpu, compiled)
    keep_microkernels(compiled, cpu)
    objects += tuple(kernel.object for kernel in kernels.values())
    with _lock:
        remember(_CACHE, (key, names), objects)
    return objects


def _from_disk(key: str, names: tuple[str, ...], opt_level: int, cpu: TargetInfo
               ) -> tuple[bytes, ...] | None:
    """Object files for this kernel set from the persistent cache (None on a miss)."""
    with timed("cache_lookup"):
        entry = disk_cache.lookup(key, cpu)
    if entry is None or not entry.objects or len(entry.bitcodes) != len(entry.objects) \
            or len(entry.names) != len(names):
        return None
    if entry.names == names:
        objects = entry.objects
    else:
        try:
            objects = _renamed_objects((entry.names, entry.bitcodes), names, opt_level, cpu)
        except (RuntimeError, ValueError, NameError):  # unreadable bitcode: recompile
            objects = None
        if objects is None:
            return None
    _count("disk")
    note(disk_hits=1)
    with _lock:
        remember(_MODULES, key, (entry.names, entry.bitcodes))
    return objects


def _count(what: str, n: int = 1) -> None:
    with _lock:
        _STATS[what] += n


def _renamed_objects(known: tuple[tuple[str, ...], tuple[bytes, ...]],
                     names: tuple[str, ...], opt_level: int, cpu: TargetInfo
                     ) -> tuple[bytes, ...] | None:
    """Object files of cached optimised modules with their kernels renamed, position for
    position (None if a name clashes or a kernel is missing)."""
    old_names, bitcodes = known
    position = {name: k for k, name in enumerate(old_names)}
    objects, renamed = [], 0
    with timed("machine_code"):
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
            objects.append(target_machine_for(cpu, opt_level).emit_object(mod))
    return tuple(objects) if renamed == len(names) else None


def cache_stats() -> dict[str, int]:
    """Counts of exact hits, hits under other kernel names (renamed), kernel sets loaded from
    the disk cache (disk), misses (compiled by LLVM) and micro-kernels compiled (not found in
    memory or on disk); disk_cache_stats has the disk side."""
    with _lock:
        counts = dict(_STATS)
    return {**counts, "microkernels": microkernel_objects.compiled_count()}


def build_library(funcs: list[PrimFunc], opt_level: int = 3, *,
                  options: CodegenOptions) -> KernelLibrary:
    """Compile the kernels for options.cpu and load them: a runtime.KernelLibrary with one
    function per PrimFunc."""
    requested_compile_jobs()  # checked on every build, so a bad value fails cached builds too
    note_compile_request()  # opens the window auto_compile_jobs measures busy cores over
    objects = compile_primfuncs(funcs, opt_level, options=options)
    with timed("load"):
        return KernelLibrary(objects, [f.name for f in funcs], target=options.cpu)


def get_llvm_ir(funcs: list[PrimFunc], optimized: bool = True, opt_level: int = 3, *,
                options: CodegenOptions) -> str:
    """LLVM IR text of the kernels, after the O-level pipeline when optimized (then with the
    micro-kernels they call linked in; unoptimised, those are only declared)."""
    if not optimized:
        return str(emit_units(compile_units(funcs, options.kernel_families)))
    mod, _ = _optimised_module(funcs, options, opt_level)
    return str(mod)


def get_assembly(funcs: list[PrimFunc], opt_level: int = 3, *,
                 options: CodegenOptions) -> str:
    """Assembly of the kernels for options.cpu (from a module no execution engine owns)."""
    mod, tm = _optimised_module(funcs, options, opt_level)
    return tm.emit_assembly(mod)


def clear_cache() -> None:
    """Forget compiled objects (tests, benchmarks of compile time)."""
    with _lock:
        _CACHE.clear()
        _MODULES.clear()
    microkernel_objects.clear_cache()


def build_te(inputs: list, outputs: list, name: str = "kernel", opt_level: int = 3,
             options: CodegenOptions | None = None):
    """Lower + compile tensor expressions; returns f(*numpy inputs) -> list of numpy outputs.

    The small JIT fixture for tests and for checking compute rules against numpy; it builds
    for `options` (default: the host's CodegenOptions).
    """
    options = options if options is not None else CodegenOptions.host()
    func = lower(name, inputs, outputs, options.parallel, options.vectorize)
    lib = build_library([func], opt_level, options=options)
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
