"""Normalisation ONNX ops: BatchNormalization, Instance/Layer/Group normalisation, MVN, LRN,
LpNormalization."""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Tuple, TupleGetItem

from .common import const, converter, norm_axis, num_elements, op


def _channel(ctx, v, rank: int):
    """A per-channel vector shaped to broadcast against NC... data."""
    return ctx.reshape(v, [ctx.shape(v)[0]] + [1] * (rank - 2))


def _moments(x, axes: list):
    mean = op("mean", x, axis=axes, keepdims=True, exclude=False)
    centered = op("subtract", x, mean)
    var = op("mean", op("multiply", centered, centered), axis=axes, keepdims=True,
             exclude=False)
    return mean, centered, var


@converter("BatchNormalization")
def _batch_norm(ctx, inputs):
    x, scale, bias, mean, var = inputs[:5]
    eps = float(ctx.attr("epsilon", 1e-5))
    training = ctx.opset >= 14 and ctx.attr("training_mode", 0)
    legacy_training = ctx.opset < 7 and not ctx.attr("is_test", 0) and \
        any(ctx.output_used(i) for i in range(1, 5))
    if legacy_training:
        raise ctx.error("training-mode BatchNormalization (is_test=0) is not supported")
    if not training:
        if any(ctx.output_used(i) for i in range(1, 5)):
            raise ctx.error("the running/saved statistics outputs need training_mode=1")
        out = op("nn.batch_norm", x, scale, bias, mean, var, axis=1, epsilon=eps, center=True,
                 scale=True)
        return [TupleGetItem(out, 0)]
    rank = ctx.rank(x)
    dtype = ctx.dtype(x)
    axes = [0] + list(range(2, rank))
    bmean, centered, bvar = _moments(x, axes)
    inv = op("rsqrt", op("add", bvar, const(eps, dtype)))
    y = op("add", op("multiply", op("multiply", centered, inv), _channel(ctx, scale, rank)),
           _channel(ctx, bias, rank))
    momentum = float(ctx.attr("momentum", 0.9))
    flat_mean = ctx.reshape(bmean, [ctx.shape(x)[1]])
    flat_var = ctx.reshape(bvar, [ctx.shape(x)[1]])
    run_mean = op("add", op("multiply", mean, const(momentum, dtype)),
                  op("multiply", flat_mean, const(1 - momentum, dtype)))
    run_var = op("add", op("multiply", var, const(momentum, dtype)),
                 op("multiply", flat_var, const(1 - momentum, dtype)))
    return [y, run_mean, run_var]


@converter("InstanceNormalization")
def _instance_norm(ctx, inputs):
    x, scale, bias = inputs
    rank, dtype = ctx.rank(x), ctx.dtype(x)
    _, centered, var = _moments(x, list(range(2, rank)))
    eps = float(ctx.attr("epsilon", 1e-5))
    normed = op("multiply", centered, op("rsqrt", op("add", var, const(eps, dtype))))
    return op("add", op("multiply", normed, _channel(ctx, scale, rank)),
              _channel(ctx, bias, rank))


@converter("LayerNormalization", since=17)
def _layer_norm(ctx, inputs):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    rank, dtype = ctx.rank(x), ctx.dtype(x)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), rank)
    eps = float(ctx.attr("epsilon", 1e-5))
    stash = "float32" if ctx.attr("stash_type", 1) == 1 else dtype
    xs = x if stash == dtype else op("cast", x, dtype=stash)
    mean, centered, var = _moments(xs, list(range(axis, rank)))
    inv = op("rsqrt", op("add", var, const(eps, stash)))
    normed = op("multiply", centered, inv)
    if stash != dtype:
        normed = op("cast", normed, dtype=dtype)
    y = op("multiply", normed, scale)
    if bias is not None:
        y = op("add", y, bias)
    return [y, mean, inv]


@converter("GroupNormalization", since=18)
def _group_norm(ctx, inputs):
    x, scale, bias = inputs
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    groups = int(ctx.attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    n, c = shape[0], shape[1]
    grouped = ctx.reshape(x, [n, groups, num_elements(shape[1:]) // groups])
    _, centered, var = _moments(grouped, [2])
    normed = op("multiply", centered, op("rsqrt", op("add", var, const(eps, dtype))))
    rank = len(shape)
    if ctx.shape(scale)[0] == groups and groups != c:  # opset 18: one scale per group
        y = op("add", op("multiply", normed, ctx.reshape(scale, [groups, 1])),
               ctx.reshape(bias, [groups, 1]))
        return ctx.reshape(y, shape)
    normed = ctx.reshape(normed, shape)
    return op("add", op("multiply", normed, _channel(ctx, scale, rank)),
              _channel(ctx, bias, rank))


@converter("MeanVarianceNormalization")
def _mvn(ctx, inputs):
    x = inputs[0]
    axes = [norm_axis(ctx, a, ctx.rank(x)) for a in ctx.attr("axes", [0, 2, 3])]
    _, centered, var = _moments(x, axes)
    return op("divide", centered, op("add", op("sqrt", var), const(1e-9, ctx.dtype(x))))


@converter("LRN")
def _lrn(ctx, inputs):
    x = inputs[0]
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    size = int(ctx.attr("size"))
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    if size % 2 and len(shape) >= 3 and dtype == "float32":
        # ONNX sums over [c - floor((size-1)/2), c + ceil((size-1)/2)], nn.lrn over
        # [c - size//2, c - size//2 + size): the same window for odd sizes only
        return op("nn.lrn", x, size=size, axis=1, bias=bias, alpha=alpha, beta=beta)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = op("multiply", x, x)
    c = shape[1]
    zeros = [const(np.zeros((shape[0], k) + tuple(shape[2:]), dtype), dtype) for k in (lo, hi)]
    parts = ([zeros[0]] if lo else []) + [sq] + ([zeros[1]] if hi else [])
    padded = op("concatenate", Tuple(parts), axis=1) if len(parts) > 1 else sq
    total = None
    for offset in range(size):
        window = op("strided_slice", padded, begin=[offset], end=[offset + c], strides=[1],
                    axes=[1], slice_mode="end")
        total = window if total is None else op("add", total, window)
    denom = op("add", op("multiply", total, const(alpha / size, dtype)), const(bias, dtype))
    return op("divide", x, op("power", denom, const(beta, dtype)))


@converter("LpNormalization")
def _lp_norm(ctx, inputs):
    x = inputs[0]
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), ctx.rank(x))
    p = int(ctx.attr("p", 2))
    if p == 1:
        norm = op("sum", op("abs", x), axis=[axis], keepdims=True, exclude=False)
    elif p == 2:
        norm = op("sqrt", op("sum", op("multiply", x, x), axis=[axis], keepdims=True,
                             exclude=False))
    else:
        raise ctx.error(f"p must be 1 or 2, got {p}")
    zero = const(0, ctx.dtype(x))  # an all-zero slice stays zero rather than 0/0
    return op("where", op("equal", norm, zero), zero, op("divide", x, norm))
