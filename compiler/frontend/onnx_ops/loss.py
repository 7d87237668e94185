"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, gather-free.

The class picked by each target is selected with a one-hot comparison against a class iota
and a sum over the class axis, so out-of-range targets (ignore_index) simply pick nothing.
Reductions follow onnx/reference/ops (including which count a `mean` divides by).
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import RelayExpr

from .common import NodeContext, const, converter, op


def _class_hit(ctx: NodeContext, x: RelayExpr, target: RelayExpr) -> RelayExpr:
    """(N, C, d...) bool: target[n, d...] == c."""
    shape, tshape = ctx.shape(x), ctx.shape(target)
    if len(shape) < 2 or tuple(tshape) != (shape[0],) + tuple(shape[2:]):
        raise ctx.error(f"input {shape} and target {tshape} do not match ((N, C, d...) and "
                        "(N, d...))")
    iota = np.arange(shape[1]).reshape((1, shape[1]) + (1,) * (len(shape) - 2))
    tdtype = ctx.dtype(target)
    expanded = ctx.reshape(target, [tshape[0], 1, *tshape[1:]])
    return op("equal", expanded, const(iota, tdtype))


def _pick(ctx: NodeContext, hit: RelayExpr, values: RelayExpr) -> RelayExpr:
    """sum over classes of values where hit, i.e. values[n, target, d...]."""
    zero = const(0, ctx.dtype(values))
    return op("sum", op("where", hit, values, zero), axis=[1], keepdims=False, exclude=False)


def _nll(ctx: NodeContext, logp: RelayExpr, target: RelayExpr, weight: RelayExpr | None,
         divide_by_valid_without_weight: bool) -> RelayExpr:
    """The loss of NegativeLogLikelihoodLoss on log-probabilities `logp`."""
    dtype = ctx.dtype(logp)
    rank = ctx.rank(logp)
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise ctx.error(f"reduction must be none, sum or mean, got {reduction!r}")
    ignore = ctx.attr("ignore_index")
    hit = _class_hit(ctx, logp, target)
    loss = op("negative", _pick(ctx, hit, logp))
    valid = None
    if ignore is not None:
        valid = op("not_equal", target, const(int(ignore), ctx.dtype(target)))
    gathered = None
    if weight is not None:
        c = ctx.shape(weight)[0]
        wide = ctx.reshape(weight, [1, c] + [1] * (rank - 2))
        gathered = _pick(ctx, hit, op("broadcast_to", wide, shape=list(ctx.shape(logp))))
        if valid is not None:
            gathered = op("where", valid, gathered, const(0, dtype))
    elif valid is not None and divide_by_valid_without_weight:
        gathered = op("cast", valid, dtype=dtype)
    if gathered is not None:
        loss = op("multiply", loss, gathered)
    elif valid is not None:  # ignored positions contribute 0 even when not counted
        loss = op("where", valid, loss, const(0, dtype))
    if reduction == "none":
        return loss
    total = op("sum", loss, axis=None, keepdims=False, exclude=False)
    if reduction == "sum":
        return total
    if gathered is None:
        return op("mean", loss, axis=None, keepdims=False, exclude=False)
    return op("divide", total, op("sum", gathered, axis=None, keepdims=False, exclude=False))


def _weight(inputs: list) -> RelayExpr | None:
    return inputs[2] if len(inputs) > 2 else None


@converter("NegativeLogLikelihoodLoss", since=12)
def _nll_loss(ctx, inputs):
    # The reference counts every position for `mean` when ignore_index == -1 and no weight.
    counts_valid = ctx.attr("ignore_index") != -1
    return _nll(ctx, inputs[0], inputs[1], _weight(inputs), counts_valid)


@converter("SoftmaxCrossEntropyLoss", since=12)
def _softmax_cross_entropy(ctx, inputs):
    logp = op("nn.log_softmax", inputs[0], axis=1)
    loss = _nll(ctx, logp, inputs[1], _weight(inputs), True)
    return [loss, logp]
