"""Params in a file laid out for memory mapping: a build-cache hit maps them, copying nothing.

TVM's params blob (runtime.params) packs arrays back to back at unaligned offsets, so a
reader copies every array out into aligned storage: AlexNet's 250 MB cost a read, a
checksum and a copy, 0.33 s of a 0.53 s warm rebuild. This file puts each array on a
64-byte boundary of a page-aligned data region, so the arrays are views of a private
(copy-on-write) mapping of the file; the one pass left is the digest check.

Layout (integers little-endian):
    b"RJPARAMS"  32-byte content digest  uint64 header length  header (JSON)
    zero padding to a multiple of PAGE, then the data region

The header is {"arrays": [[name, dtype, shape, offset, nbytes], ...]}, offsets relative to
the data region, increasing. The digest (runtime.digest.content_digest) covers the header
and the whole data region, so a damaged file is refused before any array is handed out.
Writing is two steps: write_unsealed() writes the arrays to a temporary file (the caller's
thread: this is the snapshot, no copy in memory), seal() digests that file and moves it into
place (a background thread may do it; until then the path does not exist).
"""
from __future__ import annotations

import json
import math
import mmap
import os
import struct
import tempfile
from collections.abc import Mapping

import numpy as np

from .digest import content_digest
from .dtypes import dtype_name, numpy_dtype
from .memory import ALIGNMENT

__all__ = ["write_unsealed", "seal", "map_params"]

MAGIC = b"RJPARAMS"
PAGE = 4096
_DIGEST_AT = len(MAGIC)
_PREFIX = len(MAGIC) + 32 + 8
_MAX_HEADER = 64 * 2**20
_EXPECTED = "a params file written by runtime.params_file"


