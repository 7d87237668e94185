"""Vision and indexing ONNX ops: GridSample, AffineGrid, RoiAlign, ReverseSequence, MaxUnpool,
TensorScatter, Det and MaxPool's Indices output.

GridSample and RoiAlign map onto registry ops (image.grid_sample, vision.roi_align); the rest
compose from existing ops (gather, scatter_elements, take, where, batch_matmul) with index
tensors built at compile time from the static shapes.
"""
from __future__ import annotations

import itertools

import numpy as np

from compiler.ir.expr import Tuple
from . import dynamic_shapes
from .common import NodeContext, as_ints, const, converter, norm_axis, op

_GRID_MODES = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest",
               "cubic": "bicubic", "bicubic": "bicubic"}


@converter("GridSample", since=16)
def _grid_sample(ctx: NodeContext, inputs):
    x, grid = inputs
    rank = ctx.rank(x)
    if rank not in (4, 5):
        raise ctx.error(f"only 4-D and 5-D inputs are supported, got shape {ctx.shape(x)}")
    mode = ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear")
    if mode not in _GRID_MODES:
        raise ctx.error(f"mode must be one of {sorted(_GRID_MODES)}, got {mode!r}")
    channel_first = op("transpose", grid, axes=[0, rank - 1] + list(range(1, rank - 1)))
    return op("image.grid_sample", x, channel_first, method=_GRID_MODES[mode],
              layout="NCHW" if rank == 4 else "NCDHW",
              padding_mode=ctx.attr("padding_mode", "zeros"),
              align_corners=bool(ctx.attr("align_corners", 0)))


