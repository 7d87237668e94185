"""Buffer: a typed n-d array in memory, what Load and Store address in the loop-nest IR."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CodegenError
from .dtype import as_dtype, itemsize


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Buffer:
    """A typed n-d array in memory; strides in elements (None = row-major contiguous)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None = None
    alignment: int = 64

    def __post_init__(self) -> None:
        shape = tuple(self.shape)
        for dim in shape:
            if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
                raise CodegenError(
                    f"buffer {self.name}: shape must be static ints >= 0, got {self.shape!r}"
                )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if self.strides is not None:
            if len(self.strides) != len(shape):
                raise CodegenError(
                    f"buffer {self.name}: {len(shape)} dims but {len(self.strides)} strides"
                )
            object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for dim in self.shape:
            n *= dim
        return n

    @property
    def nbytes(self) -> int:
        """Bytes spanned by the buffer (used for `dereferenceable` and scratch sizing)."""
        if self.strides is None:
            return self.size * itemsize(self.dtype)
        if self.size == 0:
            return 0
        span = 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides))
        return span * itemsize(self.dtype)

    def elem_strides(self) -> tuple[int, ...]:
        """Strides in elements, computing row-major ones when not given."""
        if self.strides is not None:
            return self.strides
        out, acc = [], 1
        for dim in reversed(self.shape):
            out.append(acc)
            acc *= dim
        return tuple(reversed(out))

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.dtype})"

    __hash__ = object.__hash__
