"""The build cache: a rebuild of a program relay.build has built before loads the result.

The kernel cache (codegen.cache) spares LLVM on a rebuild, but the passes still run: folding
BatchNorm into ResNet-50's weights and packing them, lowering 200 fused functions and
digesting their kernels took 0.5-0.8 s on every warm build. Here the whole result is stored
under a digest of everything the build reads:

- the program: the module's text after params are bound, and every constant's dtype, shape
  and bytes (runtime.digest: BLAKE3 pieces hashed on every core, SHA-256 without the blake3
  package; a different weight is a different build);
- how it is built: opt_level, required and disabled passes, the PassContext config, the
  CodegenOptions (target CPU, vector width, kernel families, schedule overrides, parallel
  policy: everything the environment or the target changes in the code), the current
  relay.qnn.op.requantize_config (a requantize whose rounding is "None" lowers with its
  rounding), the module name;
- what builds it: the source of the compiler, codegen and runtime packages, and the
  llvmlite and LLVM versions.

An entry under <cache dir>/builds/ (codegen.cache.cache_dir: RELAYJIT_CACHE_DIR) is three
files: the module (runtime.export's format with no params: graph JSON and object code), the
params (runtime.params_file: aligned arrays, memory-mapped on a hit instead of read and
copied) and a JSON of the memory stats and the params' digest. All are read back as
untrusted files: the module through runtime.factory.load_module, the params checked against
their own digest and the one the JSON names; an entry that fails a check is deleted and the
build runs. Builds quicker than MIN_BUILD_SECONDS are not stored (reading them back would
save nothing), nor builds whose params exceed MAX_STORED_PARAMS, nor builds under a
PassContext with instruments or tracing (their caller wants to see the passes run).
The params file is the snapshot of the params (the caller may write into the factory's
params once relay.build returns; copying them in memory first cost AlexNet 0.5 s of page
faults): start_params writes the folded weights on a thread while LLVM compiles, store()
adds the rest and names them before relay.build returns, and a background thread digests
the file and writes the module and stats; flush() waits for those writes, and a lookup waits
for them first. A hit maps the params and checks their digest: with BLAKE3 VGG-19's 550 MB
of weights and 730 MB of stored params take about 0.2 s between them (SHA-256: 0.8 s).
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
from codegen.options import CodegenOptions
from compiler.ir.expr import Constant
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order
from compiler.op.qnn import current_requantize_config
from compiler.transform import PassContext
from runtime.digest import content_digest
from runtime.export import write_module
from runtime.factory import GraphExecutorFactoryModule, load_module
from runtime.library import KernelLibrary
from runtime.ndarray import NDArray
from runtime.params_file import ParamsFileWriter, map_params, seal

__all__ = ["build_key", "lookup", "start_params", "store", "flush", "MIN_BUILD_SECONDS",
           "MAX_STORED_PARAMS"]

FORMAT = "relayjit-build-2"
MIN_BUILD_SECONDS = 0.3
MAX_STORED_PARAMS = 1024 * 2**20  # bytes: VGG-19 stores 730 MB of packed and transformed weights
_MODULE_SUFFIX = ".rjbuild"
_PARAMS_SUFFIX = ".params"
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


# the checkout holding compiler/, codegen/ and runtime/ (this file is compiler/driver/...)
_TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def source_files() -> list[str]:
    """The compiler's own source files (.py, .ll of _PACKAGES), relative to the checkout, in
    the order the digest reads them."""
    out = []
    for package in _PACKAGES:
        for directory, subdirs, files in os.walk(os.path.join(_TOP, package)):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            out += [os.path.relpath(os.path.join(directory, name), _TOP)
                    for name in sorted(files) if name.endswith((".py", ".ll"))]
    return out


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """Digest of the compiler's own source: any change to a pass or a schedule is a miss.
    (It once walked compiler/compiler, ...: the module had moved a directory down, and
    builds made before a source change were loaded after it.)"""
    h = hashlib.sha256(FORMAT.encode())
    h.update(f"{llvmlite.__version__}\0{llvm.llvm_version_info}".encode())
    for path in source_files():
        h.update(path.encode() + b"\0")
        with open(os.path.join(_TOP, path), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def build_key(mod: IRModule, options: CodegenOptions, mod_name: str) -> str | None:
    """The digest a build of `mod` (params bound) is stored under; None when this build is
    not to be cached (cache off, instruments or tracing in the PassContext)."""
    ctx = PassContext.current()
    if _root() is None or not kernel_cache.enabled() or ctx.instruments or ctx.trace:
        return None
    settings = {"opt_level": ctx.opt_level, "required": sorted(ctx.required_pass),
                "disabled": sorted(ctx.disabled_pass),
                "config": sorted((str(k), repr(v)) for k, v in ctx.config.items()),
                "codegen": options.key(), "requantize": repr(current_requantize_config()),
                "mod_name": mod_name}
    kinds, contents = [], []
    for _, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        for node in post_order(func):
            if type(node) is Constant:
                data = node.data._view()
                kinds.append(f"{data.dtype.str}{data.shape}")
                contents.append(data if data.flags.c_contiguous else data.tobytes())
    header = "\0".join([_source_digest(), json.dumps(settings, sort_keys=True),
                        mod.astext(show_meta_data=False), *kinds])
    return content_digest(contents, header.encode())


def _paths(key: str) -> tuple[str, str, str]:
    """The entry's module, params and stats files."""
    base = os.path.join(_root(), key[:2], key)
    return base + _MODULE_SUFFIX, base + _PARAMS_SUFFIX, base + _STATS_SUFFIX


