"""Reductions (axes moved from attribute to input: ReduceSum at 13, the others at 18), ArgMax."""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import Any as AnyDim
from compiler.ir.expr import TupleGetItem
from .common import NodeContext, as_ints, const, converter, norm_axis, op

# ONNX name -> (opset where axes became an input, builder)
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _reduce_axes(ctx: NodeContext, inputs, since: int):
    """Normalised axes, or None for all; [] means 'no reduction' (noop_with_empty_axes); an
    expression when the axes input is known only at run time."""
    rank = ctx.rank(inputs[0])
    if ctx.opset >= since:
        given = inputs[1] if len(inputs) > 1 else None
        value = ctx.maybe_value(given)
        if value is None and given is not None and ctx.shape(given) != (0,):
            return _run_time_axes(ctx, given)
        axes = [] if value is None else as_ints(value)
        if not axes:
            return [] if ctx.attr("noop_with_empty_axes", 0) else None
    else:
        axes = ctx.attr("axes")
        if axes is None:
            return None
    return sorted({norm_axis(ctx, int(a), rank) for a in axes})


def _run_time_axes(ctx: NodeContext, axes):
    """The axes tensor as int64, checked to be 1-D of a static length (the output's rank
    without keepdims)."""
    shape = ctx.shape(axes)
    if len(shape) != 1 or isinstance(shape[0], AnyDim):
        raise ctx.error(f"the axes input must be 1-D of a static length, got "
                        f"{ctx.type_of(axes)}")
    return axes if ctx.dtype(axes) == "int64" else op("cast", axes, dtype="int64")


def _build_dynamic(kind: str, x, axes, keepdims: bool):
    """_build with the axes a run-time tensor: the dyn reductions keep the reduced dims as 1s,
    dyn.squeeze drops them."""
    def reduce(name, value):
        return op(f"dyn.{name}", value, axes)
    if kind in ("sum", "mean", "max", "min", "prod"):
        out = reduce(kind, x)
    elif kind == "l1":
        out = reduce("sum", op("abs", x))
    elif kind == "l2":
        out = op("sqrt", reduce("sum", op("multiply", x, x)))
    elif kind == "sumsquare":
        out = reduce("sum", op("multiply", x, x))
    elif kind == "logsum":
        out = op("log", reduce("sum", x))
    elif kind == "logsumexp":
        peak = reduce("max", x)
        out = op("add", op("log", reduce("sum", op("exp", op("subtract", x, peak)))), peak)
    else:
        raise ValueError(kind)
    return out if keepdims else op("dyn.squeeze", out, axes)


def _build(kind: str, x, axes, keepdims: bool, dtype: str):
    def reduce(name, value):
        return op(name, value, axis=axes, keepdims=keepdims, exclude=False)
    if kind in ("sum", "mean", "max", "min", "prod"):
        return reduce(kind, x)
    if kind == "l1":
        return reduce("sum", op("abs", x))
    if kind == "l2":
        return op("sqrt", reduce("sum", op("multiply", x, x)))
    if kind == "sumsquare":
        return reduce("sum", op("multiply", x, x))
    if kind == "logsum":
        return op("log", reduce("sum", x))
    if kind == "logsumexp":  # shifted by the max so large inputs do not overflow
        peak = op("max", x, axis=axes, keepdims=True, exclude=False)
        shifted = op("exp", op("subtract", x, peak))
        total = op("add", op("log", op("sum", shifted, axis=axes, keepdims=True,
                                       exclude=False)), peak)
        return total if keepdims else op("squeeze", total, axis=axes)
    raise ValueError(kind)


def _reducer(kind: str, onnx_name: str):
    since = _AXES_INPUT_SINCE.get(onnx_name, 18)

    def convert(ctx: NodeContext, inputs):
        x = inputs[0]
        axes = _reduce_axes(ctx, inputs, since)
        keepdims = bool(ctx.attr("keepdims", 1))
        if axes is not None and not isinstance(axes, list):
            return _build_dynamic(kind, x, axes, keepdims)
        if axes == []:
            return x
        if axes is None:
            axes = list(range(ctx.rank(x)))
        if any(ctx.shape(x)[a] == 0 for a in axes):
            return _empty_reduce(ctx, kind, x, axes, keepdims)
        return _build(kind, x, axes, keepdims, ctx.dtype(x))
    return convert


def _empty_reduce(ctx, kind, x, axes, keepdims):
    """A reduction over an empty axis is its identity element (a compile-time constant)."""
    shape = list(ctx.shape(x))
    out_shape = [1 if i in axes else d for i, d in enumerate(shape)] if keepdims else \
        [d for i, d in enumerate(shape) if i not in axes]
    dtype = ctx.dtype(x)
    identity = {"sum": 0, "l1": 0, "l2": 0, "sumsquare": 0, "prod": 1, "logsum": -np.inf,
                "logsumexp": -np.inf, "max": None, "min": None}.get(kind, 0)
    if kind in ("max", "min") and dtype == "bool":
        identity = kind == "min"
    elif kind in ("max", "min"):
        info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
        identity = (-np.inf if kind == "max" else np.inf) if np.dtype(dtype).kind == "f" else \
            (info.min if kind == "max" else info.max)
    if kind == "mean":
        identity = np.nan
    return const(np.full(out_shape, identity, dtype=dtype), dtype)


for _kind, _name in (("sum", "ReduceSum"), ("mean", "ReduceMean"), ("max", "ReduceMax"),
                     ("min", "ReduceMin"), ("prod", "ReduceProd"), ("l1", "ReduceL1"),
                     ("l2", "ReduceL2"), ("sumsquare", "ReduceSumSquare"),
                     ("logsum", "ReduceLogSum"), ("logsumexp", "ReduceLogSumExp")):
    converter(_name)(_reducer(_kind, _name))


def _arg(name: str):
    def convert(ctx: NodeContext, inputs):
        x = inputs[0]
        axis = norm_axis(ctx, int(ctx.attr("axis", 0)), ctx.rank(x))
        out = op(name, x, axis=[axis], keepdims=bool(ctx.attr("keepdims", 1)), exclude=False,
                 select_last_index=bool(ctx.attr("select_last_index", 0)))
        return op("cast", out, dtype="int64")
    return convert


converter("ArgMax")(_arg("argmax"))
converter("ArgMin")(_arg("argmin"))


def _topk(ctx: NodeContext, inputs, k):
    """k an int, or (known at run time) the K tensor: dyn.topk."""
    x = inputs[0]
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), ctx.rank(x))
    largest = bool(ctx.attr("largest", 1))
    if isinstance(k, int):
        out = op("topk", x, k=k, axis=axis, ret_type="both", is_ascend=not largest,
                 dtype="int64")
    else:
        k = op("reshape", k, newshape=[], allowzero=False) if ctx.rank(k) else k
        out = op("dyn.topk", x, k, axis=axis, ret_type="both", is_ascend=not largest,
                 dtype="int64")
    return [TupleGetItem(out, 0), TupleGetItem(out, 1)]


@converter("TopK")
def _topk_v1(ctx, inputs):
    return _topk(ctx, inputs, int(ctx.attr("k")))


@converter("TopK", since=10)
def _topk_v10(ctx, inputs):
    k = ctx.maybe_value(inputs[1])
    return _topk(ctx, inputs, inputs[1] if k is None else int(np.asarray(k).reshape(-1)[0]))
