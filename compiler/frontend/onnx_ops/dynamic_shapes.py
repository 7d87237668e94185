"""Shape-valued ONNX inputs that are not constants: Reshape, Expand, Tile, Slice,
ConstantOfShape and Range when the shape (or bounds) arrives at run time.

Where the value is known symbolically (onnx_symbolic: a dynamic dim's own symbol, as
Reshape(x, Concat(Shape(x)[0:2], [12, 64])) gives) the static op is used, with TVM's reshape
codes (0 copies a dim, -1 infers one) or "to the end" for a slice bound equal to the dim; only
what depends on data becomes a dyn.* op. A static model never comes here (tensor.py keeps its
path for constant shapes).
"""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import Any
from compiler.ir.expr import Tuple

from .common import NodeContext, const, op, reshape_codes

INT64_MAX = np.iinfo(np.int64).max
PAD_MODES = ("constant", "edge", "reflect")  # dyn.nn.pad's


def _as_int64(ctx: NodeContext, expr):
    return expr if ctx.dtype(expr) == "int64" else op("cast", expr, dtype="int64")


def _entries(value) -> list | None:
    return None if value is None else list(np.asarray(value).reshape(-1))


def shape_of(ctx: NodeContext, x, start: int, end: int | None):
    """Shape for a tensor with dynamic dims: shape_of at run time, sliced by start/end."""
    out = op("shape_of", x, dtype="int64")
    rank = ctx.rank(x)
    begin = start + rank if start < 0 else start
    stop = rank if end is None else (end + rank if end < 0 else end)
    if (begin, stop) == (0, rank):
        return out
    return op("strided_slice", out, begin=[max(begin, 0)], end=[max(stop, 0)], strides=[1],
              slice_mode="end", axes=None)


def size_of(ctx: NodeContext, x):
    return op("ndarray_size", x, dtype="int64")


def reshape(ctx: NodeContext, x, shape_expr, allowzero: bool):
    target = _entries(ctx.symbolic_value(shape_expr))
    if target is not None:
        new = reshape_codes(tuple(ctx.shape(x)), target, allowzero)
        if new is not None:
            return op("reshape", x, newshape=new, allowzero=allowzero)
    return op("dyn.reshape", x, _as_int64(ctx, shape_expr), allowzero=allowzero)


def _broadcast(shape: tuple, target: list) -> list | None:
    """numpy broadcasting of shape and target, or None when the symbols leave it open."""
    rank = max(len(shape), len(target))
    a = [1] * (rank - len(shape)) + list(shape)
    b = [1] * (rank - len(target)) + list(target)
    out = []
    for x, t in zip(a, b):
        if t == 1 or x == t or (isinstance(t, Any) and not isinstance(x, Any)):
            out.append(x)  # a dynamic target dim meeting a static one: it is 1 or the same
        elif x == 1 or not isinstance(x, Any):
            out.append(t)
        else:
            return None
    return out


def expand(ctx: NodeContext, x, shape_expr):
    shape = ctx.shape(x)
    target = _entries(ctx.symbolic_value(shape_expr))
    out = None if target is None else _broadcast(shape, target)
    if out is not None:
        if len(out) == len(shape) and all(o == s for o, s in zip(out, shape)):
            return x
        if not any(isinstance(d, Any) for d in out):
            return op("broadcast_to", x, shape=[int(d) for d in out])
    # at run time: the target with its 1s replaced by the input's dims (aligned right)
    target_expr = _as_int64(ctx, shape_expr)
    rank, length = len(shape), ctx.shape(shape_expr)[0]
    if isinstance(length, Any):
        raise ctx.error(f"the shape input's length (the output rank) must be static, got "
                        f"{ctx.type_of(shape_expr)}")
    given = op("shape_of", x, dtype="int64")
    if length > rank:
        given = op("concatenate", Tuple([const(np.ones(length - rank, np.int64), "int64"),
                                            given]), axis=0)
    elif length < rank:
        target_expr = op("concatenate", Tuple([const(np.ones(rank - length, np.int64),
                                                        "int64"), target_expr]), axis=0)
    one = const(np.int64(1), "int64")
    out_shape = op("where", op("equal", target_expr, one), given, target_expr)
    return op("dyn.broadcast_to", x, out_shape)


