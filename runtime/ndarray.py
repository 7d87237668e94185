"""NDArray: a host tensor in 64-byte-aligned, C-contiguous storage that kernels can use directly."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .device import Device, cpu, device
from .dtypes import dtype_name, numpy_dtype
from .memory import aligned_empty, is_aligned

__all__ = ["NDArray", "Device", "array", "empty", "cpu", "device"]


_CPU = cpu(0)


class NDArray:
    """A tensor whose storage kernels may read and write through `data_ptr`."""

    __slots__ = ("_data", "_device")

    def __init__(self, data: np.ndarray, device: Device | None = None) -> None:
        if not isinstance(data, np.ndarray):
            raise TypeError(f"NDArray wraps a numpy.ndarray, got {type(data).__name__}")
        dtype_name(data.dtype)
        usable = (
            data.flags.c_contiguous
            and data.flags.writeable
            and data.dtype.isnative
            and is_aligned(data)
        )
        if not usable:  # copy into storage kernels can use; views of aligned storage are kept
            copy = aligned_empty(data.shape, numpy_dtype(data.dtype.name))
            np.copyto(copy, data)
            data = copy
        self._data = data
        self._device = device if device is not None else cpu(0)

    @classmethod
    def _wrap(cls, data: np.ndarray, device: Device | None = None) -> NDArray:
        """An NDArray over the runtime's own buffer (aligned, C-contiguous, native, writable:
        what the constructor would keep as it is), without the constructor's checks."""
        obj = cls.__new__(cls)
        obj._data = data
        obj._device = device if device is not None else _CPU
        return obj

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""
        return self._data.shape

    @property
    def dtype(self) -> str:
        """The dtype name, e.g. "float32"."""
        return self._data.dtype.name

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    @property
    def device(self) -> Device:
        """Where the storage lives (always the host CPU)."""
        return self._device

    @property
    def data_ptr(self) -> int:
        """Address of the first element (64-byte aligned)."""
        return self._data.ctypes.data

    @property
    def nbytes(self) -> int:
        """Size of the storage in bytes."""
        return self._data.nbytes

    def numpy(self) -> np.ndarray:
        """A numpy copy, so later kernel writes do not change what the caller holds."""
        return self._data.copy()

    asnumpy = numpy

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self._data.copy()
        return out if dtype is None else out.astype(dtype)

    def copyfrom(self, source: NDArray | np.ndarray | Any) -> NDArray:
        """Copy `source` into this storage; shape and dtype must match exactly."""
        if isinstance(source, NDArray):
            source = source._data
        elif not isinstance(source, np.ndarray):
            source = np.asarray(source, dtype=self._data.dtype)
        if source.shape != self.shape:
            raise ValueError(
                f"copyfrom: shape mismatch, expected {self.shape} {self.dtype}, "
                f"got {source.shape} {source.dtype.name}"
            )
        if source.dtype.name != self.dtype:
            raise TypeError(
                f"copyfrom: dtype mismatch, expected {self.shape} {self.dtype}, "
                f"got {source.shape} {source.dtype.name}"
            )
        np.copyto(self._data, source)
        return self

    def copyto(self, target: NDArray | Device) -> NDArray:
        """Copy into another NDArray (returned) or into a new array on `target` device."""
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        if isinstance(target, Device):
            return NDArray(self._data.copy(), target)
        raise TypeError(f"copyto: expected NDArray or Device, got {type(target).__name__}")

    def __repr__(self) -> str:
        return f"<runtime.NDArray shape={self.shape}, {self._device!r}>\n{self._data!r}"

    def _view(self) -> np.ndarray:
        """The live storage (no copy): for the runtime's own use."""
        return self._data


def array(obj: Any, device: Device | None = None, dtype: Any = None) -> NDArray:
    """A new NDArray holding a copy of `obj` (numpy array, NDArray, list or scalar)."""
    if isinstance(obj, NDArray):
        obj = obj._view()
    source = np.asarray(obj, dtype=None if dtype is None else dtype_name(dtype))
    out = aligned_empty(source.shape, numpy_dtype(dtype_name(source.dtype)))
    np.copyto(out, source)
    return NDArray(out, device)


def empty(
    shape: Sequence[int] | int, dtype: Any = "float32", device: Device | None = None
) -> NDArray:
    """A new zero-filled NDArray of `shape` and `dtype`."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return NDArray(aligned_empty(shape, numpy_dtype(dtype_name(dtype))), device)
