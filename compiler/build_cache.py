"""The build cache: a rebuild of a program relay.build has built before loads the result.

The kernel cache (codegen.cache) spares LLVM on a rebuild, but the passes still run: folding
BatchNorm into ResNet-50's weights and packing them, lowering 200 fused functions and
digesting their kernels took 0.5-0.8 s on every warm build. Here the whole result (graph
JSON, folded params, object code: runtime.export's module file) is stored under a digest of
everything the build reads:

- the program: the module's text after params are bound, and every constant's dtype, shape
  and bytes (SHA-256, so a different weight is a different build);
- how it is built: opt_level, required and disabled passes, the PassContext config, the
  target CPU and the vector width the schedules use, the module name;
- what builds it: the source of the compiler, codegen and runtime packages, and the
  llvmlite and LLVM versions.

Entries live under <cache dir>/builds/ (codegen.cache.cache_dir: RELAYJIT_CACHE_DIR) and are
read back through runtime.factory.load_module, which checks them as untrusted files; an entry
that fails the checks is deleted and the build runs. Builds quicker than MIN_BUILD_SECONDS
are not stored (reading them back would save nothing), nor builds whose params exceed
MAX_STORED_PARAMS (VGG-19's 550 MB took 8 s to write and would take longer to hash and read
back than FoldConstant takes), nor builds under a PassContext with instruments or tracing
(their caller wants to see the passes run). An entry is written by a background thread from
a copy of the params, so relay.build does not wait for the disk (ResNet-50's 100 MB took
0.5 s to serialise and write, a fifth of its cold build); flush() waits for the writes, and
a lookup waits for them first.
RELAYJIT_BUILD_CACHE=0 turns it off; the directory is kept under RELAYJIT_BUILD_CACHE_MAX_MB
(default 2048), least recently used first.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
import threading
from typing import NamedTuple

import numpy as np

import llvmlite
import llvmlite.binding as llvm

from codegen import cache as kernel_cache
from codegen.schedules.common import vector_width
from compiler.ir.expr import Constant
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order
from compiler.transform import PassContext
from runtime.export import write_module
from runtime.factory import GraphExecutorFactoryModule, load_module
from runtime.library import KernelLibrary
from runtime.target import TargetInfo

__all__ = ["build_key", "lookup", "store", "flush", "MIN_BUILD_SECONDS", "MAX_STORED_PARAMS"]

FORMAT = "relayjit-build-1"
MIN_BUILD_SECONDS = 0.3
MAX_STORED_PARAMS = 256 * 2**20  # bytes
_MODULE_SUFFIX = ".rjbuild"
_STATS_SUFFIX = ".json"
_PACKAGES = ("compiler", "codegen", "runtime")
SWITCH = "RELAYJIT_BUILD_CACHE"


def _root() -> str | None:
    """<cache dir>/builds, or None when the build cache is off ($RELAYJIT_BUILD_CACHE=0, or
    no cache directory)."""
    value = os.environ.get(SWITCH, "1").strip().lower()
    if value not in ("1", "0", "on", "off", "true", "false", "yes", "no"):
        raise ValueError(f"environment variable {SWITCH} must be 1 or 0 (on or off), got "
                         f"{value!r}")
    directory = kernel_cache.cache_dir()
    if directory is None or value in ("0", "off", "false", "no"):
        return None
    return os.path.join(directory, "builds")


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """Digest of the compiler's own source: any change to a pass or a schedule is a miss."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256(FORMAT.encode())
    h.update(f"{llvmlite.__version__}\0{llvm.llvm_version_info}".encode())
    for package in _PACKAGES:
        for directory, subdirs, files in os.walk(os.path.join(top, package)):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".ll")):
                    path = os.path.join(directory, name)
                    h.update(os.path.relpath(path, top).encode() + b"\0")
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()


