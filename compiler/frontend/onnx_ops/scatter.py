"""Scatter ONNX ops onto the registry's scatter_elements / scatter_nd."""
from __future__ import annotations

from .common import NodeContext, converter, norm_axis, op

_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "min": "min", "max": "max"}


def _reduction(ctx: NodeContext) -> str:
    name = ctx.attr("reduction", "none")
    if name not in _REDUCTIONS:
        raise ctx.error(f"reduction must be one of {sorted(_REDUCTIONS)}, got {name!r}")
    return _REDUCTIONS[name]


def _updates_like(ctx: NodeContext, data, updates):
    if ctx.dtype(updates) != ctx.dtype(data):
        raise ctx.error(f"updates are {ctx.dtype(updates)} but data is {ctx.dtype(data)}")
    return updates


@converter("ScatterElements", since=11)
def _scatter_elements(ctx, inputs):
    data, indices, updates = inputs
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), ctx.rank(data))
    return op("scatter_elements", data, indices, _updates_like(ctx, data, updates), axis=axis,
              reduction=_reduction(ctx))


converter("Scatter", since=9)(_scatter_elements)  # deprecated alias without reduction


@converter("ScatterND", since=11)
def _scatter_nd(ctx, inputs):
    data, indices, updates = inputs
    irank = ctx.rank(indices)
    # ONNX puts the index tuple last ([..., M]); relay.scatter_nd wants it first ([M, ...])
    moved = op("transpose", indices, axes=[irank - 1] + list(range(irank - 1)))
    return op("scatter_nd", data, moved, _updates_like(ctx, data, updates),
              mode=_reduction(ctx))
