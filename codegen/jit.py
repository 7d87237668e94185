"""Compile PrimFuncs to host object code with llvmlite (new pass manager) and load them.

Two in-process caches, both keyed by tir.structural's name-free digest: object code per
(digest, kernel names), and the optimised module per digest. Identical kernels under other
names reuse the optimised module: the exported functions are renamed and only machine-code
emission runs, skipping the O-level pipeline. Behind them sits the persistent disk cache
(codegen.cache): a kernel set compiled by an earlier process loads its object code from
disk and skips LLVM altogether.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import llvmlite.binding as llvm

from . import cache as disk_cache
from .errors import CodegenError
from .llvm.emit import emit_module
from .tir.stmt import PrimFunc
from .tir.structural import structural_digest

_CACHE: OrderedDict[tuple[str, tuple[str, ...]], bytes] = OrderedDict()
_MODULES: OrderedDict[str, tuple[tuple[str, ...], bytes]] = OrderedDict()  # digest -> bitcode
_CACHE_SIZE = 256
_STATS = {"hits": 0, "renamed": 0, "disk": 0, "misses": 0}
_lock = threading.Lock()


def _target_machine(opt_level: int) -> llvm.TargetMachine:
    from runtime.library import host_target_machine

    return host_target_machine(opt=opt_level)


def structural_key(funcs: list[PrimFunc], opt_level: int) -> str:
    """Digest of the generated code: kernels' structure, shapes, dtypes, attrs; not names."""
    return structural_digest(funcs, f"opt{opt_level}")


def _optimised_module(funcs: list[PrimFunc], opt_level: int) -> tuple[llvm.ModuleRef,
                                                                        llvm.TargetMachine]:
    tm = _target_machine(opt_level)
    ir_module = emit_module(list(funcs))
    ir_module.triple = tm.triple
    ir_module.data_layout = str(tm.target_data)
    try:
        mod = llvm.parse_assembly(str(ir_module))
        mod.verify()
    except RuntimeError as err:
        names = [f.name for f in funcs]
        raise CodegenError(f"LLVM rejected the IR for kernels {names}: {err}") from None
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        # full unrolling of static-trip loops after vectorisation made 10x larger code and
        # 10x slower compiles for little speed (schedules unroll by hand where it pays)
        pto.loop_unrolling = False
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod, tm


def compile_jobs() -> int:
    """Processes optimising one kernel set: $RELAYJIT_COMPILE_JOBS, default 1.

    Opt-in: on the 2-core development VM (shared, load ~6) two jobs cost ~25% more CPU in
    total (each module re-emits the micro-kernel helpers its kernels share) and gave no
    wall-clock gain; on an idle multi-core machine they overlap emission and optimisation.
    """
    import os

    try:
        return max(1, int(os.environ.get("RELAYJIT_COMPILE_JOBS", "") or 1))
    except ValueError:
        return 1


def _parallel_optimised_module(funcs: list[PrimFunc], opt_level: int):
    """_optimised_module, with IR emission + the O-level pipeline split over forked processes.

    llvmlite serialises every LLVM call behind one process-wide lock, so threads cannot
    overlap LLVM work; forked children can. The parent optimises the first share itself,
    each child returns its share's optimised bitcode through a pipe, the parent links them
    into its module (kernel helpers are internal, so nothing clashes) and emits one object
    file. A child that fails in any way is redone in the parent: same result, only slower.
    """
    import os

    jobs = min(compile_jobs(), len(funcs) // PARALLEL_MIN_KERNELS)
    if jobs < 2 or not hasattr(os, "fork") or opt_level == 0:
        return _optimised_module(funcs, opt_level)
    shares = [funcs[k::jobs] for k in range(jobs)]
    children = []
    ffi_lock = getattr(getattr(llvm.ffi, "lib", None), "_lock", None)
    for share in shares[1:]:
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            children.append((None, None, share))
            continue
        # no other thread may be inside LLVM while we fork (the child would inherit its lock)
        with ffi_lock if ffi_lock is not None else _nolock():
            pid = os.fork()
        if pid == 0:  # child: optimise the share, send bitcode, never return
            status = 1
            try:
                os.close(read_fd)
                data = _optimised_module(share, opt_level)[0].as_bitcode()
                with os.fdopen(write_fd, "wb") as out:
                    out.write(data)
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        children.append((pid, read_fd, share))
    try:
        mod, tm = _optimised_module(shares[0], opt_level)
    finally:
        parts = [_collect(pid, fd) for pid, fd, _ in children]
    for (_, _, share), bitcode in zip(children, parts):
        other = llvm.parse_bitcode(bitcode) if bitcode is not None else \
            _optimised_module(share, opt_level)[0]
        mod.link_in(other)
    return mod, tm


PARALLEL_MIN_KERNELS = 8  # fewer kernels per process than this: not worth a fork


def _collect(pid: int | None, fd: int | None) -> bytes | None:
    """Bitcode a child sent (None if it failed); reaps the child."""
    import os

    if pid is None:
        return None
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
    if status != 0 or not chunks:
        return None
    return b"".join(chunks)


class _nolock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def compile_primfuncs(funcs: list[PrimFunc], opt_level: int = 3) -> bytes:
    """Object code of one LLVM module holding all kernels (cached by structural key)."""
    key, names = structural_key(funcs, opt_level), tuple(f.name for f in funcs)
    with _lock:
        obj = _CACHE.get((key, names))
        if obj is not None:
            _CACHE.move_to_end((key, names))
            _STATS["hits"] += 1
            return obj
        known = _MODULES.get(key)
    obj = _renamed_object(known, names, opt_level) if known is not None else None
    if obj is not None:
        _count("renamed")
    else:
        obj = _from_disk(key, names, opt_level)
    if obj is None:
        _count("misses")
        mod, tm = _parallel_optimised_module(funcs, opt_level)
        bitcode = mod.as_bitcode()
        obj = tm.emit_object(mod)
        with _lock:
            _remember(_MODULES, key, (names, bitcode))
        disk_cache.store(key, disk_cache.Entry(names, obj, bitcode))
    with _lock:
        _remember(_CACHE, (key, names), obj)
    return obj


def _from_disk(key: str, names: tuple[str, ...], opt_level: int) -> bytes | None:
    """Object code for this kernel set from the persistent cache (None on a miss)."""
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
    with _lock:
        _remember(_MODULES, key, (entry.names, entry.bitcode))
    return obj


def _count(what: str) -> None:
    with _lock:
        _STATS[what] += 1


def _renamed_object(known: tuple[tuple[str, ...], bytes], names: tuple[str, ...],
                    opt_level: int) -> bytes | None:
    """Object code of a cached optimised module with its kernels renamed (None if not)."""
    old_names, bitcode = known
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
    the disk cache (disk) and misses (compiled by LLVM); disk_cache_stats has the disk side."""
    with _lock:
        return dict(_STATS)


def build_library(funcs: list[PrimFunc], opt_level: int = 3):
    """Compile and load the kernels: a runtime.KernelLibrary with one function per PrimFunc."""
    from runtime.library import KernelLibrary

    return KernelLibrary(compile_primfuncs(funcs, opt_level), [f.name for f in funcs])


def get_llvm_ir(funcs: list[PrimFunc], optimized: bool = True, opt_level: int = 3) -> str:
    """LLVM IR text of the kernels, after the O-level pipeline when optimized."""
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
