"""The single-file module format: export_library writes it, load_module reads it back.

Layout (all integers little-endian):
    b"RELAYJIT"  uint32 format version (2)
    5 sections, each uint64 byte length + bytes, in this order:
        graph JSON (UTF-8), params blob (save_param_dict), object files,
        metadata JSON {"function_names", "libmod_name", "triple", "cpu", "features",
                       "llvm_version", "relayjit_version"},
        reserved (empty)
    32-byte SHA-256 of everything before it

The object-files section is a uint32 count (>= 1), then each object as uint64 byte length +
bytes (a kernel library holds one object per compile job). Version 1 files, whose third
section is one object file itself, still load.

A Relay VM executable is the same container with "executor": "vm" in its metadata: its first
section holds the executable's code (runtime.vm.serialize) instead of graph JSON, the params
section is empty (constants live in the code), and the object files may number zero (a
program that calls no kernel). A model with dynamic axes exported for specialisation at load
says "executor": "dynamic": its first section is the model (runtime.dynamic_module).

The triple, CPU and features are what the object code was built for (runtime.target); a host
lacking one of those features refuses the file before any of its code runs. The LLVM and
relayjit versions are informational.

This module knows the bytes only; runtime.factory turns them into a factory module (it imports
this module, never the other way round).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import struct
import tempfile
from typing import NamedTuple

import llvmlite.binding as llvm

from .library import KernelLibrary
from .params import save_param_dict
from .target import TargetInfo, best_host_baseline, host_info, missing_features

MAGIC = b"RELAYJIT"
VERSION = 2
_SINGLE_OBJECT_VERSION = 1  # the third section is one object file (no count, no lengths)
_NUM_SECTIONS = 5
_DIGEST = 32
_EXPECTED = "a relayjit module file written by export_library (or `relayjit compile`)"


class UnsupportedCPUError(ValueError):
    """A module file needs CPU features this machine lacks."""


class ModuleContents(NamedTuple):
    """The checked sections of a module file."""

    graph_json: str  # "" for a VM executable
    params_blob: memoryview  # a view into the file's bytes
    objects: tuple[bytes, ...]
    meta: dict
    target: TargetInfo
    code: bytes | None = None  # a VM executable's code (None for a graph module)


def write_module(path: str | os.PathLike, factory) -> None:
    """Write `factory` (a runtime.factory.GraphExecutorFactoryModule, whose export_library
    calls this) to `path` atomically (a crash never leaves a half-written module).

    An unwritable target is an OSError of the same kind naming `path` (not the temporary file
    it is written through).
    """
    write_sections(path, factory.get_graph_json().encode("utf-8"),
                   save_param_dict(factory.get_params()), factory.get_lib(),
                   factory.libmod_name)


def write_sections(path: str | os.PathLike, first: bytes, params_blob: bytes,
                   lib: KernelLibrary | None, libmod_name: str, extra_meta: dict | None = None
                   ) -> None:
    """Write a module file of these sections atomically (write_module's body; a VM
    executable's export gives its code as `first` and may have no kernel library)."""
    meta = {
        "function_names": list(lib.function_names) if lib is not None else [],
        "libmod_name": libmod_name,
        **(lib.target if lib is not None else host_info())._asdict(),
        "llvm_version": ".".join(map(str, llvm.llvm_version_info)),
        "relayjit_version": _relayjit_version(),
        **(extra_meta or {}),
    }
    sections = [
        first,
        params_blob,
        _pack_objects(lib.objects if lib is not None else ()),
        json.dumps(meta).encode("utf-8"),
        b"",
    ]
    body = MAGIC + struct.pack("<I", VERSION)
    body += b"".join(struct.pack("<Q", len(s)) + s for s in sections)
    body += hashlib.sha256(body).digest()
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"export_library: {path!r} is a directory; give a file path "
                                "for the module")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    except FileNotFoundError as err:
        raise FileNotFoundError(f"export_library: cannot write {path!r}: the directory "
                                f"{directory!r} does not exist") from err
    except OSError as err:
        raise type(err)(f"export_library: cannot write {path!r}: {err.strerror or err}") \
            from err
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise type(err)(f"export_library: cannot write {path!r}: "
                            f"{err.strerror or err}") from err
        raise


