"""ONNX ops whose output shape depends on the data: NonZero, Compress, Unique,
NonMaxSuppression.

NonZero and Compress are argwhere (TVM's), whose row count is an Any dim sized at run time
by its shape function. Unique and NonMaxSuppression are TVM's unique and
vision.all_class_non_max_suppression, static-shaped with a count; their meaningful prefix is
taken with `take` over argwhere(arange(n) < count), so the only dynamic allocation is
argwhere's (the VM sizes it, then runs the kernel).
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Tuple, TupleGetItem

from .common import const, converter, norm_axis, op


def _indices(mask):
    """The positions of a 1-D mask's true elements: (count,) int32."""
    return op("reshape", op("argwhere", mask), newshape=[-1])


def _first(x, count, length: int, axis: int = 0):
    """x's first `count` ((1,) int tensor) entries along axis, of `length`."""
    positions = const(np.arange(length, dtype=np.int64), "int64")
    mask = op("less", positions, op("cast", count, dtype="int64"))
    return op("take", x, _indices(mask), axis=axis, mode="clip")


@converter("NonZero", 9)
def _nonzero(ctx, inputs):
    coords = op("cast", op("argwhere", inputs[0]), dtype="int64")
    return op("transpose", coords, axes=[1, 0])


@converter("Compress", 9)
def _compress(ctx, inputs):
    x, condition = inputs
    if ctx.rank(condition) != 1:
        raise ctx.error(f"condition must be 1-D, got shape {ctx.shape(condition)}")
    if ctx.dtype(condition) != "bool":
        condition = op("not_equal", condition, const(0, ctx.dtype(condition)))
    axis = ctx.attr("axis")
    if axis is None:
        x, axis = op("reshape", x, newshape=[-1]), 0
    else:
        axis = norm_axis(ctx, int(axis), ctx.rank(x))
    return op("take", x, _indices(condition), axis=axis, mode="clip")


@converter("Unique", 11)
def _unique(ctx, inputs):
    x = inputs[0]
    shape = ctx.shape(x)
    axis = ctx.attr("axis")
    if axis is None:
        items, rest, perm = op("reshape", x, newshape=[-1]), (), None
    else:
        axis = norm_axis(ctx, int(axis), len(shape))
        perm = [axis] + [d for d in range(len(shape)) if d != axis]
        rest = tuple(shape[d] for d in perm[1:])
        moved = op("transpose", x, axes=perm) if axis else x
        items = op("reshape", moved, newshape=[int(shape[axis]), -1])
    n = int(shape[axis]) if axis is not None else int(np.prod(shape, dtype=np.int64))
    found = op("unique", items, sorted=bool(ctx.attr("sorted", 1)), return_counts=True)
    count = TupleGetItem(found, 3)
    values = _first(TupleGetItem(found, 0), count, n)
    if axis is not None:
        values = op("reshape", values, newshape=[-1, *rest])
        if axis:
            values = op("transpose", values, axes=list(np.argsort(perm)))
    first = op("cast", _first(TupleGetItem(found, 1), count, n), dtype="int64")
    inverse = op("cast", TupleGetItem(found, 2), dtype="int64")
    counts = op("cast", _first(TupleGetItem(found, 4), count, n), dtype="int64")
    return [values, first, inverse, counts]


def _corner_boxes(boxes, dtype: str):
    """ONNX's center_point_box format [x_c, y_c, w, h] as corners [y1, x1, y2, x2]."""
    parts = op("split", boxes, indices_or_sections=[1, 2, 3], axis=2)
    xc, yc, w, h = (TupleGetItem(parts, i) for i in range(4))
    half_w, half_h = (op("divide", v, const(2.0, dtype)) for v in (w, h))
    corners = [op("subtract", yc, half_h), op("subtract", xc, half_w),
               op("add", yc, half_h), op("add", xc, half_w)]
    return op("concatenate", Tuple(corners), axis=2)


@converter("NonMaxSuppression", 10)
def _non_max_suppression(ctx, inputs):
    boxes, scores = inputs[0], inputs[1]
    extra = list(inputs[2:]) + [None] * (5 - len(inputs))
    limit, iou, score = extra[:3]
    if int(ctx.attr("center_point_box", 0)):
        boxes = _corner_boxes(boxes, ctx.dtype(boxes))
    dtype = ctx.dtype(scores)
    limit = const(0, "int64") if limit is None else limit
    iou = const(0.0, dtype) if iou is None else op("cast", iou, dtype=dtype)
    score = const(np.nan, dtype) if score is None else op("cast", score, dtype=dtype)
    found = op("vision.all_class_non_max_suppression", boxes, scores, limit, iou, score,
               output_format="onnx")
    batch, classes, count = ctx.shape(scores)
    rows = int(batch) * int(classes) * int(count)
    return _first(TupleGetItem(found, 0), TupleGetItem(found, 1), rows)
