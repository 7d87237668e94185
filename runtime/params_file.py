"""Params in a file laid out for memory mapping: a build-cache hit maps them, copying nothing.

TVM's params blob (runtime.params) packs arrays back to back at unaligned offsets, so a
reader copies every array out into aligned storage: AlexNet's 250 MB cost a read, a
checksum and a copy, 0.33 s of a 0.53 s warm rebuild. This file puts each array on a
64-byte boundary of a page-aligned data region, so the arrays are views of a private
(copy-on-write) mapping of the file; the one pass left is the digest check.

Layout (integers little-endian):
    b"RJPARAMS"  32-byte content digest  uint64 data length  uint64 header length
    zero padding to PAGE bytes, the data region, then the header (JSON)

The header is {"arrays": [[name, dtype, shape, offset, nbytes], ...]}, offsets relative to
the data region; it comes last so that arrays can be written as they become known, before
their names are (relay.build writes the folded weights while LLVM compiles). The digest
(runtime.digest.content_digest) covers the data region and the header, so a damaged file is
refused before any array is handed out. Writing is two steps: a ParamsFileWriter writes the
arrays and the header to a temporary file (the snapshot: no copy in memory), seal() digests
that file and moves it into place (a background thread may do it; until then the path does
not exist).
"""
from __future__ import annotations

import contextlib
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

__all__ = ["ParamsFileWriter", "write_unsealed", "seal", "map_params"]

MAGIC = b"RJPARAMS"
PAGE = 4096
_DIGEST_AT = len(MAGIC)
_PREFIX = len(MAGIC) + 32 + 16
_MAX_HEADER = 64 * 2**20
_EXPECTED = "a params file written by runtime.params_file"


class ParamsFileWriter:
    """A params file being written: add() appends an array (64-byte aligned) and says where
    it went, finish() names the arrays; then seal() it. OSError when the disk refuses."""

    def __init__(self, directory: str) -> None:
        fd, self.path = tempfile.mkstemp(prefix=".tmp-", suffix=".params", dir=directory)
        self._file = os.fdopen(fd, "wb")
        self._end = 0  # bytes of data written
        try:
            self._file.write(bytes(PAGE))
        except BaseException:
            self.discard()
            raise

    def add(self, value: np.ndarray) -> int:
        """Append `value` (C-contiguous); its offset in the data region."""
        if not value.flags.c_contiguous:
            raise ValueError(f"params file: arrays must be C-contiguous, got a {value.shape} "
                             "view")
        offset = -(-self._end // ALIGNMENT) * ALIGNMENT
        self._file.write(bytes(offset - self._end))
        if value.nbytes:
            self._file.write(memoryview(value).cast("B"))
        self._end = offset + value.nbytes
        return offset

    def finish(self, table: Mapping[str, tuple[np.ndarray, int]]) -> str:
        """Write the header naming the arrays ({name: (array, offset add() gave)}) and close;
        the temporary file's path, for seal()."""
        entries = [[name, dtype_name(value.dtype), list(value.shape), offset, value.nbytes]
                   for name, (value, offset) in table.items()]
        header = json.dumps({"arrays": entries}).encode("utf-8")
        try:
            self._file.write(header)
            self._file.seek(0)
            self._file.write(MAGIC + bytes(32) + struct.pack("<QQ", self._end, len(header)))
            self._file.close()
        except BaseException:
            self.discard()
            raise
        return self.path

    def discard(self) -> None:
        """Remove the temporary file."""
        self._file.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def write_unsealed(directory: str, params: Mapping[str, np.ndarray]) -> str:
    """Write `params` (C-contiguous arrays) to a new temporary file in `directory`, digest not
    yet set; its path. OSError (nothing left behind) when the disk refuses."""
    writer = ParamsFileWriter(directory)
    try:
        table = {name: (value, writer.add(value)) for name, value in params.items()}
    except BaseException:
        writer.discard()
        raise
    return writer.finish(table)


def _sections(view: memoryview) -> tuple[str, memoryview, bytes]:
    """(recorded digest, data region, header) of a whole file; ValueError unless the sizes
    in its prefix add up to the file's."""
    if len(view) < _PREFIX:
        raise ValueError(f"truncated: {len(view)} bytes, the prefix needs {_PREFIX}")
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise ValueError(f"bad magic {bytes(view[:len(MAGIC)])!r}, expected {MAGIC!r}")
    digest = bytes(view[_DIGEST_AT:_DIGEST_AT + 32]).hex()
    data_len, header_len = struct.unpack_from("<QQ", view, _PREFIX - 16)
    if header_len > _MAX_HEADER or PAGE + data_len + header_len != len(view):
        raise ValueError(f"truncated or padded: {data_len} bytes of data and {header_len} of "
                         f"header need a {PAGE + data_len + header_len}-byte file, it has "
                         f"{len(view)}")
    return (digest, view[PAGE:PAGE + data_len],
            bytes(view[PAGE + data_len:PAGE + data_len + header_len]))


def seal(tmp: str, path: str) -> str:
    """Digest the unsealed file `tmp`, record the digest in it and move it to `path`; the
    digest (hex). OSError when the disk refuses (tmp is then removed)."""
    try:
        with open(tmp, "r+b") as f:
            with _mapped(f, os.fstat(f.fileno()).st_size) as view:
                _, data, header = _sections(view)
                try:
                    digest = content_digest([data], header)
                finally:
                    data.release()
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
                raise ValueError(f"truncated: {size} bytes, the prefix needs {_PREFIX}")
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
        digest, data, header = _sections(view)
        try:
            if content_digest([data], header) != digest:
                raise ValueError("checksum mismatch: the file is corrupted")
            layout = _layout(header, len(data))
        finally:
            data.release()
        if expected_digest is not None and digest != expected_digest:
            raise ValueError(f"digest {digest[:16]}..., expected {expected_digest[:16]}... "
                             "(the params of another build)")
    finally:
        view.release()
    return {name: np.frombuffer(mapping, dtype=dtype, count=math.prod(shape),
                                offset=PAGE + offset).reshape(shape)
            for name, dtype, shape, offset in layout}


def _layout(header: bytes, data_len: int) -> list[tuple[str, np.dtype, tuple, int]]:
    """The checked array table: names unique, dtypes known, sizes matching shapes, offsets
    aligned and inside the data region (arrays may share bytes: the views are private)."""
    table = json.loads(header.decode("utf-8"))
    if not isinstance(table, dict) or not isinstance(table.get("arrays"), list):
        raise ValueError("header is not a JSON object with an 'arrays' list")
    layout, names = [], set()
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
        if offset < 0 or offset % ALIGNMENT:
            raise ValueError(f"array {name!r}: offset {offset} is not a {ALIGNMENT}-aligned "
                             "place in the data region")
        if offset + nbytes > data_len:
            raise ValueError(f"array {name!r}: bytes {offset}..{offset + nbytes} are not "
                             f"inside the {data_len}-byte data region")
        layout.append((name, dtype, tuple(shape), offset))
    return layout
