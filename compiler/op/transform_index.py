"""Indexing, scan and sort ops: take, gather, gather_nd, one_hot, cumsum/cumprod, trilu, sorts."""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import dim_min
from compiler.ir.expr import RelayExpr, TupleWrapper, const
from compiler.ir.types import TensorType, TupleType
from .registry import OpDef, OpPattern, make_call, register, static_or_expr
from .type_relations import (check_arity, fail, holds, is_dyn, known, normalize_axis,
                             require_int, shapes_agree, tensor_arg)

__all__ = ["take", "gather", "gather_nd", "one_hot", "cumsum", "cumprod", "trilu", "sort",
           "argsort", "topk"]


def _reg(name, num_inputs, rel, ref, attrs=None, key="Attrs", pattern=OpPattern.INJECTIVE):
    register(OpDef(name=name, num_inputs=num_inputs, type_rel=rel, pattern=pattern,
                   reference=ref, attrs=attrs or {}, attrs_type_key=key))


# --- take ----------------------------------------------------------------------------------


def _take_rel(types, attrs):
    op = "take"
    check_arity(op, types, 2)
    data, indices = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "indices")
    require_int(op, indices)
    if attrs.mode not in ("clip", "wrap", "fast"):
        raise fail(op, f"mode must be 'clip', 'wrap' or 'fast', got {attrs.mode!r}")
    if attrs.axis is None:
        if attrs.batch_dims:
            raise fail(op, "batch_dims needs an axis")
        return TensorType(indices.shape, data.dtype)
    axis = normalize_axis(op, attrs.axis, data.ndim)
    b = attrs.batch_dims % (indices.ndim + 1) if attrs.batch_dims < 0 else attrs.batch_dims
    if b > axis or not shapes_agree(op, data.shape[:b], indices.shape[:b],
                                    "the batch dims of data and indices must agree"):
        raise fail(op, f"batch_dims={attrs.batch_dims} must be <= axis and the leading dims "
                       f"of data {data.shape} and indices {indices.shape} must agree")
    lead = tuple(known(a, c) for a, c in zip(data.shape[:b], indices.shape[:b]))
    return TensorType(lead + data.shape[b:axis] + indices.shape[b:] + data.shape[axis + 1:],
                      data.dtype)


def _take_one(data: np.ndarray, indices: np.ndarray, axis: int, mode: str) -> np.ndarray:
    """clip clamps to [0, n-1]; wrap is Python's modulo; fast assumes in-range indices."""
    return np.take(data, indices, axis=axis, mode={"clip": "clip", "wrap": "wrap"}.get(mode,
                                                                                         "raise"))


def _take_ref(inputs, attrs):
    data, indices = inputs
    if attrs.axis is None:
        return _take_one(data.reshape(-1), indices, 0, attrs.mode)
    axis = attrs.axis % data.ndim
    b = attrs.batch_dims % (indices.ndim + 1) if attrs.batch_dims < 0 else attrs.batch_dims
    if b == 0:
        return _take_one(data, indices, axis, attrs.mode)
    out = np.empty(data.shape[:axis] + indices.shape[b:] + data.shape[axis + 1:], data.dtype)
    for idx in np.ndindex(*data.shape[:b]):
        out[idx] = _take_one(data[idx], indices[idx], axis - b, attrs.mode)
    return out


_reg("take", 2, _take_rel, _take_ref, {"batch_dims": 0, "axis": None, "mode": "clip"},
     "relay.attrs.TakeAttrs")


def take(data, indices, axis=None, batch_dims=0, mode="clip"):
    """relay.take: elements of data at indices along axis (flattened when axis is None)."""
    return make_call("take", [data, indices], batch_dims=int(batch_dims),
                     axis=None if axis is None else int(axis), mode=mode)


# --- gather / gather_nd ----------------------------------------------------------------------


