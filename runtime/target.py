"""The CPU that object code is built for: triple, CPU name and features, in one place, so codegen,
the compile cache, exports and the loader agree.

A build targets the host (every feature it has) or a named baseline such as x86-64-v3
(`resolve_cpu_target`); the build driver passes it to codegen explicitly (in its
CodegenOptions: vector widths, the LLVM target machine, cache keys). The loader checks a
module's recorded features against the host's before any of its code runs
(`missing_features`).
"""
from __future__ import annotations

import functools
import threading
from typing import Iterable, NamedTuple

import llvmlite.binding as llvm

from .cpu_features import canonical_cpu, named_cpu_features, named_cpus

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


class TargetInfo(NamedTuple):
    """What object code is built for; recorded in exports and checked at load."""

    triple: str
    cpu: str
    features: str  # LLVM's form: "+avx2,+fma,-avx512f,..."

    def enabled_features(self) -> list[str]:
        """The features the code may use (the "+" entries), sorted."""
        return sorted(f[1:] for f in self.features.split(",") if f.startswith("+"))

    def target_string(self) -> str:
        """The relay.build target that builds for this CPU."""
        return f"llvm -mcpu={self.cpu}"


# The x86-64 micro-architecture levels of the x86-64 psABI, as LLVM feature names; each level
# adds to the one before. LLVM accepts the names as -mcpu values.
_X86_64_LEVELS = {
    "x86-64": ("64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2"),
    "x86-64-v2": ("cx16", "sahf", "popcnt", "crc32", "sse3", "ssse3", "sse4.1", "sse4.2"),
    "x86-64-v3": ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"),
    "x86-64-v4": ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}


def baseline_features(cpu: str) -> list[str]:
    """Features a named x86-64 level guarantees (KeyError for other names)."""
    names = list(_X86_64_LEVELS)
    features: list[str] = []
    for level in names[: names.index(cpu) + 1]:
        features.extend(_X86_64_LEVELS[level])
    return features


def baseline_cpus() -> list[str]:
    """The named baselines resolve_cpu_target knows, oldest first."""
    return list(_X86_64_LEVELS)


@functools.lru_cache(maxsize=1)
def host_info() -> TargetInfo:
    """The host's target triple, CPU name and feature string."""
    ensure_llvm_initialized()
    return TargetInfo(
        llvm.get_default_triple(),
        llvm.get_host_cpu_name(),
        llvm.get_host_cpu_features().flatten(),
    )


def resolve_cpu_target(cpu: str = "", mattr: Iterable[str] = (), triple: str = "") -> TargetInfo:
    """The TargetInfo for `-mcpu=cpu -mattr=... -mtriple=...`.

    cpu: "" / "native" / the host's own CPU name (the host, with every feature it has), an
    x86-64 level (baseline_cpus()) or a named x86 CPU (runtime.cpu_features: exactly its
    features, every other one LLVM knows disabled). Other names are refused: their features
    could not be recorded, so a machine lacking one could not be told apart at load. mattr: "+feature" adds,
    "-feature" removes. Code runs in this process's JIT, so the triple must be the host's.
    """
    host = host_info()
    if triple and triple != host.triple:
        raise ValueError(f"target triple {triple!r}: relayjit builds for this machine's triple "
                         f"{host.triple!r} only (it loads what it compiles)")
    if cpu in ("", "native", host.cpu):
        info = host
        features = dict((f[1:], f[0]) for f in host.features.split(",") if f)
    elif cpu in _X86_64_LEVELS and host.triple.startswith("x86_64"):
        info = TargetInfo(host.triple, cpu, "")
        features = {f: "+" for f in baseline_features(cpu)}
    elif canonical_cpu(cpu) and host.triple.startswith("x86_64"):
        info = TargetInfo(host.triple, canonical_cpu(cpu), "")
        features = {f[1:]: "-" for f in host.features.split(",") if f}
        features.update((f, "+") for f in named_cpu_features(cpu))
    else:
        raise ValueError(f"-mcpu={cpu!r} is not a CPU relayjit can record features for; "
                         f"expected this machine's CPU ({host.cpu!r}, or leave -mcpu out), "
                         f"a baseline ({', '.join(baseline_cpus())}) or a named x86 CPU "
                         f"({', '.join(named_cpus())})")
    for attr in mattr:
        if len(attr) < 2 or attr[0] not in "+-":
            raise ValueError(f"-mattr entry {attr!r}: expected +feature or -feature")
        features[attr[1:]] = attr[0]
    return info._replace(features=",".join(sign + name for name, sign in sorted(features.items())))


def _create_target_machine(target: TargetInfo, opt: int) -> llvm.TargetMachine:
    if opt not in (0, 1, 2, 3):
        raise ValueError(f"opt must be 0, 1, 2 or 3, got {opt!r}")
    ensure_llvm_initialized()
    return llvm.Target.from_triple(target.triple).create_target_machine(
        cpu=target.cpu, features=target.features, opt=opt, codemodel="jitdefault")


def new_target_machine(opt: int = 3) -> llvm.TargetMachine:
    """A fresh host target machine; give each MCJIT engine its own (the engine takes ownership
    and frees it with itself, so a shared one would dangle)."""
    return _create_target_machine(host_info(), opt)


@functools.lru_cache(maxsize=None)
def target_machine(target: TargetInfo, opt: int = 3) -> llvm.TargetMachine:
    """The cached target machine for `target`, for emit_object and pass pipelines; never hand
    it to create_mcjit_compiler (use new_target_machine)."""
    return _create_target_machine(target, opt)


def host_target_machine(opt: int = 3) -> llvm.TargetMachine:
    """The cached host target machine (target_machine for host_info())."""
    return target_machine(host_info(), opt)


def missing_features(features: str) -> list[str]:
    """Features enabled in `features` ("+avx2,-sse4a,...") that the host CPU lacks."""
    host = set(host_info().features.split(","))
    wanted = [f for f in features.split(",") if f.startswith("+")]
    return [f[1:] for f in wanted if f not in host]


def best_host_baseline() -> str:
    """The newest baseline this host runs ("" when none applies, e.g. not x86-64)."""
    if not host_info().triple.startswith("x86_64"):
        return ""
    runs = [cpu for cpu in baseline_cpus()
            if not missing_features(",".join("+" + f for f in baseline_features(cpu)))]
    return runs[-1] if runs else ""