def read_module(path: str | os.PathLike) -> ModuleContents:
    """The checked contents of the module file at `path`.

    A missing file is a FileNotFoundError and a directory (or a file that is not a module) a
    ValueError, each naming `path` and saying what was expected.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a directory, not a module; expected {_EXPECTED}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{path}: no such file; expected {_EXPECTED}") from err
    except OSError as err:
        raise type(err)(f"{path}: cannot read the module ({err.strerror or err}); expected "
                        f"{_EXPECTED}") from err
    try:
        first, params_blob, objects, meta = _parse(data)
        target = TargetInfo(*(_string_field(meta, k) for k in TargetInfo._fields))
        _check_triple(target)
        if meta.get("executor") in ("vm", "dynamic"):
            contents = ModuleContents("", params_blob, objects, meta, target, bytes(first))
        else:
            if not objects:
                raise ValueError("object files section holds no object file")
            contents = ModuleContents(bytes(first).decode("utf-8"), params_blob, objects,
                                      meta, target)
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a loadable relayjit module: {err}") from err
    _check_features(path, target)
    return contents


def _relayjit_version() -> str:
    try:
        return importlib.metadata.version("relayjit")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "unknown"


def _string_field(meta: dict, key: str) -> str:
    value = meta[key]
    if not isinstance(value, str):
        raise TypeError(f"metadata field {key!r} must be a string, got {value!r:.60}")
    return value


def _pack_objects(objects: tuple[bytes, ...]) -> bytes:
    return struct.pack("<I", len(objects)) + b"".join(struct.pack("<Q", len(o)) + o
                                                     for o in objects)


def _unpack_objects(section: bytes) -> tuple[bytes, ...]:
    """The object files of a version-2 objects section; ValueError unless it holds exactly
    a count and that many length-prefixed objects (read_module refuses a graph module of
    none)."""
    if len(section) < 4:
        raise ValueError(f"object files section is {len(section)} bytes, its count needs 4")
    (count,) = struct.unpack_from("<I", section)
    objects, pos = [], 4
    for i in range(count):
        if pos + 8 > len(section):
            raise ValueError(f"truncated: object file {i} of {count} has no length")
        (n,) = struct.unpack_from("<Q", section, pos)
        pos += 8
        if pos + n > len(section):
            raise ValueError(f"truncated: object file {i} of {count} needs {n} bytes, "
                             f"{len(section) - pos} remain")
        objects.append(section[pos:pos + n])
        pos += n
    if pos != len(section):
        raise ValueError(f"{len(section) - pos} unexpected bytes after object file "
                         f"{count - 1} of {count}")
    return tuple(objects)


def _parse(data: bytes) -> tuple[memoryview, memoryview, tuple[bytes, ...], dict]:
    header = len(MAGIC) + 4
    if data[: len(MAGIC)] != MAGIC:
        raise ValueError(f"bad magic {data[:len(MAGIC)]!r}, expected {MAGIC!r}")
    if len(data) < header:
        raise ValueError(f"truncated: {len(data)} bytes, header needs {header}")
    (version,) = struct.unpack_from("<I", data, len(MAGIC))
    if version not in (_SINGLE_OBJECT_VERSION, VERSION):
        raise ValueError(f"format version {version}, this runtime reads versions "
                         f"{_SINGLE_OBJECT_VERSION} and {VERSION}")
    if len(data) < header + _DIGEST:
        raise ValueError(f"truncated: {len(data)} bytes")
    # views, not copies: a ResNet-50 file is 100 MB of params (load_param_dict copies them
    # once, into aligned storage)
    body, digest = memoryview(data)[:-_DIGEST], data[-_DIGEST:]
    pos, sections = header, []
    for i in range(_NUM_SECTIONS):
        if pos + 8 > len(body):
            raise ValueError(f"truncated: section {i} length missing")
        (n,) = struct.unpack_from("<Q", body, pos)
        pos += 8
        if pos + n > len(body):
            raise ValueError(f"truncated: section {i} needs {n} bytes, {len(body) - pos} remain")
        sections.append(body[pos : pos + n])
        pos += n
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} unexpected bytes after the last section")
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch: the file is corrupted")
    graph, params_blob, objects, meta_raw, _reserved = sections
    meta = json.loads(bytes(meta_raw).decode("utf-8"))
    if not isinstance(meta, dict):
        raise ValueError("metadata section is not a JSON object")
    objects = bytes(objects)
    objects = (objects,) if version == _SINGLE_OBJECT_VERSION else _unpack_objects(objects)
    return graph, params_blob, objects, meta


def _check_triple(built_for: TargetInfo) -> None:
    here = host_info()
    if built_for.triple != here.triple:
        raise ValueError(f"compiled for {built_for.triple}, this host is {here.triple}")


def _check_features(path: str, built_for: TargetInfo) -> None:
    """Refuse code that may use CPU features this host lacks (it would die of SIGILL)."""
    missing = missing_features(built_for.features)
    if missing:
        baseline = best_host_baseline()
        rebuild = f"llvm -mcpu={baseline}" if baseline else "llvm"
        raise UnsupportedCPUError(
            f"{path}: built for CPU {built_for.cpu!r} with features this machine's CPU "
            f"({host_info().cpu}) lacks: {', '.join(missing)}; rebuild it with "
            f"target=\"{rebuild}\" (`relayjit compile --target \"{rebuild}\"`) to run here")
