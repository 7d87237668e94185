"""Compile PrimFuncs to host object code with llvmlite (new pass manager) and load them.

Two in-process caches, both keyed by tir.structural's name-free digest: object code per
(digest, kernel names), and the optimised module per digest. Identical kernels under other
names (FoldConstant names each kernel uniquely) reuse the optimised module: the exported
functions are renamed and only machine-code emission runs, skipping the O-level pipeline.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import llvmlite.binding as llvm

from .errors import CodegenError
from .llvm.emit import emit_module
from .tir.stmt import PrimFunc
from .tir.structural import structural_digest

_CACHE: OrderedDict[tuple[str, tuple[str, ...]], bytes] = OrderedDict()
_MODULES: OrderedDict[str, tuple[tuple[str, ...], bytes]] = OrderedDict()  # digest -> bitcode
_CACHE_SIZE = 256
_STATS = {"hits": 0, "renamed": 0, "misses": 0}
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
        _STATS["renamed"] += 1
    else:
        _STATS["misses"] += 1
        mod, tm = _optimised_module(funcs, opt_level)
        bitcode = mod.as_bitcode()
        obj = tm.emit_object(mod)
        with _lock:
            _remember(_MODULES, key, (names, bitcode))
    with _lock:
        _remember(_CACHE, (key, names), obj)
    return obj


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
    """Counts of exact hits, hits under other kernel names (renamed) and misses."""
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