def _gather_rel(types, attrs):
    op = "gather"
    check_arity(op, types, 2)
    data, indices = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "indices")
    require_int(op, indices)
    axis = normalize_axis(op, attrs.axis, data.ndim)
    if indices.ndim != data.ndim:
        raise fail(op, f"indices must have the rank of data ({data.ndim}), got {indices.shape}")
    for d in range(data.ndim):
        if d != axis and not holds(op, "ge", data.shape[d], indices.shape[d],
                                   f"indices must not exceed data on axis {d}"):
            raise fail(op, f"indices {indices.shape} exceeds data {data.shape} on axis {d}")
    return TensorType(indices.shape, data.dtype)


def _gather_ref(inputs, attrs):
    data, indices = inputs
    axis = attrs.axis % data.ndim
    view = data[tuple(slice(0, n) if d != axis else slice(None)
                      for d, n in enumerate(indices.shape))]
    return np.take_along_axis(view, indices.astype(np.int64), axis=axis)


_reg("gather", 2, _gather_rel, _gather_ref, {"axis": 0}, "relay.attrs.GatherAttrs")


def gather(data, axis, indices):
    """relay.gather(data, axis, indices): out[i][j] = data[i][indices[i][j]] for axis=1."""
    return make_call("gather", [data, indices], axis=int(axis))


def _gather_nd_rel(types, attrs):
    op = "gather_nd"
    check_arity(op, types, 2)
    data, indices = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "indices")
    require_int(op, indices)
    if indices.ndim < 1:
        raise fail(op, "indices must have rank >= 1")
    m, b = indices.shape[0], attrs.batch_dims
    if attrs.index_rank is not None:
        if not shapes_agree(op, (attrs.index_rank,), (m,), "index_rank must equal "
                                                           "indices.shape[0]"):
            raise fail(op, f"index_rank={attrs.index_rank} but indices.shape[0] is {m}")
        m = attrs.index_rank
    if is_dyn(m):
        raise fail(op, f"indices.shape[0] (how many dims each index names) decides the output "
                       f"rank, so it must be static or given as index_rank; got {indices.shape}")
    if b < 0 or b >= indices.ndim or not shapes_agree(
            op, data.shape[:b], indices.shape[1:1 + b], "the batch dims of data and indices "
                                                        "must agree"):
        raise fail(op, f"batch_dims={b}: the leading dims of data {data.shape} must equal "
                       f"indices.shape[1:{1 + b}] of indices {indices.shape}")
    if b + m > data.ndim:
        raise fail(op, f"batch_dims + indices.shape[0] = {b + m} exceeds the rank of data "
                       f"{data.shape}")
    return TensorType(indices.shape[1:] + data.shape[b + m:], data.dtype)


def _gather_nd_ref(inputs, attrs):
    data, indices = inputs
    b = attrs.batch_dims
    grids = np.indices(indices.shape[1:1 + b], sparse=True)
    lead = tuple(g.reshape(g.shape + (1,) * (indices.ndim - 1 - b)) for g in grids)
    return data[lead + tuple(indices.astype(np.int64))]


_reg("gather_nd", 2, _gather_nd_rel, _gather_nd_ref, {"batch_dims": 0, "index_rank": None},
     "relay.attrs.GatherNDAttrs")


def gather_nd(data, indices, batch_dims=0, index_rank=None):
    """relay.gather_nd: indices [M, Y...] pick data[indices[:, y]] -> [Y..., data.shape[M:]]."""
    return make_call("gather_nd", [data, indices], batch_dims=int(batch_dims),
                     index_rank=index_rank)


# --- one_hot ---------------------------------------------------------------------------------


def _one_hot_rel(types, attrs):
    op = "one_hot"
    check_arity(op, types, 3)
    indices = tensor_arg(op, types, 0, "indices")
    require_int(op, indices)
    on, off = tensor_arg(op, types, 1, "on_value"), tensor_arg(op, types, 2, "off_value")
    if on.shape or off.shape:
        raise fail(op, f"on_value and off_value must be scalars, got {on.shape} and {off.shape}")
    axis = attrs.axis % (indices.ndim + 1) if attrs.axis < 0 else attrs.axis
    if axis > indices.ndim or attrs.depth < 0:
        raise fail(op, f"axis={attrs.axis} / depth={attrs.depth} invalid for indices "
                       f"{indices.shape}")
    return TensorType(indices.shape[:axis] + (attrs.depth,) + indices.shape[axis:], attrs.dtype)


