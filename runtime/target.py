"""The host LLVM target: one place, so codegen and the loader agree on triple, CPU and features."""
from __future__ import annotations

import functools
import threading
from typing import NamedTuple

import llvmlite.binding as llvm

_init_lock = threading.Lock()
_initialized = False


def ensure_llvm_initialized() -> None:
    """Initialise LLVM's native target once (llvm.initialize() raises in llvmlite 0.50)."""
    global _initialized
    with _init_lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True


class HostInfo(NamedTuple):
    """What object code is built for; recorded in exports and checked at load."""

    triple: str
    cpu: str
    features: str


@functools.lru_cache(maxsize=1)
def host_info() -> HostInfo:
    """The host's target triple, CPU name and feature string."""
    ensure_llvm_initialized()
    return HostInfo(
        llvm.get_default_triple(),
        llvm.get_host_cpu_name(),
        llvm.get_host_cpu_features().flatten(),
    )


def new_target_machine(opt: int = 3) -> llvm.TargetMachine:
    """A fresh host target machine; give each MCJIT engine its own (the engine takes ownership
    and frees it with itself, so a shared one would dangle)."""
    if opt not in (0, 1, 2, 3):
        raise ValueError(f"opt must be 0, 1, 2 or 3, got {opt!r}")
    info = host_info()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=info.cpu, features=info.features, opt=opt, codemodel="jitdefault"
    )


@functools.lru_cache(maxsize=None)
def host_target_machine(opt: int = 3) -> llvm.TargetMachine:
    """The cached host target machine, for emit_object and pass pipelines; never hand it to
    create_mcjit_compiler (use new_target_machine)."""
    return new_target_machine(opt)


def missing_features(features: str) -> list[str]:
    """Features enabled in `features` ("+avx2,-sse4a,...") that the host CPU lacks."""
    host = set(host_info().features.split(","))
    wanted = [f for f in features.split(",") if f.startswith("+")]
    return [f[1:] for f in wanted if f not in host]