def _data_start(header_len: int) -> int:
    return -(-(_PREFIX + header_len) // PAGE) * PAGE


def write_unsealed(directory: str, params: Mapping[str, np.ndarray]) -> str:
    """Write `params` (C-contiguous arrays) to a new temporary file in `directory`, digest not
    yet set; its path. OSError (nothing left behind) when the disk refuses."""
    entries, offset = [], 0
    for name, value in params.items():
        if not value.flags.c_contiguous:
            raise ValueError(f"param {name!r} is not C-contiguous")
        offset = -(-offset // ALIGNMENT) * ALIGNMENT
        entries.append([name, dtype_name(value.dtype), list(value.shape), offset, value.nbytes])
        offset += value.nbytes
    header = json.dumps({"arrays": entries}).encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".params", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + bytes(32) + struct.pack("<Q", len(header)) + header)
            start = _data_start(len(header))
            f.write(bytes(start - f.tell()))
            for (_, _, _, at, _), value in zip(entries, params.values()):
                f.write(bytes(start + at - f.tell()))
                if value.nbytes:
                    f.write(memoryview(value).cast("B"))
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def seal(tmp: str, path: str) -> str:
    """Digest the unsealed file `tmp`, record the digest in it and move it to `path`; the
    digest (hex). OSError when the disk refuses (tmp is then removed)."""
    try:
        with open(tmp, "r+b") as f:
            f.seek(len(MAGIC) + 32)
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = f.read(header_len)
            start = _data_start(header_len)
            size = os.fstat(f.fileno()).st_size
            with _mapped(f, size) as data:
                digest = content_digest([data[start:]], header)
            f.seek(_DIGEST_AT)
            f.write(bytes.fromhex(digest))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return digest


class _mapped:
    """A read-only mapping of an open file as a memoryview (empty files map to b"")."""

    def __init__(self, f, size: int):
        self.map = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else None

    def __enter__(self) -> memoryview:
        self.view = memoryview(self.map) if self.map is not None else memoryview(b"")
        return self.view

    def __exit__(self, *exc) -> None:
        self.view.release()
        if self.map is not None:
            self.map.close()


def map_params(path: str, expected_digest: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of the params file at `path`, as writeable 64-byte-aligned views of a private
    mapping (writes stay in this process). ValueError naming `path` when the file is not one,
    is damaged, or its digest is not `expected_digest` (when given)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _PREFIX:
                raise ValueError(f"truncated: {size} bytes, the header needs {_PREFIX}")
            mapping = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{path}: no such file; expected {_EXPECTED}") from err
    except ValueError as err:
        raise ValueError(f"{path}: not {_EXPECTED}: {err}") from err
    try:
        return _arrays(mapping, expected_digest)
    except (ValueError, TypeError, KeyError) as err:
        mapping.close()
        raise ValueError(f"{path}: not {_EXPECTED}: {err}") from err


def _arrays(mapping: mmap.mmap, expected_digest: str | None) -> dict[str, np.ndarray]:
    view = memoryview(mapping)
    try:
        if bytes(view[:len(MAGIC)]) != MAGIC:
            raise ValueError(f"bad magic {bytes(view[:len(MAGIC)])!r}, expected {MAGIC!r}")
        digest = bytes(view[_DIGEST_AT:_DIGEST_AT + 32]).hex()
        (header_len,) = struct.unpack_from("<Q", view, _PREFIX - 8)
        if header_len > min(_MAX_HEADER, len(view) - _PREFIX):
            raise ValueError(f"truncated: header of {header_len} bytes, the file has "
                             f"{len(view)}")
        header = bytes(view[_PREFIX:_PREFIX + header_len])
        start = _data_start(header_len)
        if start > len(view):
            raise ValueError(f"truncated: data starts at {start}, the file has {len(view)}")
        if content_digest([view[start:]], header) != digest:
            raise ValueError("checksum mismatch: the file is corrupted")
        if expected_digest is not None and digest != expected_digest:
            raise ValueError(f"digest {digest[:16]}..., expected {expected_digest[:16]}... "
                             "(the params of another build)")
        layout = _layout(header, len(view) - start)
    finally:
        view.release()
    return {name: np.frombuffer(mapping, dtype=dtype, count=math.prod(shape),
                                offset=start + offset).reshape(shape)
            for name, dtype, shape, offset in layout}


def _layout(header: bytes, data_len: int) -> list[tuple[str, np.dtype, tuple, int]]:
    """The checked array table: names unique, dtypes known, sizes matching shapes, offsets
    aligned, increasing and inside the data region."""
    table = json.loads(header.decode("utf-8"))
    if not isinstance(table, dict) or not isinstance(table.get("arrays"), list):
        raise ValueError("header is not a JSON object with an 'arrays' list")
    layout, names, end = [], set(), 0
    for entry in table["arrays"]:
        if not (isinstance(entry, list) and len(entry) == 5):
            raise ValueError(f"array entry {entry!r:.80} is not [name, dtype, shape, offset, "
                             "nbytes]")
        name, dtype, shape, offset, nbytes = entry
        if not isinstance(name, str) or name in names:
            raise ValueError(f"array name {name!r:.80} is not a new string")
        names.add(name)
        dtype = numpy_dtype(dtype_name(dtype)) if isinstance(dtype, str) else None
        if dtype is None:
            raise ValueError(f"array {name!r}: dtype {entry[1]!r:.40} is not a dtype name")
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
            raise ValueError(f"array {name!r}: shape {shape!r:.80} is not a list of sizes")
        if not all(type(v) is int for v in (offset, nbytes)):
            raise ValueError(f"array {name!r}: offset and size must be integers")
        if nbytes != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"array {name!r} {tuple(shape)} {dtype.name} needs "
                             f"{math.prod(shape) * dtype.itemsize} bytes, header says {nbytes}")
        if offset % ALIGNMENT:
            raise ValueError(f"array {name!r}: offset {offset} is not {ALIGNMENT}-aligned")
        if offset < end:
            raise ValueError(f"array {name!r}: offset {offset} overlaps the previous array "
                             f"(which ends at {end})")
        if offset + nbytes > data_len:
            raise ValueError(f"array {name!r}: bytes {offset}..{offset + nbytes} are not "
                             f"inside the {data_len}-byte data region")
        end = offset + nbytes
        layout.append((name, dtype, tuple(shape), offset))
    return layout
