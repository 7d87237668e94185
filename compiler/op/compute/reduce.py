"""Reductions (sum/mean/max/min/prod/all/any/argmax/argmin/variance) over te.reduce_axis."""
from __future__ import annotations

from typing import Callable

from compiler.op.type_relations import reduce_axes

from .common import (Expr, fail, in_float32, is_bool, is_float, rule, te, tensor_name, tir,
                     to_bool)

Body = Callable[[tuple, tuple], Expr]


def reduce_over(op: str, x: te.Tensor, attrs, out_shape: tuple, body: Body,
                merge_pairs: bool = True) -> te.Tensor:
    """A compute over out_shape: body(full, raxes) where `full` indexes x at the output position
    with the reduced dims replaced by the reduce axes `raxes` (keepdims/exclude/axis=None)."""
    return reduce_over_axes(op, x, reduce_axes(op, x.ndim, attrs.axis, attrs.exclude),
                            attrs.keepdims, out_shape, body, merge_pairs)


def reduce_over_axes(op: str, x: te.Tensor, axes: list[int], keepdims: bool, out_shape: tuple,
                     body: Body, merge_pairs: bool = True) -> te.Tensor:
    """reduce_over with the reduced dims given (global pools reduce H and W with keepdims)."""
    keep = [d for d in range(x.ndim) if d not in axes]
    # two adjacent reduced dims (a global pool's H and W) are one reduce axis over both, so the
    # reduction is one loop over contiguous memory (it vectorises; a 14-long inner loop did not)
    pairs = {d for d in axes if merge_pairs and d + 1 in axes and d - 1 not in axes
             and d + 2 not in axes}

    def fcompute(*idx):
        raxes = []
        full: list = [None] * x.ndim
        for d in axes:
            if d - 1 in pairs:
                continue
            if d in pairs:
                inner = x.shape[d + 1]
                k = te.reduce_axis(x.shape[d] * inner, f"k{d}")
                full[d], full[d + 1] = tir.floordiv(k, inner), tir.floormod(k, inner)
            else:
                k = full[d] = te.reduce_axis(x.shape[d], f"k{d}")
            raxes.append(k)
        for n, d in enumerate(keep):
            full[d] = idx[d] if keepdims else idx[n]
        return body(tuple(full), tuple(raxes))
    return te.compute(out_shape, fcompute, name=tensor_name(op))


def count_of(x: te.Tensor, op: str, attrs) -> int:
    """Number of elements each output reduces."""
    n = 1
    for d in reduce_axes(op, x.ndim, attrs.axis, attrs.exclude):
        n *= x.shape[d]
    return n


def _no_bool(op: str, x: te.Tensor) -> None:
    if is_bool(x.dtype):
        raise fail(op, f"{op} of a bool tensor is not supported; cast it to a number first")


def _simple(op: str, reducer: Callable) -> None:
    @rule(op)
    def _(inputs, attrs, out_type):
        (x,) = inputs
        if op in ("sum", "prod"):
            _no_bool(op, x)
        return reduce_over(op, x, attrs, out_type.shape,
                           lambda full, k: reducer(x[full], k) if k else x[full])


_simple("sum", te.sum)
_simple("prod", te.prod)
_simple("max", te.max)
_simple("min", te.min)


def _logical(op: str, reducer: Callable) -> None:
    @rule(op)
    def _(inputs, attrs, out_type):
        (x,) = inputs
        return reduce_over(op, x, attrs, out_type.shape, lambda full, k: tir.cast(
            reducer(to_bool(x[full]), k) if k else to_bool(x[full]), x.dtype))


_logical("all", te.min)
_logical("any", te.max)


@rule("mean")
@in_float32
def _mean(inputs, attrs, out_type):
    (x,) = inputs
    _no_bool("mean", x)
    n = tir.const(max(count_of(x, "mean", attrs), 1), x.dtype)
    # floats: sum / n; integers: the wrapped integer sum divided with truncation (reference)
    div = tir.div if is_float(x.dtype) else tir.truncdiv
    return reduce_over("mean", x, attrs, out_type.shape,
                       lambda full, k: div(te.sum(x[full], k) if k else x[full], n))


def _arg(op: str) -> None:
    @rule(op)
    def _(inputs, attrs, out_type):
        (x,) = inputs
        _no_bool(op, x)
        fn = te.argmax if op == "argmax" else te.argmin
        return reduce_over(op, x, attrs, out_type.shape, lambda full, k: fn(
            x[full], k, index_dtype=out_type.dtype, select_last=bool(attrs.select_last_index))
            if k else tir.const(0, out_type.dtype), merge_pairs=False)


_arg("argmax")
_arg("argmin")


@rule("variance")
@in_float32
def _variance(inputs, attrs, out_type):
    x, mean = inputs
    _no_bool("variance", x)
    n = count_of(x, "variance", attrs)
    denom = n - 1 if attrs.unbiased else n
    axes = set(reduce_axes("variance", x.ndim, attrs.axis, attrs.exclude))
    work = x.dtype if is_float(x.dtype) else "float64"  # the reference works in float64

    def body(full, k):
        m = mean[tuple(0 if d in axes else full[d] for d in range(x.ndim))]
        diff = tir.cast(x[full], work) - tir.cast(m, work)
        total = te.sum(diff * diff, k) if k else diff * diff
        return tir.cast(total / tir.const(denom, work), out_type.dtype)

    return reduce_over("variance", x, attrs, out_type.shape, body)
