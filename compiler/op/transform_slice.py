"""Ops that crop or repeat data along axes: strided_slice, tile, repeat, broadcast_to(_like)."""
from __future__ import annotations

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.dims import dim_max, dim_min
from compiler.ir.expr import Constant, const
from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register, static_or_expr
from .type_relations import (check_arity, fail, holds, int_tuple, is_dyn, known,
                             normalize_axis, tensor_arg)

__all__ = ["strided_slice", "tile", "repeat", "broadcast_to", "broadcast_to_like"]


def _injective(name: str, num_inputs: int, rel, ref, attrs=None, key: str = "Attrs",
               pattern: OpPattern = OpPattern.INJECTIVE, exact_reference: str = "") -> None:
    register(OpDef(name=name, num_inputs=num_inputs, type_rel=rel, pattern=pattern,
                   reference=ref, attrs=attrs or {}, attrs_type_key=key,
                   exact_reference=exact_reference))


# --- strided_slice ---------------------------------------------------------------------------


def slices_of(op: str, shape: tuple, attrs) -> tuple:
    """Python slices for strided_slice: numpy's clamping of begin/end; slice_mode 'size'."""
    ndim = len(shape)
    begin, end = list(attrs.begin), list(attrs.end)
    strides = list(attrs.strides) if attrs.strides else [1]
    axes = list(attrs.axes) if attrs.axes is not None else list(range(len(begin)))
    if attrs.axes is not None and not len(axes) == len(begin) == len(end):
        raise fail(op, f"begin {tuple(begin)}, end {tuple(end)} and axes {attrs.axes} must "
                       f"have the same length")
    if len(begin) > ndim or len(end) > ndim:
        raise fail(op, f"begin {tuple(begin)} / end {tuple(end)} index more dims than data "
                       f"{shape} has")
    if attrs.slice_mode not in ("end", "size"):
        raise fail(op, f"slice_mode must be 'end' or 'size', got {attrs.slice_mode!r}")
    out = [slice(None)] * ndim
    for i, axis in enumerate(axes):
        axis = normalize_axis(op, axis, ndim, "axes")
        b = begin[i]
        e = end[i] if i < len(end) else None
        s = strides[i] if i < len(strides) else 1
        if attrs.slice_mode == "size":  # end = the begin numpy settles on, plus the size
            s = 1
            e = None if e is None or e < 0 else _clamp(b, shape[axis], 1) + e
        if s == 0:
            raise fail(op, f"stride on axis {axis} must not be 0")
        out[axis] = slice(b, e, s)
    return tuple(out)


def _clamp(index, dim, step: int):
    """Where numpy's slice.indices puts a start or stop of `index` (an int, or a non-negative
    expression) on an axis of `dim`, for a slice of sign `step`."""
    if not is_dyn(dim) and not is_dyn(index):
        return slice(index, None, step).indices(dim)[0]
    if not is_dyn(index) and index < 0:
        return dim_max(index + dim, 0 if step > 0 else -1)
    return dim_min(index, dim if step > 0 else dim - 1)


