"""Ops whose result depends on which elements the data holds: argwhere and unique.

argwhere is TVM's: the coordinates of the nonzero elements, one row each, so its row count
is an Any dim known only from the data; its shape function (runtime.shape_functions_builtin)
reads the input's value, and the kernel then fills the rows it was given.

unique is TVM's op: as the number of distinct values is known only at run time, its outputs
have the input's length and a count says how much of them is meaningful (`num_unique`, a
(1,) tensor); the rest is zero. So its kernel is static-shaped; a caller slices the outputs
(the ONNX frontend with a dynamic strided_slice). relayjit extends it to 2-D data, whose
rows are the items (compared lexicographically), which is what ONNX's Unique with an axis
needs. NaNs compare equal to each other and sort last, as numpy's unique.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import Any
from compiler.ir.expr import TupleWrapper
from compiler.ir.types import TensorType, TupleType
from .registry import OpDef, OpPattern, ShapeFuncDef, make_call, register
from .type_relations import check_arity, fail, tensor_arg

__all__ = ["argwhere", "unique"]


def _argwhere_rel(types, attrs):
    check_arity("argwhere", types, 1)
    data = tensor_arg("argwhere", types, 0, "data")
    return TensorType((Any(), len(data.shape)), "int32")


def _argwhere_ref(inputs, attrs):
    return np.argwhere(inputs[0]).astype(np.int32)


register(OpDef(name="argwhere", num_inputs=1, type_rel=_argwhere_rel, pattern=OpPattern.OPAQUE,
               reference=_argwhere_ref, shape_func=ShapeFuncDef("argwhere", (True,))))


def argwhere(condition):
    """relay.argwhere: the (count, rank) int32 coordinates of condition's nonzero elements,
    in row-major order."""
    return make_call("argwhere", [condition])


def _unique_rel(types, attrs):
    check_arity("unique", types, 1)
    data = tensor_arg("unique", types, 0, "data")
    if len(data.shape) not in (1, 2):
        raise fail("unique", f"data must be 1-D (or 2-D: unique rows), got shape {data.shape}")
    n = data.shape[0]
    index = TensorType((n,), "int32")
    fields = [data, index, index, TensorType((1,), "int32")]
    if attrs.return_counts:
        fields.append(index)
    return TupleType(fields)


def unique_rows(x: np.ndarray, is_sorted: bool) -> tuple:
    """(first-occurrence index per unique row in output order, inverse, counts) of the rows
    of a 2-D array, sorted ascending or in order of first occurrence; NaNs equal each other
    and sort last (numpy's unique of a 1-D array)."""
    floating = x.dtype.kind in "fc"
    keys = [tuple((bool(np.isnan(v)), 0.0 if np.isnan(v) else v) if floating else v
                  for v in row.tolist()) for row in x]
    first: dict = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    items = sorted(first) if is_sorted else list(first)
    place = {key: p for p, key in enumerate(items)}
    inverse = np.array([place[k] for k in keys], np.int64)
    counts = np.bincount(inverse, minlength=len(items)) if keys else np.zeros(0, np.int64)
    return np.array([first[k] for k in items], np.int64), inverse, counts


def _unique_ref(inputs, attrs):
    data = inputs[0]
    rows = data.reshape(data.shape[0], -1)
    first, inverse, counts = unique_rows(rows, bool(attrs.sorted))
    n, k = data.shape[0], len(first)
    out = np.zeros_like(data)
    out[:k] = data[first]
    padded = [np.zeros(n, np.int32) for _ in range(2)]
    padded[0][:k], padded[1][:k] = first, counts
    result = [out, padded[0], inverse.astype(np.int32), np.array([k], np.int32)]
    return tuple(result + [padded[1]] if attrs.return_counts else result)


register(OpDef(name="unique", num_inputs=1, type_rel=_unique_rel, pattern=OpPattern.OPAQUE,
               reference=_unique_ref, attrs={"sorted": True, "return_counts": False},
               attrs_type_key="relay.attrs.UniqueAttrs"))


def unique(data, is_sorted=True, return_counts=False):
    """relay.unique: (output, indices, inverse_indices, num_unique[, counts]), each of the
    input's length; the first num_unique entries of output, indices and counts are
    meaningful (see the module docstring)."""
    call = make_call("unique", [data], sorted=bool(is_sorted),
                     return_counts=bool(return_counts))
    return TupleWrapper(call, 5 if return_counts else 4)
