"""Persistent on-disk compile cache: object code of a kernel set, reused across processes.

Key: sha256 of the kernels' name-free structural key (codegen.tir.structural, which already
includes the opt level), the build's target triple, CPU name and feature string (runtime.target),
the llvmlite and LLVM versions, and the codegen version (CODEGEN_VERSION plus a digest of the source files that
turn TIR into machine code, so an edit to the emitter never reuses stale code).

Entry: one file `<key[:2]>/<key>.rjc` under the cache directory:

    MAGIC | u32 header length | header JSON | object files | optimised bitcodes | sha256(all before)

The header records the kernel names and the byte length of each object file and each bitcode:
a kernel set compiled by several jobs is several objects, each with the optimised bitcode it
was emitted from. A micro-kernel's entry holds its object and optimised bitcode
(codegen.microkernel_objects). A lookup under other kernel names (same structure)
renames the functions in the bitcode and re-runs only machine-code emission. The file is
untrusted input: MAGIC carries the format version, and the lengths must be whole numbers that
add up to the body exactly.
Entries are written to a temporary file in the same directory and moved into place with
os.replace, so readers never see half an entry; a truncated or corrupted entry (bad magic,
lengths or checksum) is ignored, removed and recompiled, never trusted.

Location: $RELAYJIT_CACHE_DIR, default ~/.cache/relayjit; RELAYJIT_CACHE_DIR="" disables the
cache, as does `with codegen.cache.disabled():` (relay.build uses it for the PassContext config
`relayjit.disable_disk_cache`). Size: after writes the oldest entries (by last use) are pruned
down to $RELAYJIT_CACHE_MAX_MB (default 1024).

Also here: `remember`, the bound the in-process caches in front of this one keep (codegen.jit's
kernel sets, codegen.microkernel_objects' micro-kernels).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import struct
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from typing import NamedTuple

from runtime.target import TargetInfo

__all__ = ["CODEGEN_VERSION", "cache_dir", "enabled", "disabled", "lookup", "store",
           "disk_cache_stats", "reset_disk_cache_stats", "entry_path", "environment_key",
           "remember"]

# Bump when the meaning of an entry changes in a way the source digest cannot see.
CODEGEN_VERSION = "1"
MAGIC = b"RELAYJIT-OBJCACHE-2\n"  # the format version is part of the magic
_SUFFIX = ".rjc"
# Sources whose edits change the machine code produced for the same TIR.
_CODEGEN_SOURCES = ("llvm", "jit.py", "optimise.py", "compile_objects.py",
                    "microkernel_objects.py", "kernel_families.py", "cache.py",
                    os.path.join("tir", "structural.py"))
_PRUNE_EVERY = 16  # writes between directory size checks

_disabled: ContextVar[bool] = ContextVar("relayjit_disk_cache_disabled", default=False)
_lock = threading.Lock()
_STATS = {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "errors": 0}
_writes_since_prune = 0


class Entry(NamedTuple):
    """A kernel set's object files and the optimised bitcode of each (a micro-kernel: no
    object, one bitcode)."""

    names: tuple[str, ...]
    objects: tuple[bytes, ...]
    bitcodes: tuple[bytes, ...]


MEMORY_ENTRIES = 256  # entries an in-process cache keeps


def remember(cache: OrderedDict, key, value) -> None:
    """Store in an in-process cache, dropping its oldest entries beyond MEMORY_ENTRIES (the
    caller holds the lock guarding `cache`)."""
    cache[key] = value
    while len(cache) > MEMORY_ENTRIES:
        cache.popitem(last=False)


def cache_dir() -> str | None:
    """The cache directory, or None when the disk cache is off (RELAYJIT_CACHE_DIR="")."""
    value = os.environ.get("RELAYJIT_CACHE_DIR")
    if value is None:
        return os.path.join(os.path.expanduser("~"), ".cache", "relayjit")
    return value or None


def enabled() -> bool:
    return not _disabled.get() and cache_dir() is not None


@contextlib.contextmanager
def disabled(flag: bool = True):
    """Within this block (this thread/context) the disk cache is neither read nor written."""
    token = _disabled.set(bool(flag) or _disabled.get())
    try:
        yield
    finally:
        _disabled.reset(token)


@functools.lru_cache(maxsize=1)
def _codegen_digest() -> str:
    root = os.path.dirname(os.path.abspath(__file__))
    files: list[str] = []
    for rel in _CODEGEN_SOURCES:
        path = os.path.join(root, rel)
        if os.path.isdir(path):
            files.extend(os.path.join(path, n) for n in sorted(os.listdir(path))
                         if n.endswith(".py"))
        else:
            files.append(path)
    h = hashlib.sha256(CODEGEN_VERSION.encode())
    for path in files:
        h.update(os.path.relpath(path, root).encode() + b"\0")
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def environment_key(target: TargetInfo) -> str:
    """Everything besides the kernels that decides the object code for `target`."""
    import llvmlite
    import llvmlite.binding as llvm

    parts = [target.triple, target.cpu, target.features, llvmlite.__version__,
             ".".join(map(str, llvm.llvm_version_info)), _codegen_digest()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _file_key(structural_key: str, target: TargetInfo) -> str:
    env = environment_key(target)
    return hashlib.sha256(f"{structural_key}\0{env}".encode()).hexdigest()


def entry_path(structural_key: str, target: TargetInfo) -> str | None:
    """Where the entry for a kernel set's structural key, built for `target`, lives (None
    when disabled)."""
    root = cache_dir()
    if root is None:
        return None
    key = _file_key(structural_key, target)
    return os.path.join(root, key[:2], key + _SUFFIX)


def _count(what: str) -> None:
    with _lock:
        _STATS[what] += 1


def disk_cache_stats() -> dict[str, int]:
    """Counts in this process: hits, misses, writes, corrupt entries dropped, I/O errors."""
    with _lock:
        return dict(_STATS)


def reset_disk_cache_stats() -> None:
    with _lock:
        for k in _STATS:
            _STATS[k] = 0


# ---- entries --------------------------------------------------------------------------------

def _encode(entry: Entry) -> bytes:
    header = json.dumps({"names": list(entry.names),
                         "objects": [len(o) for o in entry.objects],
                         "bitcodes": [len(b) for b in entry.bitcodes]}).encode()
    body = (MAGIC + struct.pack("<I", len(header)) + header + b"".join(entry.objects)
            + b"".join(entry.bitcodes))
    return body + hashlib.sha256(body).digest()


def _lengths(value: object) -> list[int] | None:
    """value as a list of byte lengths (whole numbers >= 0), else None."""
    if not isinstance(value, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
        return None
    return value


def _split(data: bytes, start: int, lengths: list[int]) -> tuple[tuple[bytes, ...], int]:
    parts = []
    for n in lengths:
        parts.append(data[start:start + n])
        start += n
    return tuple(parts), start


def _decode(data: bytes) -> Entry | None:
    """The entry in data, or None if anything about it is off."""
    n = len(MAGIC)
    if len(data) < n + 4 + 32 or not data.startswith(MAGIC):
        return None
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        return None
    (hlen,) = struct.unpack_from("<I", body, n)
    start = n + 4 + hlen
    if start > len(body):
        return None
    try:
        header = json.loads(body[n + 4:start].decode())
        names = header["names"]
        object_lengths, bitcode_lengths = header["objects"], header["bitcodes"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    object_lengths, bitcode_lengths = _lengths(object_lengths), _lengths(bitcode_lengths)
    if object_lengths is None or bitcode_lengths is None or not isinstance(names, list) \
            or not all(isinstance(x, str) and x for x in names) \
            or not object_lengths + bitcode_lengths \
            or start + sum(object_lengths) + sum(bitcode_lengths) != len(body):
        return None
    objects, at = _split(body, start, object_lengths)
    bitcodes, _ = _split(body, at, bitcode_lengths)
    return Entry(tuple(names), objects, bitcodes)


def lookup(structural_key: str, target: TargetInfo) -> Entry | None:
    """The stored entry for this kernel set built for `target`, or None (missing, unreadable
    or corrupted)."""
    if not enabled():
        return None
    path = entry_path(structural_key, target)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        _count("misses")
        return None
    except OSError:
        _count("errors")
        return None
    entry = _decode(data)
    if entry is None:
        _count("corrupt")
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # last use, for pruning
    _count("hits")
    return entry


def store(structural_key: str, entry: Entry, target: TargetInfo) -> bool:
    """Write the entry (built for `target`) atomically; False (and nothing left behind) on
    any I/O problem."""
    global _writes_since_prune
    if not enabled():
        return False
    path = entry_path(structural_key, target)
    directory = os.path.dirname(path)
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=_SUFFIX, dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(_encode(entry))
        os.replace(tmp, path)
        tmp = None
    except OSError:
        _count("errors")
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _count("writes")
    with _lock:
        _writes_since_prune += 1
        prune_now = _writes_since_prune >= _PRUNE_EVERY
        if prune_now:
            _writes_since_prune = 0
    if prune_now:
        prune()
    return True


def prune(max_bytes: int | None = None) -> int:
    """Remove least recently used entries until the cache fits; returns how many went."""
    root = cache_dir()
    if root is None:
        return 0
    return prune_lru(root, _SUFFIX, max_bytes if max_bytes is not None else
                     size_limit("RELAYJIT_CACHE_MAX_MB", 1024))


def size_limit(variable: str, default_mb: int) -> int:
    """Bytes from environment variable `variable` (in MB; default_mb when unset or bad)."""
    try:
        return int(float(os.environ.get(variable, str(default_mb))) * 2 ** 20)
    except ValueError:
        return default_mb * 2 ** 20


def prune_lru(root: str, suffix: str, max_bytes: int,
              also_remove: Callable[[str], list[str]] = lambda path: []) -> int:
    """Remove the least recently used (by mtime) `suffix` files in root's subdirectories
    until they total at most max_bytes, with also_remove(path)'s companions (whose sizes
    count with their file's); how many went."""
    if not os.path.isdir(root):
        return 0
    files = []
    for sub in os.scandir(root):
        if not sub.is_dir(follow_symlinks=False):
            continue
        for e in os.scandir(sub.path):
            if e.name.endswith(suffix) and not e.name.startswith(".tmp-"):
                with contextlib.suppress(OSError):
                    st = e.stat()
                    files.append((st.st_mtime, st.st_size + _sizes(also_remove(e.path)),
                                  e.path))
    total = sum(size for _, size, _ in files)
    removed = 0
    for _, size, path in sorted(files):
        if total <= max_bytes:
            break
        for victim in (path, *also_remove(path)):
            with contextlib.suppress(OSError):
                os.unlink(victim)
        total -= size
        removed += 1
    return removed


def _sizes(paths: list[str]) -> int:
    """Total size of the files in `paths` that exist."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += os.path.getsize(path)
    return total
