"""The runtime's native support library (native.ll): the kernel thread pool and the run loop.

Compiled once per process on first use and kept alive to the end of it; its entry points are
registered with LLVM by name, so kernel object code that calls `relayjit_parallel_for`
resolves to this pool when a KernelLibrary loads it. Forked children reset the pool (they
have none of the parent's threads) and interpreter exit joins the workers.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import threading
from importlib import resources

import llvmlite.binding as llvm

from .target import host_info, new_target_machine
from .thread_config import num_threads_from_env

# The symbols kernel code may call; KernelLibrary registers them before loading objects.
PARALLEL_FOR = "relayjit_parallel_for"
PARALLEL_FOR_MAX = "relayjit_parallel_for_max"  # (fn, closure, n, max threads)

_PAUSE = {  # the spin-wait hint by architecture, (call, declaration); nothing elsewhere
    "x86_64": ("call void @llvm.x86.sse2.pause()", "declare void @llvm.x86.sse2.pause()"),
    "aarch64": ("call void @llvm.aarch64.hint(i32 1)", "declare void @llvm.aarch64.hint(i32)"),
}


class NativeSupport:
    """ctypes entry points of the compiled native.ll (one instance per process)."""

    def __init__(self) -> None:
        text = resources.files(__package__).joinpath("native.ll").read_text()
        arch = host_info().triple.split("-")[0]
        pause, pause_decl = _PAUSE.get(arch, ("", ""))
        text = text.replace("{pause}", pause).replace("{pause_decl}", pause_decl)
        tm = new_target_machine(opt=2)
        mod = llvm.parse_assembly(text)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        self._engine = llvm.create_mcjit_compiler(mod, tm)
        self._engine.finalize_object()
        addr = self._engine.get_function_address
        for symbol in (PARALLEL_FOR, PARALLEL_FOR_MAX):
            llvm.add_symbol(symbol, addr(symbol))
        self.set_threads = ctypes.CFUNCTYPE(None, ctypes.c_int32)(
            addr("relayjit_pool_set_threads"))
        self.get_threads = ctypes.CFUNCTYPE(ctypes.c_int32)(addr("relayjit_pool_get_threads"))
        self.num_workers = ctypes.CFUNCTYPE(ctypes.c_int32)(addr("relayjit_pool_num_workers"))
        self.shutdown = ctypes.CFUNCTYPE(None)(addr("relayjit_pool_shutdown"))
        self.reset = ctypes.CFUNCTYPE(None)(addr("relayjit_pool_reset"))
        # int32 run_steps(fn_ptr *fns, void **args, int64 n, int32 *status):
        # 0, or 1 + the failing step's index (its status in *status)
        self.run_steps = ctypes.CFUNCTYPE(
            ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
            ctypes.POINTER(ctypes.c_int32))(addr("relayjit_run_steps"))
        self.copy_step_address = addr("relayjit_copy_step")
        self.parallel_for_address = addr(PARALLEL_FOR)
        self.reset()


# glibc's mallopt parameters: allocations below the mmap threshold come from the heap, which
# keeps freed memory until more than the trim threshold is free at its top.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _keep_scratch_mapped() -> None:
    """Kernels allocate their large scratch per call (that is what makes them reentrant).
    glibc would serve a multi-megabyte block by mmap and give it back on free, so every run
    page-faulted its scratch in again (ResNet-50: ~1,300 faults a run; a kernel with 5 MB of
    scratch took 5x longer for it). Raising the thresholds keeps such blocks in the heap.
    Process-wide, so a process also keeps up to the trim threshold of freed heap; nothing
    happens on a C library without mallopt."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 128 << 20)


_lock = threading.Lock()
_support: NativeSupport | None = None


def native_support() -> NativeSupport:
    """The process's native support library, compiled on first call."""
    global _support
    if _support is None:
        with _lock:
            if _support is None:
                support = NativeSupport()
                support.set_threads(num_threads_from_env())
                _keep_scratch_mapped()
                atexit.register(support.shutdown)
                if hasattr(os, "register_at_fork"):
                    os.register_at_fork(after_in_child=support.reset)
                _support = support
    return _support