def _one_hot_ref(inputs, attrs):
    indices, on, off = inputs
    axis = attrs.axis % (indices.ndim + 1) if attrs.axis < 0 else attrs.axis
    hot = np.expand_dims(indices, axis) == np.arange(attrs.depth).reshape(
        [-1 if i == axis else 1 for i in range(indices.ndim + 1)])
    return np.where(hot, on, off).astype(attrs.dtype)


_reg("one_hot", 3, _one_hot_rel, _one_hot_ref, {"depth": 1, "axis": -1, "dtype": "float32"},
     "relay.attrs.OneHotAttrs", OpPattern.OUT_ELEMWISE_FUSABLE)


def one_hot(indices, on_value, off_value, depth, axis, dtype):
    """relay.one_hot: on_value where index == position along the new axis, else off_value
    (dyn.one_hot for a computed depth)."""
    depth, dynamic = static_or_expr(depth)
    if dynamic is not None:
        return make_call("dyn.one_hot", [indices, on_value, off_value, dynamic],
                         axis=int(axis), dtype=str(dtype))
    return make_call("one_hot", [indices, on_value, off_value],
                     depth=int(np.asarray(depth).reshape(-1)[0]), axis=int(axis),
                     dtype=str(dtype))


# --- cumsum / cumprod ------------------------------------------------------------------------


def _scan_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        dtype = attrs.dtype or data.dtype
        if attrs.axis is None:
            size = 1
            for d in data.shape:
                size = size * d
            return TensorType((size,), dtype)
        normalize_axis(op, attrs.axis, data.ndim)
        return TensorType(data.shape, dtype)
    return rel


def _scan_ref(fn, identity: int):
    def reference(inputs, attrs):
        x = inputs[0]
        dtype = attrs.dtype or x.dtype
        axis = 0 if attrs.axis is None else attrs.axis
        x = x.reshape(-1) if attrs.axis is None else x
        out = fn(x.astype(dtype), axis=axis, dtype=dtype)
        if attrs.exclusive:
            out = np.roll(out, 1, axis=axis)
            index = [slice(None)] * out.ndim
            index[axis] = 0
            out[tuple(index)] = identity
        return out
    return reference


for _name, _fn, _identity in (("cumsum", np.cumsum, 0), ("cumprod", np.cumprod, 1)):
    _reg(_name, 1, _scan_rel(_name), _scan_ref(_fn, _identity),
         {"axis": None, "dtype": "", "exclusive": False}, "relay.attrs.ScanopAttrs",
         OpPattern.OPAQUE)


def cumsum(data, axis=None, dtype=None, exclusive=None):
    """relay.cumsum (flattened when axis is None; exclusive shifts by one)."""
    return make_call("cumsum", [data], axis=axis, dtype=dtype or "", exclusive=bool(exclusive))


def cumprod(data, axis=None, dtype=None, exclusive=None):
    """relay.cumprod."""
    return make_call("cumprod", [data], axis=axis, dtype=dtype or "", exclusive=bool(exclusive))


# --- trilu -----------------------------------------------------------------------------------


def _trilu_rel(types, attrs):
    check_arity("trilu", types, 2)
    data = tensor_arg("trilu", types, 0, "data")
    k = tensor_arg("trilu", types, 1, "k")
    require_int("trilu", k, "k")
    if data.ndim < 2 or k.shape:
        raise fail("trilu", f"data must have rank >= 2 and k be a scalar, got {data.shape} "
                            f"and {k.shape}")
    return data


def _trilu_ref(inputs, attrs):
    data, k = inputs
    return (np.triu if attrs.upper else np.tril)(data, int(k))


_reg("trilu", 2, _trilu_rel, _trilu_ref, {"upper": True}, "relay.attrs.TriluAttrs")


def trilu(data, k, upper=True):
    """relay.trilu: keep the upper (or lower) triangle from diagonal k of the last two axes."""
    if not isinstance(k, RelayExpr):
        k = const(k, "int32")
    return make_call("trilu", [data, k], upper=bool(upper))


