"""Params blobs in TVM's exact binary layout, so blobs move between TVM and this runtime."""
from __future__ import annotations

import math
import struct
from collections.abc import Mapping

import numpy as np

from .device import K_DL_CPU
from .dtypes import from_dl, numpy_dtype, to_dl
from .ndarray import NDArray, array

NDARRAY_LIST_MAGIC = 0xF7E58D4F05049CB7
NDARRAY_MAGIC = 0xDD5E40F096B4A13F
_MAX_NDIM = 64


def save_param_dict(params: Mapping[str, NDArray | np.ndarray]) -> bytes:
    """Serialise name -> array as TVM's SaveParams does (little-endian)."""
    names = list(params)
    out = [struct.pack("<QQQ", NDARRAY_LIST_MAGIC, 0, len(names))]
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"param names must be str, got {type(name).__name__} {name!r}")
        raw = name.encode("utf-8")
        out.append(struct.pack("<Q", len(raw)) + raw)
    out.append(struct.pack("<Q", len(names)))
    for name in names:
        out.append(_save_tensor(name, params[name]))
    return b"".join(out)


def _save_tensor(name: str, value: NDArray | np.ndarray) -> bytes:
    data = value.numpy() if isinstance(value, NDArray) else array(value).numpy()
    dl = to_dl(data.dtype.name)
    data = np.asarray(data, dtype=numpy_dtype(data.dtype.name), order="C")
    head = struct.pack("<QQiii", NDARRAY_MAGIC, 0, K_DL_CPU, 0, data.ndim)
    head += struct.pack("<BBH", dl.code, dl.bits, dl.lanes)
    head += struct.pack(f"<{data.ndim}q", *data.shape)
    return head + struct.pack("<q", data.nbytes) + data.tobytes()


class _Reader:
    """Bounds-checked cursor over a blob, so a bad blob is a ValueError rather than a crash."""

    def __init__(self, blob: bytes | bytearray | memoryview) -> None:
        self.blob = memoryview(blob).cast("B")  # no copy: arrays are copied out one by one
        self.pos = 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.blob):
            raise ValueError(
                f"params blob truncated or corrupted: {what} needs {n} bytes at offset "
                f"{self.pos}, blob has {len(self.blob)}"
            )
        chunk = self.blob[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def load_param_dict(blob: bytes | bytearray | memoryview) -> dict[str, NDArray]:
    """Parse a TVM params blob; ValueError names what is wrong when the blob is not one."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_param_dict expects bytes, got {type(blob).__name__}")
    r = _Reader(blob)
    magic, _reserved = r.unpack("QQ", "header")
    if magic != NDARRAY_LIST_MAGIC:
        raise ValueError(
            f"not a params blob: magic {magic:#018x}, expected {NDARRAY_LIST_MAGIC:#018x}"
        )
    (num_names,) = r.unpack("Q", "name count")
    names = []
    for i in range(_bounded(num_names, r, 8, "name count")):
        (length,) = r.unpack("Q", f"length of name {i}")
        try:
            names.append(bytes(r.take(length, f"name {i}")).decode("utf-8"))
        except UnicodeDecodeError as err:
            raise ValueError(f"params blob corrupted: name {i} is not UTF-8") from err
    (num_arrays,) = r.unpack("Q", "array count")
    if num_arrays != num_names:
        raise ValueError(f"params blob corrupted: {num_names} names but {num_arrays} arrays")
    if len(set(names)) != len(names):
        raise ValueError(f"params blob corrupted: duplicate names in {names}")
    params = {name: _load_tensor(r, name) for name in names}
    if r.pos != len(r.blob):
        raise ValueError(
            f"params blob corrupted: {len(r.blob) - r.pos} trailing bytes after the last array"
        )
    return params


def save_ndarray(value: NDArray | np.ndarray) -> bytes:
    """One array in TVM's NDArray binary layout (load_ndarray reads it)."""
    return _save_tensor("array", value)


def load_ndarray(blob: bytes | bytearray | memoryview, name: str = "array") -> NDArray:
    """One array in TVM's NDArray binary layout (as in a params blob, or base64 in TVM's
    JSON "b64ndarrays"); ValueError when the bytes are not exactly one array."""
    r = _Reader(blob)
    value = _load_tensor(r, name)
    if r.pos != len(r.blob):
        raise ValueError(f"{name}: {len(r.blob) - r.pos} trailing bytes after the array")
    return value


def _bounded(count: int, r: _Reader, min_item: int, what: str) -> int:
    """Reject counts the remaining bytes cannot possibly hold (before looping over them)."""
    if count * min_item > len(r.blob) - r.pos:
        raise ValueError(f"params blob truncated or corrupted: {what} {count} does not fit")
    return count


def _load_tensor(r: _Reader, name: str) -> NDArray:
    magic, _reserved, dev_type, _dev_id, ndim = r.unpack("QQiii", f"header of {name!r}")
    if magic != NDARRAY_MAGIC:
        raise ValueError(
            f"params blob corrupted: array {name!r} magic {magic:#018x}, "
            f"expected {NDARRAY_MAGIC:#018x}"
        )
    if dev_type != K_DL_CPU:
        raise ValueError(f"array {name!r}: device_type {dev_type}, expected {K_DL_CPU} (cpu)")
    if not 0 <= ndim <= _MAX_NDIM:
        raise ValueError(f"params blob corrupted: array {name!r} has ndim {ndim}")
    code, bits, lanes = r.unpack("BBH", f"dtype of {name!r}")
    dtype = numpy_dtype(from_dl(code, bits, lanes))
    shape = r.unpack(f"{ndim}q", f"shape of {name!r}")
    if any(d < 0 for d in shape):
        raise ValueError(f"params blob corrupted: array {name!r} has shape {shape}")
    (nbytes,) = r.unpack("q", f"data size of {name!r}")
    expected = math.prod(shape) * dtype.itemsize
    if nbytes != expected:
        raise ValueError(
            f"params blob corrupted: array {name!r} {shape} {dtype.name} needs {expected} "
            f"bytes, header says {nbytes}"
        )
    data = np.frombuffer(r.take(nbytes, f"data of {name!r}"), dtype=dtype).reshape(shape)
    return array(data)