def lookup(key: str) -> tuple[GraphExecutorFactoryModule, dict] | None:
    """(factory, memory stats) stored under `key`, or None; a damaged entry is removed."""
    flush()
    paths = _paths(key)
    module_path, params_path, stats_path = paths
    if not os.path.exists(module_path):
        return None
    try:
        with open(stats_path, encoding="utf-8") as f:
            stats = json.load(f)
        if not (isinstance(stats, dict) and isinstance(stats.get("memory_stats"), dict)
                and isinstance(stats.get("params_digest"), str)):
            raise ValueError("the stats file is not {memory_stats, params_digest}")
        factory = load_module(module_path)
        factory.params = {name: NDArray(value) for name, value in
                          map_params(params_path, stats["params_digest"]).items()}
    except (OSError, ValueError):  # damaged or half-removed: build again
        _remove(*paths)
        return None
    with contextlib.suppress(OSError):
        os.utime(module_path)  # last use, for pruning
    return factory, stats["memory_stats"]


class _Snapshot(NamedTuple):
    """What runtime.export.write_module reads of a factory: everything but the params, which
    go to their own file."""

    graph_json: str
    lib: KernelLibrary
    libmod_name: str

    def get_graph_json(self) -> str:
        return self.graph_json

    def get_lib(self) -> KernelLibrary:
        return self.lib

    def get_params(self) -> dict[str, np.ndarray]:
        return {}


class EarlyParams:
    """The params file of a build being written on a thread while the build goes on: the
    folded weights are final once the passes have run, so they go to disk while LLVM
    compiles (VGG-19's 730 MB took 1-2 s to write on this machine kind, most of it the
    kernel finding page-cache pages). store() takes what is written; discard() drops it."""

    def __init__(self, key: str, arrays: list[NDArray]) -> None:
        self.key = key
        self.offsets: dict[int, int] = {}  # id(NDArray) -> offset in the data region
        self._arrays = arrays  # keeps the ids valid
        self._writer: ParamsFileWriter | None = None
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._write, name="relayjit-build-params",
                                        daemon=True)
        self._thread.start()

    def _write(self) -> None:
        try:
            directory = os.path.dirname(_paths(self.key)[0])
            os.makedirs(directory, exist_ok=True)
            self._writer = ParamsFileWriter(directory)
            for value in self._arrays:
                self.offsets[id(value)] = self._writer.add(value._view())
        except Exception as err:  # the disk refused: the build is not stored
            self._error = err

    def writer(self) -> ParamsFileWriter:
        """The file with everything written so far (waits for the thread); OSError when the
        disk refused."""
        self._thread.join()
        if self._error is not None:
            if self._writer is not None:
                self._writer.discard()
            raise OSError(f"build cache: params not written: {self._error}") from self._error
        return self._writer

    def discard(self) -> None:
        """Wait for the thread and remove what it wrote."""
        with contextlib.suppress(OSError):
            self.writer().discard()


def start_params(key: str, arrays: list[NDArray]) -> EarlyParams | None:
    """Start writing `arrays` (the build's constant weights, final) for the entry `key`;
    None when they are more than MAX_STORED_PARAMS (the build will not be stored)."""
    unique = list({id(a): a for a in arrays}.values())
    if sum(a.nbytes for a in unique) > MAX_STORED_PARAMS:
        return None
    return EarlyParams(key, unique)


_writers: list[threading.Thread] = []
_writers_lock = threading.Lock()


def store(key: str, factory: GraphExecutorFactoryModule, memory_stats: dict,
          early: EarlyParams | None = None) -> bool:
    """Finish the params file (what `early` has not written, then the names), now, and write
    the rest of the entry on a background thread; False when the build is too big to store
    (MAX_STORED_PARAMS) or the disk refuses."""
    if sum(v.nbytes for v in factory.params.values()) > MAX_STORED_PARAMS:
        if early is not None:
            early.discard()
        return False
    paths = _paths(key)
    try:
        if early is not None:
            writer, offsets = early.writer(), early.offsets
        else:
            os.makedirs(os.path.dirname(paths[0]), exist_ok=True)
            writer, offsets = ParamsFileWriter(os.path.dirname(paths[0])), {}
    except OSError:
        return False
    try:
        table = {}
        for name, value in factory.params.items():
            offset = offsets.get(id(value))
            table[name] = (value._view(), writer.add(value._view()) if offset is None
                           else offset)
        unsealed = writer.finish(table)
    except OSError:
        writer.discard()
        return False
    snapshot = _Snapshot(factory.graph_json, factory.lib, factory.libmod_name)
    writer_thread = threading.Thread(target=_write, args=(paths, unsealed, snapshot,
                                                          dict(memory_stats)),
                                     name="relayjit-build-cache", daemon=False)
    with _writers_lock:
        _writers.append(writer_thread)
    writer_thread.start()
    return True


def flush() -> None:
    """Wait until the entries being written are on disk."""
    with _writers_lock:
        pending, _writers[:] = list(_writers), []
    for writer in pending:
        writer.join()


def _write(paths: tuple[str, str, str], unsealed: str, snapshot: _Snapshot,
           memory_stats: dict) -> None:
    """The entry: params sealed, then the stats, then the module (atomically, last: a lookup
    looks for it first); nothing left on an I/O error."""
    module_path, params_path, stats_path = paths
    try:
        digest = seal(unsealed, params_path)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=_STATS_SUFFIX,
                                   dir=os.path.dirname(module_path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"memory_stats": memory_stats, "params_digest": digest}, f)
        os.replace(tmp, stats_path)
        write_module(module_path, snapshot)  # atomic itself
    except OSError:
        _remove(unsealed, *paths)
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
        lambda path: [path[:-len(_MODULE_SUFFIX)] + suffix
                      for suffix in (_PARAMS_SUFFIX, _STATS_SUFFIX)])


def _remove(*paths: str) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
