"""The built-in shape functions: output shapes of the ops whose shapes depend on input values
(the dyn.* ops, arange with tensor bounds, argwhere), in TVM's signature fn(attrs, inputs,
out_ndims).

inputs[i] is op input i's shape (int64 vector) or, where the op reads it (its ShapeFuncDef),
its value. Each returns one int64 shape vector per output and raises ValueError, naming the
op, for values the op refuses (ShapeProgram reports it as a ShapeError).
"""
from __future__ import annotations

import math

import numpy as np

from .shape_functions import shape_function


def _shape(*dims) -> np.ndarray:
    return np.array(dims, dtype=np.int64)


def _ints(value) -> list:
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]


def _scalar(value) -> float:
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise ValueError(f"expected a scalar, got {flat.size} values")
    return flat[0].item()


def _count(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


@shape_function("dyn.reshape")
def _reshape(attrs, inputs, out_ndims):
    data, newshape = _ints(inputs[0]), _ints(inputs[1])
    out = []
    for i, v in enumerate(newshape):
        if v == 0 and not attrs.allowzero:
            if i >= len(data):
                raise ValueError(f"dyn.reshape: newshape {newshape}: 0 copies input dim {i}, "
                                 f"but the input {tuple(data)} has rank {len(data)}")
            v = data[i]
        elif v < -1:
            raise ValueError(f"dyn.reshape: newshape {newshape} has the value {v} (only 0 "
                             "and -1 are special here)")
        out.append(v)
    if out.count(-1) > 1:
        raise ValueError(f"dyn.reshape: newshape {newshape} has more than one -1")
    total = _count(data)
    if -1 in out:
        rest = _count([v for v in out if v != -1])
        if rest == 0 or total % rest:
            raise ValueError(f"dyn.reshape: cannot infer the -1 in {newshape} for input "
                             f"{tuple(data)}")
        out[out.index(-1)] = total // rest
    if _count(out) != total:
        raise ValueError(f"dyn.reshape: newshape {newshape} gives {tuple(out)}, which does not "
                         f"hold the {total} elements of {tuple(data)}")
    return [_shape(*out)]


def _broadcast_target(op: str, data: list, target: list) -> list:
    if len(target) < len(data):
        raise ValueError(f"{op}: data {tuple(data)} cannot be broadcast to {tuple(target)}")
    for d, t in zip(reversed(data), reversed(target)):
        if d != t and d != 1:
            raise ValueError(f"{op}: data {tuple(data)} cannot be broadcast to {tuple(target)}")
    return target


@shape_function("dyn.broadcast_to")
def _broadcast_to(attrs, inputs, out_ndims):
    return [_shape(*_broadcast_target("dyn.broadcast_to", _ints(inputs[0]),
                                      _ints(inputs[1])))]


@shape_function("dyn.strided_slice")
def _strided_slice(attrs, inputs, out_ndims):
    data = _ints(inputs[0])
    begin, end, strides = (_ints(v) for v in inputs[1:4])
    out = list(data)
    for axis, (b, e, s) in enumerate(zip(begin, end, strides)):
        if s == 0:
            raise ValueError(f"dyn.strided_slice: stride on axis {axis} must not be 0")
        if attrs.slice_mode == "size":
            start = slice(b, None).indices(data[axis])[0]
            e, s = (None if e < 0 else start + e), 1
        out[axis] = len(range(*slice(b, e, s).indices(data[axis])))
    return [_shape(*out)]


@shape_function("dyn.tile")
def _tile(attrs, inputs, out_ndims):
    data, reps = _ints(inputs[0]), _ints(inputs[1])
    if any(r < 0 for r in reps):
        raise ValueError(f"dyn.tile: reps must be non-negative, got {reps}")
    rank = max(len(data), len(reps))
    data, reps = [1] * (rank - len(data)) + data, [1] * (rank - len(reps)) + reps
    return [_shape(*(d * r for d, r in zip(data, reps)))]


def _init(attrs, inputs, out_ndims):
    shape = _ints(inputs[-1])
    if any(d < 0 for d in shape):
        raise ValueError(f"shape {shape} has a negative dimension")
    return [_shape(*shape)]


for _name in ("dyn.zeros", "dyn.ones", "dyn.full"):
    shape_function(_name)(_init)


@shape_function("dyn.topk")
def _topk(attrs, inputs, out_ndims):
    data, k = _ints(inputs[0]), int(_scalar(inputs[1]))
    axis = attrs.axis % len(data)
    out = list(data)
    out[axis] = data[axis] if k < 1 else min(k, data[axis])
    return [_shape(*out)] * len(out_ndims)


@shape_function("dyn.one_hot")
def _one_hot(attrs, inputs, out_ndims):
    indices, depth = _ints(inputs[0]), int(_scalar(inputs[3]))
    if depth < 0:
        raise ValueError(f"dyn.one_hot: depth must be >= 0, got {depth}")
    axis = attrs.axis % (len(indices) + 1) if attrs.axis < 0 else attrs.axis
    return [_shape(*(indices[:axis] + [depth] + indices[axis:]))]


@shape_function("dyn.expand_dims")
def _expand_dims(attrs, inputs, out_ndims):
    data, axis = _ints(inputs[0]), int(_scalar(inputs[1]))
    if not -len(data) - 1 <= axis <= len(data):
        raise ValueError(f"dyn.expand_dims: axis {axis} is out of range for rank {len(data)}")
    axis %= len(data) + 1
    return [_shape(*(data[:axis] + [1] * attrs.num_newaxis + data[axis:]))]


@shape_function("dyn.squeeze")
def _squeeze(attrs, inputs, out_ndims):
    data, axes = _ints(inputs[0]), _ints(inputs[1])
    drop = set()
    for a in axes:
        if not -len(data) <= a < len(data) or data[a] != 1:
            raise ValueError(f"dyn.squeeze: axis {a} of {tuple(data)} is not a dim of size 1")
        drop.add(a % len(data))
    return [_shape(*(d for i, d in enumerate(data) if i not in drop))]


@shape_function("dyn.nn.pad")
def _pad(attrs, inputs, out_ndims):
    data = _ints(inputs[0])
    widths = np.asarray(inputs[1]).reshape(-1, 2).tolist()
    out = [d + int(b) + int(a) for d, (b, a) in zip(data, widths)]
    if len(widths) != len(data) or any(d < 0 for d in out):
        raise ValueError(f"dyn.nn.pad: pad_width {widths} does not fit data {tuple(data)}")
    return [_shape(*out)]


@shape_function("dyn.nn.upsampling")
def _upsampling(attrs, inputs, out_ndims):
    data = _ints(inputs[0])
    out = list(data)
    for axis, scale in ((attrs.layout.index("H"), inputs[1]), (attrs.layout.index("W"),
                                                                inputs[2])):
        out[axis] = int(np.rint(data[axis] * float(_scalar(scale))))
        if out[axis] < 1:
            raise ValueError(f"dyn.nn.upsampling: scale {_scalar(scale)} empties axis {axis}")
    return [_shape(*out)]


def _reduce_keepdims(attrs, inputs, out_ndims):
    """A dyn reduction: the axes in inputs[1] become 1s (each named once)."""
    data, axes = _ints(inputs[0]), _ints(inputs[1])
    norm = [a + len(data) if a < 0 else a for a in axes]
    if any(not 0 <= a < len(data) for a in norm) or len(set(norm)) != len(norm):
        raise ValueError(f"reduction axes {axes} are out of range for rank {len(data)} or "
                         "name an axis twice")
    return [_shape(*(1 if i in norm else d for i, d in enumerate(data)))]


for _name in ("dyn.sum", "dyn.mean", "dyn.max", "dyn.min", "dyn.prod"):
    shape_function(_name)(_reduce_keepdims)


@shape_function("arange")
def _arange(attrs, inputs, out_ndims):
    start, stop, step = (float(_scalar(v)) for v in inputs)
    if step == 0:
        raise ValueError("arange: step must not be 0")
    return [_shape(max(0, math.ceil((stop - start) / step)))]


@shape_function("argwhere")
def _argwhere(attrs, inputs, out_ndims):
    """(nonzero count, rank) of the input's value."""
    data = np.asarray(inputs[0])
    return [_shape(np.count_nonzero(data), data.ndim)]