def slice_extent(sl: slice, dim):
    """len(range(*sl.indices(dim))), symbolic when dim (or a size-mode stop) is dynamic."""
    if not is_dyn(dim) and not is_dyn(sl.stop):
        return len(range(*sl.indices(dim)))
    step = 1 if sl.step is None else sl.step
    if step > 0:
        lo = 0 if sl.start is None else _clamp(sl.start, dim, step)
        hi = dim if sl.stop is None else _clamp(sl.stop, dim, step)
        return dim_max((hi - lo + step - 1) // step, 0)
    lo = dim - 1 if sl.start is None else _clamp(sl.start, dim, step)
    hi = -1 if sl.stop is None else _clamp(sl.stop, dim, step)
    return dim_max((lo - hi - step - 1) // -step, 0)


def _strided_slice_rel(types, attrs):
    check_arity("strided_slice", types, 1)
    data = tensor_arg("strided_slice", types, 0, "data")
    slices = slices_of("strided_slice", data.shape, attrs)
    return TensorType(tuple(slice_extent(s, d) for s, d in zip(slices, data.shape)),
                      data.dtype)


_injective("strided_slice", 1, _strided_slice_rel,
           lambda ins, attrs: ins[0][slices_of("strided_slice", ins[0].shape, attrs)].copy(),
           {"begin": (), "end": (), "strides": None, "slice_mode": "end", "axes": None},
           "relay.attrs.StridedSliceAttrs", exact_reference="values")


def strided_slice(data, begin, end, strides=None, axes=None, slice_mode="end"):
    """relay.strided_slice: numpy slicing per axis (bounds clamp; negative values count back);
    computed begin/end/strides tensors give dyn.strided_slice."""
    parts = [static_or_expr(v) for v in (begin, end, strides)]
    if any(dynamic is not None for _, dynamic in parts):
        if axes is not None:
            raise CompilerError("strided_slice: axes cannot be given with computed begin/end/"
                                "strides (dyn.strided_slice slices the leading axes)")
        known = [len(v) for v, d in parts if d is None and v is not None]
        computed = next(d for _, d in parts if d is not None)
        # strides left out: ones, as many as the static bounds give, else as the computed ones
        ones = _int64_const([1] * known[0]) if known else \
            make_call("ones_like", [computed])
        args = [d if d is not None else _int64_const(v) if v is not None else ones
                for v, d in parts]
        return make_call("dyn.strided_slice", [data, *args], slice_mode=slice_mode)

    def ints(v):
        v = v.reshape(-1).tolist() if isinstance(v, np.ndarray) else v
        return None if v is None else list(int_tuple("strided_slice", v, "value"))
    return make_call("strided_slice", [data], begin=ints(begin), end=ints(end),
                     strides=ints(strides) if strides else [1], slice_mode=slice_mode,
                     axes=ints(axes))


# --- tile / repeat / broadcast_to ------------------------------------------------------------


def _tile_shape(shape: tuple, reps: tuple) -> tuple:
    rank = max(len(shape), len(reps))
    shape = (1,) * (rank - len(shape)) + tuple(shape)
    reps = (1,) * (rank - len(reps)) + tuple(reps)
    return tuple(d * r for d, r in zip(shape, reps))


def _tile_rel(types, attrs):
    check_arity("tile", types, 1)
    data = tensor_arg("tile", types, 0, "data")
    reps = int_tuple("tile", attrs.reps, "reps")
    if any(r < 0 for r in reps):  # a 0 is allowed: numpy and ONNX give an empty axis
        raise fail("tile", f"reps must be non-negative, got {reps}")
    return TensorType(_tile_shape(data.shape, reps), data.dtype)


_injective("tile", 1, _tile_rel, lambda ins, attrs: np.tile(ins[0], attrs.reps),
           {"reps": ()}, "relay.attrs.TileAttrs")


def tile(data, reps):
    """relay.tile: numpy.tile semantics (dyn.tile for a computed reps tensor)."""
    reps, dynamic = static_or_expr(reps)
    if dynamic is not None:
        return make_call("dyn.tile", [data, dynamic])
    return make_call("tile", [data], reps=int_tuple("tile", _flat(reps), "reps"))


def _repeat_rel(types, attrs):
    check_arity("repeat", types, 1)
    data = tensor_arg("repeat", types, 0, "data")
    axis = normalize_axis("repeat", attrs.axis, data.ndim)
    if attrs.repeats < 1:
        raise fail("repeat", f"repeats must be >= 1, got {attrs.repeats}")
    shape = list(data.shape)
    shape[axis] = shape[axis] * attrs.repeats
    return TensorType(tuple(shape), data.dtype)


_injective("repeat", 1, _repeat_rel,
           lambda ins, attrs: np.repeat(ins[0], attrs.repeats, axis=attrs.axis),
           {"repeats": 1, "axis": 0}, "relay.attrs.RepeatAttrs")


def repeat(data, repeats, axis):
    """relay.repeat: each element repeated along axis."""
    return make_call("repeat", [data], repeats=int(repeats), axis=int(axis))


def _broadcast_to_rel(types, attrs):
    check_arity("broadcast_to", types, 1)
    data = tensor_arg("broadcast_to", types, 0, "data")
    shape = int_tuple("broadcast_to", attrs.shape, "shape")
    return TensorType(broadcast_to_shape("broadcast_to", data.shape, shape), data.dtype)


def broadcast_to_shape(op: str, shape: tuple, target: tuple) -> tuple:
    """target, after checking that shape broadcasts to it (a dynamic dim at run time)."""
    out = list(target)
    if len(shape) > len(target):
        raise fail(op, f"data {shape} cannot be broadcast to {target}")
    for i, d in enumerate(shape):
        j = len(target) - len(shape) + i
        t = target[j]
        if d == 1 or d == t:
            continue
        if is_dyn(d) or is_dyn(t):
            holds(op, "bcast_to", d, t, f"data dim {i} must broadcast to the target")
            out[j] = known(t, d) if not is_dyn(d) and d != 1 else t
            continue
        raise fail(op, f"data {shape} cannot be broadcast to {target}")
    return tuple(out)


_injective("broadcast_to", 1, _broadcast_to_rel,
           lambda ins, attrs: np.broadcast_to(ins[0], attrs.shape).copy(),
           {"shape": (), "dtype": ""}, "relay.attrs.InitOpAttrs", OpPattern.BROADCAST)


def broadcast_to(data, shape):
    """relay.broadcast_to: ints, a relay.Constant holding them, or (dyn.broadcast_to) a
    computed shape tensor, as TVM's."""
    shape, dynamic = static_or_expr(shape)
    if dynamic is not None:
        return make_call("dyn.broadcast_to", [data, dynamic])
    return make_call("broadcast_to", [data], shape=int_tuple("broadcast_to", _flat(shape),
                                                             "shape"))


def _flat(value):
    return value.reshape(-1).tolist() if isinstance(value, np.ndarray) else value


def _int64_const(values) -> Constant:
    return const(np.asarray(values, dtype="int64").reshape(-1), "int64")


def _broadcast_to_like_rel(types, attrs):
    check_arity("broadcast_to_like", types, 2)
    data = tensor_arg("broadcast_to_like", types, 0, "data")
    like = tensor_arg("broadcast_to_like", types, 1, "broadcast_type")
    return TensorType(broadcast_to_shape("broadcast_to_like", data.shape, like.shape),
                      data.dtype)


_injective("broadcast_to_like", 2, _broadcast_to_like_rel,
           lambda ins, attrs: np.broadcast_to(ins[0], ins[1].shape).copy(),
           pattern=OpPattern.BROADCAST)


def broadcast_to_like(data, broadcast_type):
    """relay.broadcast_to_like: broadcast data to broadcast_type's shape."""
    return make_call("broadcast_to_like", [data, broadcast_type])
