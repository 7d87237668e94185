"""Relay types: small frozen values compared structurally."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import count

import numpy as np


class Type:
    """Base class of Relay types."""

    __slots__ = ()

    def __str__(self) -> str:
        return type_to_str(self)


def _check_dtype(dtype) -> str:
    try:
        name = np.dtype(str(dtype)).name if str(dtype) != "bool" else "bool"
    except TypeError:
        raise TypeError(f"TensorType dtype: {dtype!r} is not a known data type") from None
    return name


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    """A tensor of static shape and element dtype; shape () is a scalar."""

    shape: tuple
    dtype: str = "float32"

    def __init__(self, shape=(), dtype="float32"):
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise TypeError(f"TensorType shape must be a sequence of ints, got {shape!r}") from None
        if any(d < 0 for d in dims):
            raise ValueError(f"TensorType shape has a negative dimension: {dims}")
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", _check_dtype(dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def concrete_shape(self) -> tuple:
        return self.shape

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """The type of a Relay tuple."""

    fields: tuple

    def __init__(self, fields=()):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Type):
                raise TypeError(f"TupleType field must be a Type, got {type(f).__name__}")
        object.__setattr__(self, "fields", fields)

    def __len__(self) -> int:
        return len(self.fields)


@dataclass(frozen=True, slots=True)
class FuncType(Type):
    """The type of a Relay function."""

    arg_types: tuple
    ret_type: Type
    type_params: tuple = ()
    type_constraints: tuple = ()

    def __init__(self, arg_types, ret_type, type_params=(), type_constraints=()):
        object.__setattr__(self, "arg_types", tuple(arg_types))
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "type_params", tuple(type_params or ()))
        object.__setattr__(self, "type_constraints", tuple(type_constraints or ()))


_incomplete_ids = count()


class IncompleteType(Type):
    """A placeholder to be solved by InferType; equal only to itself."""

    __slots__ = ("kind", "_id")

    def __init__(self, kind: str = "Type"):
        self.kind = kind
        self._id = next(_incomplete_ids)

    def __repr__(self) -> str:
        return f"IncompleteType({self._id})"


def _dim_str(shape: tuple) -> str:
    if len(shape) == 1:
        return f"({shape[0]})"
    return "(" + ", ".join(str(d) for d in shape) + ")"


def type_to_str(t: Type) -> str:
    """Print a type as TVM's text format does: Tensor[(1, 3), float32], (T1, T2), fn (T) -> T."""
    if isinstance(t, TensorType):
        if not t.shape:
            return t.dtype
        return f"Tensor[{_dim_str(t.shape)}, {t.dtype}]"
    if isinstance(t, TupleType):
        if len(t.fields) == 1:
            return f"({type_to_str(t.fields[0])},)"
        return "(" + ", ".join(type_to_str(f) for f in t.fields) + ")"
    if isinstance(t, FuncType):
        args = ", ".join(type_to_str(a) for a in t.arg_types)
        return f"fn ({args}) -> {type_to_str(t.ret_type)}"
    if isinstance(t, IncompleteType):
        return "?"
    return repr(t)