# --- sort / argsort / topk -------------------------------------------------------------------


def _sorted_index(x: np.ndarray, axis: int, ascend: bool) -> np.ndarray:
    """Stable order; descending keeps equal elements in their original order too."""
    if ascend:
        return np.argsort(x, axis=axis, kind="stable")
    flipped = np.flip(x, axis)
    order = np.argsort(flipped, axis=axis, kind="stable")
    n = x.shape[axis]
    return np.flip(n - 1 - order, axis)


def _sort_rel(op: str, index_out: bool):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        normalize_axis(op, attrs.axis, data.ndim)
        return TensorType(data.shape, attrs.dtype) if index_out else data
    return rel


_reg("argsort", 1, _sort_rel("argsort", True),
     lambda ins, a: _sorted_index(ins[0], a.axis, a.is_ascend).astype(a.dtype),
     {"axis": -1, "is_ascend": True, "dtype": "int32"}, "relay.attrs.ArgsortAttrs",
     OpPattern.OPAQUE)
_reg("sort", 1, _sort_rel("sort", False),
     lambda ins, a: np.take_along_axis(ins[0], _sorted_index(ins[0], a.axis, a.is_ascend),
                                       a.axis),
     {"axis": -1, "is_ascend": True, "dtype": "int32"}, "relay.attrs.ArgsortAttrs",
     OpPattern.OPAQUE)


def argsort(data, axis=-1, is_ascend=1, dtype="int32"):
    """relay.argsort: indices that sort data along axis."""
    return make_call("argsort", [data], axis=int(axis), is_ascend=bool(is_ascend), dtype=dtype)


def sort(data, axis=-1, is_ascend=1):
    """relay.sort along axis."""
    return make_call("sort", [data], axis=int(axis), is_ascend=bool(is_ascend))


def _topk_k(attrs, n: int) -> int:
    return n if attrs.k is None or attrs.k < 1 else dim_min(attrs.k, n)


def _topk_rel(types, attrs):
    check_arity("topk", types, 1)
    data = tensor_arg("topk", types, 0, "data")
    axis = normalize_axis("topk", attrs.axis, data.ndim)
    if attrs.ret_type not in ("both", "values", "indices"):
        raise fail("topk", f"ret_type must be 'both', 'values' or 'indices', got "
                           f"{attrs.ret_type!r}")
    shape = list(data.shape)
    shape[axis] = _topk_k(attrs, data.shape[axis])
    values, indices = TensorType(shape, data.dtype), TensorType(shape, attrs.dtype)
    return {"both": TupleType([values, indices]), "values": values,
            "indices": indices}[attrs.ret_type]


def _topk_ref(inputs, attrs):
    x = inputs[0]
    axis = attrs.axis % x.ndim
    order = _sorted_index(x, axis, attrs.is_ascend)
    order = np.take(order, np.arange(_topk_k(attrs, x.shape[axis])), axis=axis)
    values, indices = np.take_along_axis(x, order, axis), order.astype(attrs.dtype)
    return {"both": (values, indices), "values": values, "indices": indices}[attrs.ret_type]


_reg("topk", 1, _topk_rel, _topk_ref,
     {"k": 1, "axis": -1, "ret_type": "both", "is_ascend": False, "dtype": "int32"},
     "relay.attrs.TopKAttrs", OpPattern.OPAQUE)


def topk(data, k=1, axis=-1, ret_type="both", is_ascend=False, dtype="int32"):
    """relay.topk: a TupleWrapper (values, indices) for ret_type='both', else one tensor;
    dyn.topk for a computed k."""
    k, dynamic = static_or_expr(k)
    if dynamic is not None:
        call = make_call("dyn.topk", [data, dynamic], axis=int(axis), ret_type=ret_type,
                         is_ascend=bool(is_ascend), dtype=dtype)
    else:
        call = make_call("topk", [data], k=int(np.asarray(k).reshape(-1)[0]), axis=int(axis),
                         ret_type=ret_type, is_ascend=bool(is_ascend), dtype=dtype)
    return TupleWrapper(call, 2) if ret_type == "both" else call