def build_key(mod: IRModule, cpu: TargetInfo, mod_name: str) -> str | None:
    """The digest a build of `mod` (params bound) is stored under; None when this build is
    not to be cached (cache off, instruments or tracing in the PassContext)."""
    ctx = PassContext.current()
    if _root() is None or not kernel_cache.enabled() or ctx.instruments or ctx.trace:
        return None
    h = hashlib.sha256(_source_digest().encode())
    settings = {"opt_level": ctx.opt_level, "required": sorted(ctx.required_pass),
                "disabled": sorted(ctx.disabled_pass),
                "config": sorted((str(k), repr(v)) for k, v in ctx.config.items()),
                "cpu": [cpu.triple, cpu.cpu, cpu.features], "mod_name": mod_name,
                "vector_width": vector_width()}  # RELAYJIT_VECTOR_WIDTH can force another
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(mod.astext(show_meta_data=False).encode())
    for _, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        for node in post_order(func):
            if type(node) is Constant:
                data = node.data._view()
                h.update(f"\0{data.dtype.str}{data.shape}".encode())
                h.update(memoryview(data).cast("B") if data.flags.c_contiguous
                         else data.tobytes())
    return h.hexdigest()


def _paths(key: str) -> tuple[str, str]:
    base = os.path.join(_root(), key[:2], key)
    return base + _MODULE_SUFFIX, base + _STATS_SUFFIX


def lookup(key: str) -> tuple[GraphExecutorFactoryModule, dict] | None:
    """(factory, memory stats) stored under `key`, or None; a damaged entry is removed."""
    flush()
    module_path, stats_path = _paths(key)
    if not os.path.exists(module_path):
        return None
    try:
        with open(stats_path, encoding="utf-8") as f:
            stats = json.load(f)
        if not isinstance(stats, dict):
            raise ValueError("memory stats are not a JSON object")
        factory = load_module(module_path)
    except (OSError, ValueError):  # damaged or half-removed: build again
        _remove(module_path, stats_path)
        return None
    with contextlib.suppress(OSError):
        os.utime(module_path)  # last use, for pruning
    return factory, stats


class _Snapshot(NamedTuple):
    """What runtime.export.write_module reads of a factory, with the params copied (the
    caller may write into the factory's params while the entry is being written)."""

    graph_json: str
    lib: KernelLibrary
    params: dict[str, np.ndarray]
    libmod_name: str

    def get_graph_json(self) -> str:
        return self.graph_json

    def get_lib(self) -> KernelLibrary:
        return self.lib

    def get_params(self) -> dict[str, np.ndarray]:
        return self.params


_writers: list[threading.Thread] = []
_writers_lock = threading.Lock()


def store(key: str, factory: GraphExecutorFactoryModule, memory_stats: dict) -> bool:
    """Start writing the entry on a background thread; False when the build is too big to
    store (MAX_STORED_PARAMS)."""
    if sum(v.nbytes for v in factory.params.values()) > MAX_STORED_PARAMS:
        return False
    snapshot = _Snapshot(factory.graph_json, factory.lib,
                         {name: v.numpy() for name, v in factory.params.items()},
                         factory.libmod_name)
    writer = threading.Thread(target=_write, args=(_paths(key), snapshot, dict(memory_stats)),
                              name="relayjit-build-cache", daemon=False)
    with _writers_lock:
        _writers.append(writer)
    writer.start()
    return True


def flush() -> None:
    """Wait until the entries being written are on disk."""
    with _writers_lock:
        pending, _writers[:] = list(_writers), []
    for writer in pending:
        writer.join()


def _write(paths: tuple[str, str], snapshot: _Snapshot, memory_stats: dict) -> None:
    """The entry: stats first, then the module atomically; nothing left on an I/O error."""
    module_path, stats_path = paths
    directory = os.path.dirname(module_path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=_STATS_SUFFIX, dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(memory_stats, f)
        os.replace(tmp, stats_path)
        write_module(module_path, snapshot)  # atomic itself
    except OSError:
        _remove(module_path, stats_path)
        return
    prune()


def prune(max_bytes: int | None = None) -> int:
    """Remove least recently used builds until the directory fits; how many went."""
    root = _root()
    if root is None:
        return 0
    return kernel_cache.prune_lru(
        root, _MODULE_SUFFIX, max_bytes if max_bytes is not None else
        kernel_cache.size_limit("RELAYJIT_BUILD_CACHE_MAX_MB", 2048),
        lambda path: [path[:-len(_MODULE_SUFFIX)] + _STATS_SUFFIX])


def _remove(*paths: str) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
