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
    if axes is not None and not isinstance(axes, list):  # the axes at run time too
        k = static_length(ctx, axes, "axes")
        axes = checked_axes(ctx, axes, rank)
        half = [op("strided_slice", pads, begin=[h * k], end=[(h + 1) * k], strides=[1],
                   slice_mode="end", axes=None) for h in (0, 1)]
        pads = op("concatenate", Tuple([scatter_axes(ctx, axes, rank, h, 0) for h in half]),
                  axis=0)
    elif axes is not None:  # pads for the listed axes only: zeros elsewhere
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


# --- axes, counts and sizes known at run time ---------------------------------------------------

def scalar(ctx: NodeContext, expr):
    """A one-element input (0-D or [1]) as an int64 scalar."""
    expr = _as_int64(ctx, expr)
    return op("reshape", expr, newshape=[], allowzero=False) if ctx.rank(expr) else expr


def static_length(ctx: NodeContext, expr, what: str) -> int:
    """The static length of a 1-D input whose values arrive at run time."""
    shape = ctx.shape(expr)
    if len(shape) != 1 or isinstance(shape[0], Any):
        raise ctx.error(f"the {what} input must be 1-D of a static length, got "
                        f"{ctx.type_of(expr)}")
    return int(shape[0])


def checked_axes(ctx: NodeContext, axes, rank: int):
    """Run-time axes (a scalar or a vector) normalised to [0, rank): a take from arange(rank),
    which fails at run time with an index error for an axis outside [-rank, rank)."""
    table = const(np.arange(rank, dtype=np.int64), "int64")
    return op("take", table, _as_int64(ctx, axes), axis=0, batch_dims=0, mode="fast")


def must_be_zero(ctx: NodeContext, value):
    """0 (an int64 scalar) when `value` is 0 at run time, else an index error there: a guard
    added into a computed shape."""
    return op("take", const(np.zeros(1, np.int64), "int64"), op("abs", value), axis=0,
              batch_dims=0, mode="fast")


def select_axis(ctx: NodeContext, axis, rank: int, build):
    """build(a) for the axis `axis` (a checked run-time scalar) names: a where over every
    axis, for ops whose output shape does not depend on the axis (CumSum)."""
    out = build(rank - 1)
    for a in range(rank - 2, -1, -1):
        out = op("where", op("equal", axis, const(np.int64(a), "int64")), build(a), out)
    return out


def unsqueeze(ctx: NodeContext, x, axes_expr):
    """Unsqueeze at axes known at run time: the output shape computed (1s where an axis names
    the position, the input's dims in order elsewhere), then dyn.reshape."""
    shape = ctx.shape(x)
    k = static_length(ctx, axes_expr, "axes")
    rank = len(shape) + k
    axes = op("reshape", checked_axes(ctx, axes_expr, rank), newshape=[1, k], allowzero=False)
    pos = const(np.arange(rank, dtype=np.int64).reshape(rank, 1), "int64")
    named = op("greater", op("sum", op("cast", op("equal", pos, axes), dtype="int64"),
                             axis=[1], keepdims=False, exclude=False),
               const(np.int64(0), "int64"))
    # the axes name k distinct positions, else an error at run time
    count = op("sum", op("cast", named, dtype="int64"), axis=None, keepdims=False,
               exclude=False)
    guard = must_be_zero(ctx, op("subtract", count, const(np.int64(k), "int64")))
    ones = const(np.ones(rank, np.int64), "int64")
    if not shape:
        dims = ones
    else:
        before = op("sum", op("cast", op("less", axes, pos), dtype="int64"), axis=[1],
                    keepdims=False, exclude=False)
        src = op("clip", op("subtract", const(np.arange(rank, dtype=np.int64), "int64"),
                            before), a_min=0.0, a_max=float(len(shape) - 1))
        given = op("take", op("shape_of", x, dtype="int64"), src, axis=0, batch_dims=0,
                   mode="fast")
        dims = op("where", named, ones, given)
    return op("dyn.reshape", x, op("add", dims, guard), allowzero=False)


