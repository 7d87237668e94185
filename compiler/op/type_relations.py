"""Shared type-relation helpers: argument checks, broadcasting, axis normalisation, reductions.

A type relation is `rel(arg_types, attrs) -> Type`. The factories here take the op name so
every error they raise names the op, the argument and what was expected versus given.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from compiler.errors import TypeInferenceError
from compiler.ir.dims import Any, bcast, require
from compiler.ir.types import TensorType, TupleType, Type

Rel = Callable[[list, object], Type]

FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16")


def fail(op: str, message: str) -> TypeInferenceError:
    """The error every relation raises: 'op: message'."""
    return TypeInferenceError(f"{op}: {message}")


def tensor_arg(op: str, types: Sequence[Type], index: int, name: str = "") -> TensorType:
    """Argument `index` as a TensorType, or an error naming the op and argument."""
    label = name or f"argument {index}"
    if index >= len(types):
        raise fail(op, f"missing {label}: expected at least {index + 1} argument types, "
                       f"got {len(types)}")
    ty = types[index]
    if not isinstance(ty, TensorType):
        raise fail(op, f"{label} must be a tensor, got {ty}")
    return ty


def tuple_arg(op: str, types: Sequence[Type], index: int, name: str = "data") -> list:
    """Argument `index` as a non-empty list of TensorTypes (a Relay Tuple argument)."""
    ty = types[index] if index < len(types) else None
    if not isinstance(ty, TupleType):
        raise fail(op, f"{name} must be a tuple of tensors, got {ty}")
    if not ty.fields:
        raise fail(op, f"{name} must have at least one tensor, got an empty tuple")
    for i, field in enumerate(ty.fields):
        if not isinstance(field, TensorType):
            raise fail(op, f"{name}[{i}] must be a tensor, got {field}")
    return list(ty.fields)


def check_arity(op: str, types: Sequence[Type], count: int) -> None:
    if len(types) != count:
        raise fail(op, f"expected {count} argument type(s), got {len(types)}")


def same_dtype(op: str, a: TensorType, b: TensorType, names=("lhs", "rhs")) -> None:
    """Relay binary ops need equal dtypes (no implicit promotion)."""
    if a.dtype != b.dtype:
        raise fail(op, f"{names[0]} and {names[1]} must have the same dtype, got "
                       f"{a.dtype} and {b.dtype}")


def require_float(op: str, ty: TensorType, name: str = "data") -> None:
    if ty.dtype not in FLOAT_DTYPES:
        raise fail(op, f"{name} must have a float dtype, got {ty.dtype}")


def require_int(op: str, ty: TensorType, name: str = "indices") -> None:
    if np.dtype(ty.dtype).kind not in "iu":
        raise fail(op, f"{name} must have an integer dtype, got {ty.dtype}")


def broadcast_shape(op: str, *shapes: tuple) -> tuple:
    """numpy broadcasting; an error naming both shapes when static dims clash. A dynamic
    dim against a static d != 1 gives d (TVM's rule) and the run-time check that it is 1 or
    d; two dynamic dims give their bcast expression (checked when evaluated)."""
    out: list = []
    for shape in shapes:
        shape = tuple(shape)
        rank = max(len(out), len(shape))
        a = [1] * (rank - len(out)) + out
        b = [1] * (rank - len(shape)) + list(shape)
        merged = []
        for i, (x, y) in enumerate(zip(a, b)):
            if x == y or y == 1:
                merged.append(x)
            elif x == 1:
                merged.append(y)
            elif isinstance(x, Any) and isinstance(y, Any):
                merged.append(bcast(x, y))
            elif isinstance(x, Any) or isinstance(y, Any):
                require("bcast", x, y, f"{op}: dimension {i} of the aligned shapes must "
                                       "broadcast")
                merged.append(y if isinstance(x, Any) else x)
            else:
                raise fail(op, f"shapes {tuple(out)} and {shape} cannot be broadcast "
                               f"(dimension {i} of the aligned shapes: {x} vs {y})")
        out = merged
    return tuple(out)


def is_dyn(dim) -> bool:
    return isinstance(dim, Any)


def dims_agree(op: str, a, b, rule: str) -> bool:
    """a == b for static dims; a dynamic dim agrees now and is checked at run time (the
    check says 'op: rule'). The caller raises its own error on False."""
    if a == b:
        return True
    if isinstance(a, Any) or isinstance(b, Any):
        require("eq", a, b, f"{op}: {rule}")
        return True
    return False


def shapes_agree(op: str, a: tuple, b: tuple, rule: str) -> bool:
    """dims_agree over two shapes of the same rank (False for different ranks)."""
    if a == b:
        return True
    return len(a) == len(b) and all([dims_agree(op, x, y, f"{rule} (dim {i})")
                                     for i, (x, y) in enumerate(zip(a, b))])


def known(dim, other):
    """Of two dims that agree, the static one when there is one."""
    return other if isinstance(dim, Any) else dim


def equal_dims(op: str, a, b, message: str):
    """a and b must be the same dim: two static dims are checked now ('op: message: a vs
    b'), a dynamic one at run time. Returns the better-known of the two."""
    if not dims_agree(op, a, b, message):
        raise fail(op, f"{message}: {a} vs {b}")
    return known(a, b)


def holds(op: str, kind: str, a, b, rule: str) -> bool:
    """`a kind b` (eq, ne, ge, gt) for static dims; with a dynamic dim, True now and a run-time
    check 'op: rule'. The caller raises its own error on False."""
    if isinstance(a, Any) or isinstance(b, Any):
        if not (kind in ("eq", "ge") and a == b):
            require(kind, a, b, f"{op}: {rule}")
        return True
    return {"eq": a == b, "ne": a != b, "ge": a >= b, "gt": a > b}[kind]


def divides(op: str, a, b, rule: str) -> bool:
    """b divides a (a % b == 0), checked at run time when either is dynamic."""
    if b == 0:
        return False
    return holds(op, "eq", a % b, 0, rule)


def static_shape(op: str, ty: TensorType, name: str) -> tuple:
    """ty's shape, which must be static (a packed weight is a constant of known shape)."""
    if ty.is_dynamic:
        raise fail(op, f"{name} must have a static shape, got {ty.shape}")
    return ty.shape


def broadcast_dim(op: str, a, b, what: str = "dims"):
    """numpy broadcasting of two dims (one of them 1, or equal); dynamic as broadcast_shape."""
    return broadcast_shape(op, (a,), (b,))[0]





def normalize_axis(op: str, axis: int, ndim: int, name: str = "axis") -> int:
    """A possibly negative axis as an index in [0, ndim)."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise fail(op, f"{name} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise fail(op, f"{name}={axis} is out of range for a tensor of rank {ndim} "
                       f"(expected {-ndim} <= {name} < {ndim})")
    return int(axis) % ndim


def as_axis_list(axis) -> list | None:
    """None stays None, an int becomes [int], a sequence a list."""
    if axis is None:
        return None
    if isinstance(axis, (int, np.integer)):
        return [int(axis)]
    return [int(a) for a in axis]


def reduce_axes(op: str, ndim: int, axis, exclude: bool) -> list:
    """The sorted axes a reduction removes, as TVM's GetReduceAxes computes them."""
    axes = as_axis_list(axis)
    if axes is None:
        return [] if exclude else list(range(ndim))
    norm = [normalize_axis(op, a, ndim) for a in axes]
    if len(set(norm)) != len(norm):
        raise fail(op, f"axis {tuple(axes)} names the same axis twice")
    if exclude:
        return [i for i in range(ndim) if i not in norm]
    return sorted(norm)


def reduce_shape(shape: tuple, axes: list, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


# --- relation factories ---------------------------------------------------------------


def identity_rel(op: str, float_only: bool = False) -> Rel:
    """One tensor in, the same type out (elementwise unary ops)."""
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        if float_only:
            require_float(op, data)
        return data
    return rel


def unary_rel(op: str, dtype: str) -> Rel:
    """One tensor in, the same shape out with a fixed dtype (isnan, isinf, ...)."""
    def rel(types, attrs):
        check_arity(op, types, 1)
        return TensorType(tensor_arg(op, types, 0, "data").shape, dtype)
    return rel


def broadcast_rel(op: str, out_dtype: str | None = None, int_only: bool = False) -> Rel:
    """Two tensors of one dtype, numpy-broadcast shapes; out_dtype overrides (comparisons)."""
    def rel(types, attrs):
        check_arity(op, types, 2)
        lhs, rhs = tensor_arg(op, types, 0, "lhs"), tensor_arg(op, types, 1, "rhs")
        same_dtype(op, lhs, rhs)
        if int_only and np.dtype(lhs.dtype).kind not in "iub":
            raise fail(op, f"lhs and rhs must have an integer or bool dtype, got {lhs.dtype}")
        return TensorType(broadcast_shape(op, lhs.shape, rhs.shape), out_dtype or lhs.dtype)
    return rel


def reduce_rel(op: str, out_dtype: str | None = None) -> Rel:
    """Reduction over attrs.axis with keepdims/exclude (ReduceAttrs)."""
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        axes = reduce_axes(op, data.ndim, attrs.axis, attrs.exclude)
        return TensorType(reduce_shape(data.shape, axes, attrs.keepdims),
                          out_dtype or data.dtype)
    return rel


def int_tuple(op: str, value, name: str, length: int | None = None) -> tuple:
    """An attribute that must be a tuple of ints (of a given length)."""
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise fail(op, f"{name} must be a tuple of ints, got {value!r}") from None
    if length is not None and len(out) != length:
        raise fail(op, f"{name} must have {length} values, got {out}")
    return out
