"""scatter_elements / scatter_nd as gathers: each output element reduces over the updates that
target it (last one wins for "update"). O(outputs x updates along the scatter) but exact, and
no store ever goes out of bounds; an index outside [-n, n) fails the kernel (checked_index)."""
from __future__ import annotations

from typing import Callable

from .common import Expr, rule, te, tensor_name, tir, unravel

_COMBINE = {"add": (te.sum, tir.add), "mul": (te.prod, tir.mul), "min": (te.min, tir.min),
            "max": (te.max, tir.max)}


def _wrapped(i: Expr, n: int) -> Expr:
    return tir.checked_index(i, n)


def _scatter(op: str, data: te.Tensor, mode: str, count: int,
             hit: Callable[[tuple, Expr], Expr], update_at: Callable[[tuple, Expr], Expr]
             ) -> te.Tensor:
    """hit(p, j): update j targets output p; update_at(p, j): its value (j in [0, count))."""
    if mode == "update":
        def last(*p):
            j = te.reduce_axis(count, "j")
            return te.max(j, j, where=hit(p, j))
        winner = te.compute(data.shape, last, name=f"{tensor_name(op)}_last")

        def f(*p):
            w = winner[p]
            return tir.if_then_else(tir.ge(w, 0), update_at(p, w), data[p])
        return te.compute(data.shape, f, name=tensor_name(op))
    reducer, combine = _COMBINE[mode]

    def g(*p):
        j = te.reduce_axis(count, "j")
        return combine(data[p], reducer(update_at(p, j), j, where=hit(p, j)))
    return te.compute(data.shape, g, name=tensor_name(op))


@rule("scatter_elements")
def _scatter_elements(inputs, attrs, out_type):
    data, indices, updates = inputs
    axis = attrs.axis % data.ndim
    n = data.shape[axis]

    def at(p, j):
        return p[:axis] + (j,) + p[axis + 1:]

    def hit(p, j):
        inside = [tir.lt(p[d], indices.shape[d]) for d in range(data.ndim)
                  if d != axis and indices.shape[d] < data.shape[d]]
        match = tir.eq(_wrapped(indices[at(p, j)], n), p[axis])
        return tir.if_then_else(tir.all(*inside), match, False) if inside else match
    return _scatter("scatter_elements", data, attrs.reduction, indices.shape[axis], hit,
                    lambda p, j: updates[at(p, j)])


@rule("scatter_nd")
def _scatter_nd(inputs, attrs, out_type):
    data, indices, updates = inputs
    m = indices.shape[0]
    yshape = indices.shape[1:]
    count = 1
    for d in yshape:
        count *= d

    def hit(p, j):
        y = unravel(j, yshape)
        return tir.all(*[tir.eq(_wrapped(indices[(k,) + y], data.shape[k]), p[k])
                         for k in range(m)])
    return _scatter("scatter_nd", data, attrs.mode, count, hit,
                    lambda p, j: updates[unravel(j, yshape) + p[m:]])
