"""Scatter ops (TVM's scatter_elements, scatter_nd): a copy of data with updates applied in order.

Updates are applied sequentially in row-major order of the indices, so with reduction
"update" the last duplicate wins and "add"/"mul"/"min"/"max" combine every duplicate.
Negative indices count from the end once (as ONNX allows); the compute rule also clamps so
native code never writes out of bounds.
"""
from __future__ import annotations

import numpy as np

from .registry import OpDef, OpPattern, make_call, register
from .type_relations import (check_arity, fail, holds, is_dyn, normalize_axis, require_int,
                             shapes_agree, tensor_arg)

__all__ = ["scatter_elements", "scatter_nd"]

REDUCTIONS = ("update", "add", "mul", "min", "max")
_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _check_reduction(op: str, value: str) -> None:
    if value not in REDUCTIONS:
        raise fail(op, f"reduction must be one of {list(REDUCTIONS)}, got {value!r}")


def _apply(out: np.ndarray, where: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    """out with updates combined at the index arrays `where` (same shape as updates), in order."""
    if not where:  # 0-d data: the single update replaces/combines with the whole value
        where = ()
        updates = updates.reshape(())
    if reduction == "update":  # sequential semantics: the last duplicate wins
        flat = np.ravel_multi_index([w.reshape(-1) for w in where], out.shape) if where else \
            np.zeros(updates.size, np.int64)
        last, first = np.unique(flat[::-1], return_index=True)
        out.reshape(-1)[last] = updates.reshape(-1)[::-1][first]
        return out
    _UFUNCS[reduction].at(out, where, updates)
    return out


def _wrap(indices: np.ndarray, n) -> np.ndarray:
    idx = indices.astype(np.int64)
    return np.where(idx < 0, idx + n, idx)


# --- scatter_elements --------------------------------------------------------------------------


def _scatter_elements_rel(types, attrs):
    op = "scatter_elements"
    check_arity(op, types, 3)
    data = tensor_arg(op, types, 0, "data")
    indices = tensor_arg(op, types, 1, "indices")
    updates = tensor_arg(op, types, 2, "updates")
    require_int(op, indices)
    _check_reduction(op, attrs.reduction)
    if data.ndim == 0:
        raise fail(op, "data must have rank >= 1")
    axis = normalize_axis(op, attrs.axis, data.ndim)
    if indices.ndim != data.ndim or not shapes_agree(op, updates.shape, indices.shape,
                                                     "updates must match indices"):
        raise fail(op, f"indices {indices.shape} and updates {updates.shape} must have the same "
                       f"shape and the rank of data {data.shape}")
    for d in range(data.ndim):
        if d != axis and not holds(op, "ge", data.shape[d], indices.shape[d],
                                   f"indices must not exceed data on axis {d}"):
            raise fail(op, f"indices {indices.shape} exceeds data {data.shape} on axis {d}")
    if updates.dtype != data.dtype:
        raise fail(op, f"updates must have the dtype of data ({data.dtype}), got {updates.dtype}")
    return data


def _scatter_elements_ref(inputs, attrs):
    data, indices, updates = inputs
    axis = attrs.axis % data.ndim
    where = list(np.indices(indices.shape))
    where[axis] = _wrap(indices, data.shape[axis])
    return _apply(data.copy(), tuple(where), updates, attrs.reduction)


register(OpDef(name="scatter_elements", num_inputs=3, type_rel=_scatter_elements_rel,
               pattern=OpPattern.OPAQUE, reference=_scatter_elements_ref,
               attrs={"axis": 0, "reduction": "update"},
               attrs_type_key="relay.attrs.ScatterElementsAttrs",
               description="data with updates scattered along axis at indices"))


def scatter_elements(data, indices, updates, axis=0, reduction="update"):
    """relay.scatter_elements: out[.., indices[j], ..] = reduction(out[...], updates[j])."""
    return make_call("scatter_elements", [data, indices, updates], axis=int(axis),
                     reduction=reduction)


# --- scatter_nd --------------------------------------------------------------------------------


def _scatter_nd_rel(types, attrs):
    op = "scatter_nd"
    check_arity(op, types, 3)
    data = tensor_arg(op, types, 0, "data")
    indices = tensor_arg(op, types, 1, "indices")
    updates = tensor_arg(op, types, 2, "updates")
    require_int(op, indices)
    if attrs.mode not in REDUCTIONS:
        raise fail(op, f"mode must be one of {list(REDUCTIONS)}, got {attrs.mode!r}")
    if indices.ndim < 1:
        raise fail(op, "indices must have rank >= 1 (shape [M, Y...])")
    m = indices.shape[0]
    if is_dyn(m):
        raise fail(op, f"indices.shape[0] (how many dims each index names) must be static, got "
                       f"{indices.shape}")
    if m > data.ndim:
        raise fail(op, f"indices.shape[0]={m} exceeds the rank of data {data.shape}")
    expected = indices.shape[1:] + data.shape[m:]
    if not shapes_agree(op, updates.shape, expected, "updates must have shape "
                                                     "indices.shape[1:] + data.shape[M:]"):
        raise fail(op, f"updates must have shape {expected} (indices.shape[1:] + "
                       f"data.shape[{m}:]), got {updates.shape}")
    if updates.dtype != data.dtype:
        raise fail(op, f"updates must have the dtype of data ({data.dtype}), got {updates.dtype}")
    return data


def _scatter_nd_ref(inputs, attrs):
    data, indices, updates = inputs
    m = indices.shape[0]
    lead = tuple(_wrap(indices[k], data.shape[k]) for k in range(m))
    if m < data.ndim:  # whole slices: spell out the trailing axes so duplicates still combine
        tail = np.indices(data.shape[m:])
        y = indices.shape[1:]
        lead = tuple(np.broadcast_to(a.reshape(y + (1,) * (data.ndim - m)), updates.shape)
                     for a in lead)
        rest = tuple(np.broadcast_to(t.reshape((1,) * len(y) + t.shape), updates.shape)
                     for t in tail)
        lead = lead + rest
    return _apply(data.copy(), lead, updates, attrs.mode)


register(OpDef(name="scatter_nd", num_inputs=3, type_rel=_scatter_nd_rel,
               pattern=OpPattern.OPAQUE, reference=_scatter_nd_ref, attrs={"mode": "update"},
               attrs_type_key="relay.attrs.ScatterNDAttrs",
               description="data with updates scattered at index tuples (indices [M, Y...])"))


def scatter_nd(data, indices, updates, mode="update"):
    """relay.scatter_nd: out[indices[:, y]] = mode(out[...], updates[y]) (indices [M, Y...])."""
    return make_call("scatter_nd", [data, indices, updates], mode=mode)