def _base_coords(size: int, align_corners: bool) -> np.ndarray:
    """Normalised pixel-centre coordinates along one axis."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size)  # one point: -1 (ONNX's reference; onnxruntime 1)
    return (np.arange(size) * 2.0 + 1.0) / size - 1.0


@converter("AffineGrid", since=20)
def _affine_grid(ctx: NodeContext, inputs):
    theta, size = inputs
    if ctx.maybe_value(size) is None:
        return _run_time_affine_grid(ctx, theta, size)
    dims = as_ints(ctx.value(size, "size"))
    nd = len(dims) - 2
    if nd not in (2, 3) or tuple(ctx.shape(theta)) != (dims[0], nd, nd + 1):
        raise ctx.error(f"theta {ctx.shape(theta)} does not match size {dims} (expected "
                        f"[N, {nd}, {nd + 1}] for a {nd}-D grid)")
    align = bool(ctx.attr("align_corners", 0))
    axes = [_base_coords(d, align) for d in dims[2:]]  # D?, H, W
    mesh = np.meshgrid(*axes, indexing="ij")
    # columns are (x, y[, z], 1): the fastest (width) coordinate first, as GridSample reads it
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(mesh[0].size)], axis=1)
    dtype = ctx.dtype(theta)
    points = const(base[None].astype(dtype), dtype)
    grid = op("nn.batch_matmul", points, theta, out_dtype="", transpose_a=False,
              transpose_b=True)
    return ctx.reshape(grid, [dims[0]] + dims[2:] + [nd])


def _run_time_affine_grid(ctx: NodeContext, theta, size):
    """AffineGrid to a size known at run time: each axis' coordinates from arange, the mesh
    by broadcasting, the grid reshaped to [N, (D,) H, W, nd] from the size tensor itself."""
    nd = ctx.shape(theta)[1]
    if dynamic_shapes.static_length(ctx, size, "size") != nd + 2 or nd not in (2, 3) or \
            tuple(ctx.shape(theta))[1:] != (nd, nd + 1):
        raise ctx.error(f"theta {ctx.shape(theta)} does not match a size of "
                        f"{ctx.shape(size)[0]} values (expected [N, {nd}, {nd + 1}])")
    dtype, align = ctx.dtype(theta), bool(ctx.attr("align_corners", 0))
    size = op("cast", size, dtype="int64")

    def scalar(value):
        return const(np.array(value, dtype), dtype)
    coords = []
    for k in range(nd):  # D?, H, W
        n = op("cast", op("take", size, const(np.int64(k + 2), "int64"), axis=0, batch_dims=0,
                          mode="fast"), dtype=dtype)
        i = op("arange", scalar(0), n, scalar(1), start=None, stop=None, step=None, dtype=dtype)
        if align:  # linspace(-1, 1, n); one point is -1
            step = op("divide", scalar(2), op("maximum", op("subtract", n, scalar(1)),
                                              scalar(1)))
            c = op("subtract", op("multiply", i, step), scalar(1))
        else:
            c = op("subtract", op("divide", op("add", op("multiply", i, scalar(2)), scalar(1)),
                                  n), scalar(1))
        shape = [1] * nd
        shape[k] = -1
        coords.append(op("reshape", c, newshape=shape, allowzero=False))
    zero = coords[0]
    for c in coords[1:]:
        zero = op("add", zero, c)
    zero = op("multiply", zero, scalar(0))  # the mesh's shape
    columns = [op("add", c, zero) for c in reversed(coords)] + [op("add", zero, scalar(1))]
    points = op("reshape", op("stack", Tuple(columns), axis=nd), newshape=[1, -1, nd + 1],
                allowzero=False)
    grid = op("nn.batch_matmul", points, theta, out_dtype="", transpose_a=False,
              transpose_b=True)
    out_shape = op("concatenate", Tuple([
        op("strided_slice", size, begin=[0], end=[1], strides=[1], slice_mode="end", axes=None),
        op("strided_slice", size, begin=[2], end=[nd + 2], strides=[1], slice_mode="end",
           axes=None), const(np.array([nd], np.int64), "int64")]), axis=0)
    return op("dyn.reshape", grid, out_shape, allowzero=False)


def _along(values: np.ndarray, axis: int, rank: int) -> np.ndarray:
    shape = [1] * rank
    shape[axis] = -1
    return values.reshape(shape)


@converter("ReverseSequence", since=10)
def _reverse_sequence(ctx: NodeContext, inputs):
    x, lens = inputs
    shape, rank = ctx.shape(x), ctx.rank(x)
    t_axis = norm_axis(ctx, int(ctx.attr("time_axis", 0)), rank, "time_axis")
    b_axis = norm_axis(ctx, int(ctx.attr("batch_axis", 1)), rank, "batch_axis")
    if {t_axis, b_axis} != {0, 1}:
        raise ctx.error(f"time_axis and batch_axis must be 0 and 1, got {t_axis}, {b_axis}")
    t = const(_along(np.arange(shape[t_axis], dtype=np.int64), t_axis, rank), "int64")
    n = ctx.reshape(op("cast", lens, dtype="int64"), _along(np.zeros(shape[b_axis]), b_axis,
                                                          rank).shape)
    flipped = op("subtract", op("subtract", n, const(1, "int64")), t)
    source = op("where", op("less", t, n), flipped, t)
    index = op("broadcast_to", source, shape=list(shape))
    return op("gather", x, index, axis=t_axis)


@converter("TensorScatter", since=24)
def _tensor_scatter(ctx: NodeContext, inputs):
    past, update = inputs[0], inputs[1]
    writes = inputs[2] if len(inputs) > 2 else None
    shape, rank = ctx.shape(past), ctx.rank(past)
    axis = norm_axis(ctx, int(ctx.attr("axis", -2)), rank)
    if axis == 0:
        raise ctx.error("axis must not be the batch axis 0")
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.error(f"mode must be 'linear' or 'circular', got {mode!r}")
    m, length = shape[axis], ctx.shape(update)[axis]
    s = const(_along(np.arange(m, dtype=np.int64), axis, rank), "int64")
    if writes is None:
        k = s
    else:
        start = ctx.reshape(op("cast", writes, dtype="int64"), [shape[0]] + [1] * (rank - 1))
        k = op("subtract", s, start)
    if mode == "circular":
        k = op("floor_mod", k, const(m, "int64"))
    valid = op("logical_and", op("greater_equal", k, const(0, "int64")),
               op("less", k, const(length, "int64")))
    index = op("broadcast_to", op("clip", k, a_min=0, a_max=max(length - 1, 0)),
               shape=list(shape))
    picked = op("gather", update, index, axis=axis)
    return op("where", op("broadcast_to", valid, shape=list(shape)), picked, past)


@converter("MaxUnpool", since=9)
def _max_unpool(ctx: NodeContext, inputs):
    x, indices = inputs[0], inputs[1]
    shape = ctx.shape(x)
    n = len(shape) - 2
    kernel = list(ctx.attr("kernel_shape"))
    strides = list(ctx.attr("strides", [1] * n))
    pads = list(ctx.attr("pads", [0] * (2 * n)))
    inferred = list(shape[:2]) + [(shape[2 + i] - 1) * strides[i] - pads[i] - pads[n + i]
                                  + kernel[i] for i in range(n)]
    dtype = ctx.dtype(x)
    flat = op("scatter_elements", const(np.zeros(int(np.prod(inferred)), dtype), dtype),
              ctx.reshape(op("cast", indices, dtype="int64"), [-1]), ctx.reshape(x, [-1]), axis=0,
              reduction="update")
    out = ctx.reshape(flat, inferred)
    if len(inputs) < 3 or inputs[2] is None:
        return out
    # indices address the inferred shape; a larger output_shape pads at the end (as ONNX's
    # reference does)
    wanted = as_ints(ctx.value(inputs[2], "output_shape"))
    if len(wanted) != len(inferred) or any(w < i for w, i in zip(wanted, inferred)):
        raise ctx.error(f"output_shape {wanted} is smaller than the unpooled shape {inferred}")
    if wanted == inferred:
        return out
    return op("nn.pad", out, const(0, dtype),
              pad_width=[[0, w - i] for w, i in zip(wanted, inferred)], pad_mode="constant")


def _entry(x, i: int, j: int, rank: int):
    return op("strided_slice", x, begin=[i, j], end=[i + 1, j + 1], strides=[1, 1],
              axes=[rank - 2, rank - 1], slice_mode="end")


def _permutation_sign(perm: tuple) -> int:
    sign, seen = 1, list(perm)
    for i in range(len(seen)):
        while seen[i] != i:
            j = seen[i]
            seen[i], seen[j] = seen[j], seen[i]
            sign = -sign
    return sign


MAX_DET_SIZE = 4


@converter("Det", since=11)
def _det(ctx: NodeContext, inputs):
    (x,) = inputs
    shape, rank, dtype = ctx.shape(x), ctx.rank(x), ctx.dtype(x)
    if rank < 2 or shape[-1] != shape[-2]:
        raise ctx.error(f"input must be [..., n, n], got shape {shape}")
    n = shape[-1]
    if n > MAX_DET_SIZE:
        raise ctx.error(f"Det of {n}x{n} matrices is not supported (the Leibniz expansion is "
                        f"used up to {MAX_DET_SIZE}x{MAX_DET_SIZE})")
    batch = list(shape[:-2])
    if n == 0:
        return const(np.ones(batch, dtype), dtype)
    entries = {(i, j): _entry(x, i, j, rank) for i in range(n) for j in range(n)}
    total = None
    for perm in itertools.permutations(range(n)):
        term = entries[(0, perm[0])]
        for i in range(1, n):
            term = op("multiply", term, entries[(i, perm[i])])
        if total is None:
            total = term if _permutation_sign(perm) > 0 else op("negative", term)
        else:
            total = op("add" if _permutation_sign(perm) > 0 else "subtract", total, term)
    return ctx.reshape(total, batch)


@converter("RoiAlign", since=10)
def _roi_align(ctx: NodeContext, inputs):
    x, rois, batch = inputs
    dtype = ctx.dtype(x)
    mode = ctx.attr("coordinate_transformation_mode",
                    "half_pixel" if ctx.opset >= 16 else "output_half_pixel")
    if mode not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(f"coordinate_transformation_mode {mode!r} is not supported")
    ratio = int(ctx.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise ctx.error("sampling_ratio=0 (adaptive) makes the sample count depend on the box "
                        "sizes; only a positive sampling_ratio is supported")
    index = ctx.reshape(op("cast", batch, dtype=dtype), [ctx.shape(rois)[0], 1])
    boxes = op("concatenate", Tuple([index, op("cast", rois, dtype=dtype)]), axis=1)
    return op("vision.roi_align", x, boxes,
              pooled_size=(int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))),
              spatial_scale=float(ctx.attr("spatial_scale", 1.0)), sample_ratio=ratio,
              layout="NCHW", mode=ctx.attr("mode", "avg"), aligned=mode == "half_pixel")