def scatter_axes(ctx: NodeContext, axes, rank: int, values, default: int):
    """A [rank] int64 vector holding values[i] at position axes[i] (checked run-time axes, a
    [k] vector) and `default` elsewhere."""
    k = ctx.shape(axes)[0]
    match = op("equal", op("reshape", axes, newshape=[k, 1], allowzero=False),
               const(np.arange(rank, dtype=np.int64).reshape(1, rank), "int64"))
    zero = const(np.int64(0), "int64")
    picked = op("sum", op("where", match, op("reshape", _as_int64(ctx, values), newshape=[k, 1],
                                             allowzero=False), zero),
                axis=[0], keepdims=False, exclude=False)
    present = op("sum", op("cast", match, dtype="int64"), axis=[0], keepdims=False,
                 exclude=False)
    return op("where", op("greater", present, zero), picked, const(np.int64(default), "int64"))


def slice_run_time_axes(ctx: NodeContext, x, starts, ends, axes, steps):
    """Slice whose axes (or steps) arrive at run time: full-rank begin/end/strides scattered
    from them, then dyn.strided_slice (numpy's clamping, as dyn_slice)."""
    rank = ctx.rank(x)
    k = static_length(ctx, starts, "starts")
    axes = checked_axes(ctx, axes, rank) if axes is not None else \
        const(np.arange(k, dtype=np.int64), "int64")
    steps = steps if steps is not None else const(np.ones(k, np.int64), "int64")
    return op("dyn.strided_slice", x, scatter_axes(ctx, axes, rank, starts, 0),
              scatter_axes(ctx, axes, rank, ends, INT64_MAX),
              scatter_axes(ctx, axes, rank, steps, 1), slice_mode="end")


def split(ctx: NodeContext, x, sizes_expr, axis: int, count: int) -> list:
    """Split into `count` parts whose sizes arrive at run time: part i is a dyn.strided_slice
    from the sum of the sizes before it; the sizes must add up to the axis length."""
    if static_length(ctx, sizes_expr, "split") != count:
        raise ctx.error(f"split has {ctx.shape(sizes_expr)[0]} sizes for {count} outputs")
    sizes = _as_int64(ctx, sizes_expr)
    dim = op("take", op("shape_of", x, dtype="int64"), const(np.int64(axis), "int64"), axis=0,
             batch_dims=0, mode="fast")
    total = op("sum", sizes, axis=None, keepdims=False, exclude=False)
    guard = op("reshape", must_be_zero(ctx, op("subtract", dim, total)), newshape=[1],
               allowzero=False)
    lead = const(np.zeros(axis, np.int64), "int64")
    strides = const(np.ones(axis + 1, np.int64), "int64")
    parts, begin = [], const(np.zeros(1, np.int64), "int64")
    for i in range(count):
        size = op("strided_slice", sizes, begin=[i], end=[i + 1], strides=[1],
                  slice_mode="end", axes=None)
        end = op("add", begin, size)
        parts.append(op("dyn.strided_slice", x,
                        op("concatenate", Tuple([lead, op("add", begin, guard)]), axis=0),
                        op("concatenate", Tuple([const(np.full(axis, INT64_MAX, np.int64),
                                                       "int64"), end]), axis=0),
                        strides, slice_mode="end"))
        begin = end
    return parts


def center_crop_pad(ctx: NodeContext, x, target, axes: list):
    """CenterCropPad to sizes known at run time: one dyn.nn.pad whose negative widths crop
    (the odd element of a difference at the end, both ways)."""
    rank = ctx.rank(x)
    k = static_length(ctx, target, "shape")
    if k != len(axes):
        raise ctx.error(f"shape has {k} values for {len(axes)} axes")
    dims = op("take", op("shape_of", x, dtype="int64"), const(np.array(axes, np.int64), "int64"),
              axis=0, batch_dims=0, mode="fast")
    diff = op("subtract", _as_int64(ctx, target), dims)
    two = const(np.int64(2), "int64")
    before = op("where", op("greater_equal", diff, const(np.int64(0), "int64")),
                op("floor_divide", diff, two),
                op("negative", op("floor_divide", op("negative", diff), two)))
    after = op("subtract", diff, before)
    index = const(np.array(axes, np.int64), "int64")
    widths = op("stack", Tuple([scatter_axes(ctx, index, rank, before, 0),
                                scatter_axes(ctx, index, rank, after, 0)]), axis=1)
    return op("dyn.nn.pad", x, widths, const(0, ctx.dtype(x)), pad_mode="constant")