def tile(ctx: NodeContext, x, reps_expr):
    reps = _entries(ctx.symbolic_value(reps_expr))
    if reps is not None and not any(isinstance(r, Any) for r in reps):
        return op("tile", x, reps=[int(r) for r in reps])
    return op("dyn.tile", x, _as_int64(ctx, reps_expr))


def constant_of_shape(ctx: NodeContext, shape_expr, fill: np.ndarray):
    """A dynamic-shaped fill (the static case stays a constant in tensor.py)."""
    return op("dyn.full", const(fill.reshape(()), fill.dtype.name), _as_int64(ctx, shape_expr),
              dtype=fill.dtype.name)


def arange(ctx: NodeContext, start, limit, delta):
    dtype = ctx.dtype(start)
    scalars = [op("reshape", e, newshape=[], allowzero=False) if ctx.rank(e) else e
               for e in (start, limit, delta)]
    return op("arange", *scalars, start=None, stop=None, step=None, dtype=dtype)



def slice_bound(value, dim) -> int | None:
    """A Slice start/end as an int: a symbol equal to the axis' dim means past its last
    element (INT64_MAX, which strided_slice clamps either way); another symbol, None."""
    if not isinstance(value, Any):
        return int(value)
    return INT64_MAX if value == dim else None


def dyn_slice(ctx: NodeContext, x, starts, ends, axes: list, steps: list):
    """Slice with bounds read at run time: dyn.strided_slice over the leading axes up to the
    last sliced one (numpy's clamping; ONNX's differs only for a negative step starting
    before -dim)."""
    k = max(axes) + 1
    pos = {a: i for i, a in enumerate(axes)}

    def vector(values, default: int):
        parts = []
        for a in range(k):
            if a in pos:
                item = op("take", _as_int64(ctx, values), const(np.int64(pos[a]), "int64"),
                          axis=0, batch_dims=0, mode="fast")
                parts.append(op("expand_dims", item, axis=0, num_newaxis=1))
            else:
                parts.append(const(np.array([default], np.int64), "int64"))
        return op("concatenate", Tuple(parts), axis=0)
    strides = const(np.array([steps[pos[a]] if a in pos else 1 for a in range(k)], np.int64),
                    "int64")
    return op("dyn.strided_slice", x, vector(starts, 0), vector(ends, INT64_MAX), strides,
              slice_mode="end")


def pad(ctx: NodeContext, x, pads_expr, mode: str, value, axes):
    """Pad with pads read at run time: dyn.nn.pad over [rank, 2] widths (axes scattered in)."""
    rank = ctx.rank(x)
    pads = _as_int64(ctx, pads_expr)
    if axes is not None:  # pads for the listed axes only: zeros elsewhere
        axes = [a % rank for a in axes]
        n = len(axes)
        zero = const(np.zeros(1, np.int64), "int64")
        parts = []
        for half in (0, 1):
            for a in range(rank):
                if a in axes:
                    k = const(np.int64(half * n + axes.index(a)), "int64")
                    parts.append(op("expand_dims", op("take", pads, k, axis=0, batch_dims=0,
                                                      mode="fast"), axis=0, num_newaxis=1))
                else:
                    parts.append(zero)
        pads = op("concatenate", Tuple(parts), axis=0)
    width = op("transpose", op("reshape", pads, newshape=[2, rank], allowzero=False),
               axes=[1, 0])
    fill = value if value is not None else const(0, ctx.dtype(x))
    return op("dyn.nn.pad", x, width, fill, pad_mode=mode)
