"""The single-file module format: export_library writes it, load_module reads it back.

Layout (all integers little-endian):
    b"RELAYJIT"  uint32 format version
    5 sections, each uint64 byte length + bytes, in this order:
        graph JSON (UTF-8), params blob (save_param_dict), object code,
        metadata JSON {"function_names", "libmod_name", "triple", "cpu", "features"},
        reserved (empty)
    32-byte SHA-256 of everything before it
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile

from .factory import GraphExecutorFactoryModule
from .library import KernelLibrary
from .params import load_param_dict, save_param_dict
from .target import HostInfo, host_info, missing_features

MAGIC = b"RELAYJIT"
VERSION = 1
_NUM_SECTIONS = 5
_DIGEST = 32


def write_module(path: str | os.PathLike, factory: GraphExecutorFactoryModule) -> None:
    """Write `factory` to `path` atomically (a crash never leaves a half-written module)."""
    lib = factory.get_lib()
    meta = {
        "function_names": list(lib.function_names),
        "libmod_name": factory.libmod_name,
        **lib.host._asdict(),
    }
    sections = [
        factory.get_graph_json().encode("utf-8"),
        save_param_dict(factory.get_params()),
        lib.object_code,
        json.dumps(meta).encode("utf-8"),
        b"",
    ]
    body = MAGIC + struct.pack("<I", VERSION)
    body += b"".join(struct.pack("<Q", len(s)) + s for s in sections)
    body += hashlib.sha256(body).digest()
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_module(path: str | os.PathLike) -> GraphExecutorFactoryModule:
    """Read a module written by export_library; ValueError naming `path` when it is not one."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        graph, params_blob, obj, meta = _parse(data)
        host = HostInfo(meta["triple"], meta["cpu"], meta["features"])
        _check_host(host)
        lib = KernelLibrary(obj, meta["function_names"], host=host)
        return GraphExecutorFactoryModule(
            graph, lib, load_param_dict(params_blob), meta["libmod_name"]
        )
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a loadable relayjit module: {err}") from err


def _parse(data: bytes) -> tuple[str, bytes, bytes, dict]:
    header = len(MAGIC) + 4
    if data[: len(MAGIC)] != MAGIC:
        raise ValueError(f"bad magic {data[:len(MAGIC)]!r}, expected {MAGIC!r}")
    if len(data) < header:
        raise ValueError(f"truncated: {len(data)} bytes, header needs {header}")
    (version,) = struct.unpack_from("<I", data, len(MAGIC))
    if version != VERSION:
        raise ValueError(f"format version {version}, this runtime reads version {VERSION}")
    if len(data) < header + _DIGEST:
        raise ValueError(f"truncated: {len(data)} bytes")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
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
    graph, params_blob, obj, meta_raw, _reserved = sections
    meta = json.loads(meta_raw.decode("utf-8"))
    if not isinstance(meta, dict):
        raise ValueError("metadata section is not a JSON object")
    return graph.decode("utf-8"), params_blob, obj, meta


def _check_host(built_for: HostInfo) -> None:
    """Refuse code compiled for another target or for CPU features this host lacks."""
    here = host_info()
    if built_for.triple != here.triple:
        raise ValueError(f"compiled for {built_for.triple}, this host is {here.triple}")
    missing = missing_features(built_for.features)
    if missing:
        raise ValueError(
            f"compiled for CPU {built_for.cpu!r} with features this host lacks: {missing}"
        )
