"""Aligned host storage: kernels may use aligned vector loads, so buffers start on 64 bytes."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALIGNMENT = 64


def aligned_bytes(nbytes: int, alignment: int = ALIGNMENT) -> np.ndarray:
    """A zeroed uint8 buffer of `nbytes` whose first byte sits on an `alignment` boundary."""
    if nbytes < 0:
        raise ValueError(f"buffer size must be >= 0, got {nbytes}")
    raw = np.zeros(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + nbytes]


def aligned_empty(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A zeroed, C-contiguous, 64-byte-aligned array of `shape` and `dtype`."""
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"shape dimensions must be >= 0, got {shape}")
    count = int(np.prod(shape, dtype=np.int64))
    return view_as(aligned_bytes(count * dtype.itemsize), shape, dtype)


def view_as(buffer: np.ndarray, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """View the leading bytes of a uint8 `buffer` as a C-contiguous array of `shape`/`dtype`."""
    shape = tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes > buffer.nbytes:
        raise ValueError(f"buffer of {buffer.nbytes} bytes cannot hold {shape} {dtype.name}")
    return buffer[:nbytes].view(dtype).reshape(shape)


def is_aligned(array: np.ndarray, alignment: int = ALIGNMENT) -> bool:
    """True when `array`'s data starts on an `alignment` boundary."""
    return array.ctypes.data % alignment == 0
