"""Indexing, scan, sort and constant-producing ops: take, gather(_nd), one_hot, cumsum/cumprod,
trilu, sort/argsort/topk (rank counting, O(n^2) but exact and stable), arange, shape_of."""
from __future__ import annotations

from .common import (Expr, is_float, normalize_index, rule, scalar, te, tensor_name, tir,
                     unravel)
from .transform import reshape_to


@rule("take")
def _take(inputs, attrs, out_type):
    data, indices = inputs
    mode = attrs.mode
    if attrs.axis is None:
        flat = data.size

        def f(*i):
            j = normalize_index("take", indices[i], flat, mode)
            return data[unravel(j, data.shape)]
        return te.compute(out_type.shape, f, name="T_take")
    axis = attrs.axis % data.ndim
    b = attrs.batch_dims % (indices.ndim + 1) if attrs.batch_dims < 0 else attrs.batch_dims
    n_idx = indices.ndim - b

    def g(*i):
        ind = indices[i[:b] + i[axis:axis + n_idx]]
        j = normalize_index("take", ind, data.shape[axis], mode)
        return data[i[:axis] + (j,) + i[axis + n_idx:]]
    return te.compute(out_type.shape, g, name="T_take")


@rule("gather")
def _gather(inputs, attrs, out_type):
    data, indices = inputs
    axis = attrs.axis % data.ndim

    def f(*i):
        j = normalize_index("gather", indices[i], data.shape[axis], "fast")
        return data[i[:axis] + (j,) + i[axis + 1:]]
    return te.compute(out_type.shape, f, name="T_gather")


@rule("gather_nd")
def _gather_nd(inputs, attrs, out_type):
    data, indices = inputs
    m, b = indices.shape[0], attrs.batch_dims
    ny = indices.ndim - 1

    def f(*i):
        ys = i[:ny]
        picked = tuple(normalize_index("gather_nd", indices[(k,) + ys], data.shape[b + k],
                                       "fast") for k in range(m))
        return data[i[:b] + picked + i[ny:]]
    return te.compute(out_type.shape, f, name="T_gather_nd")


@rule("one_hot")
def _one_hot(inputs, attrs, out_type):
    indices, on, off = inputs
    axis = attrs.axis % (indices.ndim + 1) if attrs.axis < 0 else attrs.axis
    dt = out_type.dtype

    def f(*i):
        hot = tir.eq(tir.cast(indices[i[:axis] + i[axis + 1:]], "int64"), i[axis])
        return tir.select(hot, tir.cast(scalar(on), dt), tir.cast(scalar(off), dt))
    return te.compute(out_type.shape, f, name="T_one_hot")


def _scan(op: str, reducer) -> None:
    @rule(op)
    def _(inputs, attrs, out_type):
        (x,) = inputs
        dt = out_type.dtype
        if attrs.axis is None:
            x = reshape_to(x, (x.size,), "T_flatten")
            axis = 0
        else:
            axis = attrs.axis % x.ndim
        n = x.shape[axis]

        def f(*i):
            k = te.reduce_axis(n, "k")
            last = tir.lt(k, i[axis]) if attrs.exclusive else tir.le(k, i[axis])
            src = tir.cast(x[i[:axis] + (k,) + i[axis + 1:]], dt)
            if n == 0:
                return tir.const(0, dt)
            return reducer(src, k, where=last)
        return te.compute(out_type.shape, f, name=tensor_name(op))


_scan("cumsum", te.sum)
_scan("cumprod", te.prod)


@rule("trilu")
def _trilu(inputs, attrs, out_type):
    data, k = inputs
    nd = data.ndim

    def f(*i):
        diag = tir.cast(i[nd - 1], "int64") - i[nd - 2]
        kk = tir.cast(scalar(k), "int64")
        keep = tir.ge(diag, kk) if attrs.upper else tir.le(diag, kk)
        return tir.select(keep, data[i], tir.const(0, data.dtype))
    return te.compute(data.shape, f, name="T_trilu")


# --- sort / argsort / topk ---------------------------------------------------------------


def _before(a: Expr, b: Expr, ascend: bool) -> Expr:
    """a sorts strictly before b (NaN is the largest value, as numpy's sort)."""
    if not ascend:
        a, b = b, a
    less = tir.lt(a, b)
    if is_float(a.dtype):
        less = tir.logical_or(less, tir.logical_and(tir.isnan(b), tir.logical_not(tir.isnan(a))))
    return less


def _same(a: Expr, b: Expr) -> Expr:
    eq = tir.eq(a, b)
    if is_float(a.dtype):
        eq = tir.logical_or(eq, tir.logical_and(tir.isnan(a), tir.isnan(b)))
    return eq


def sorted_indices(x: te.Tensor, axis: int, ascend: bool, keep: int, dtype: str) -> te.Tensor:
    """Indices of the first `keep` elements of a stable sort along axis (ties keep order).

    rank[i] = #{j: x[j] before x[i], or x[j] same as x[i] and j < i}; then out[r] is the i
    with rank r. Both are reductions: O(n^2) per row, exact."""
    n = x.shape[axis]

    def rank(*i):
        j = te.reduce_axis(n, "j")
        xj, xi = x[i[:axis] + (j,) + i[axis + 1:]], x[i]
        first = tir.logical_or(_before(xj, xi, ascend),
                               tir.logical_and(_same(xj, xi), tir.lt(j, i[axis])))
        return te.sum(tir.const(1, "int64"), j, where=first)
    ranks = te.compute(x.shape, rank, name="T_rank")
    shape = x.shape[:axis] + (keep,) + x.shape[axis + 1:]

    def pick(*r):
        j = te.reduce_axis(n, "j")
        hit = tir.eq(ranks[r[:axis] + (j,) + r[axis + 1:]], r[axis])
        return te.sum(tir.cast(j, dtype), j, where=hit)
    return te.compute(shape, pick, name="T_argsort")


@rule("argsort")
def _argsort(inputs, attrs, out_type):
    (x,) = inputs
    axis = attrs.axis % x.ndim
    return sorted_indices(x, axis, bool(attrs.is_ascend), x.shape[axis], out_type.dtype)


def _take_along(x: te.Tensor, idx: te.Tensor, axis: int, name: str) -> te.Tensor:
    return te.compute(idx.shape, lambda *i: x[i[:axis] + (tir.cast(idx[i], "int64"),)
                                              + i[axis + 1:]], name=name)


@rule("sort")
def _sort(inputs, attrs, out_type):
    (x,) = inputs
    axis = attrs.axis % x.ndim
    order = sorted_indices(x, axis, bool(attrs.is_ascend), x.shape[axis], "int64")
    return _take_along(x, order, axis, "T_sort")


@rule("topk")
def _topk(inputs, attrs, out_type):
    (x,) = inputs
    axis = attrs.axis % x.ndim
    fields = out_type.fields if hasattr(out_type, "fields") else (out_type,)
    keep = fields[0].shape[axis]
    order = sorted_indices(x, axis, bool(attrs.is_ascend), keep, "int64")
    values = _take_along(x, order, axis, "T_topk_values")
    indices = te.compute(order.shape, lambda *i: tir.cast(order[i], attrs.dtype),
                         name="T_topk_indices")
    return {"both": (values, indices), "values": values, "indices": indices}[attrs.ret_type]


# --- constant-producing ops ----------------------------------------------------------------


@rule("arange")
def _arange(inputs, attrs, out_type):
    """start + step * i; bounds computed at run time (attrs None) are read from the inputs."""
    if attrs.start is None:
        start, step = (tir.cast(scalar(t), "float64") for t in (inputs[0], inputs[2]))
    else:
        start, step = tir.const(float(attrs.start), "float64"), tir.const(float(attrs.step),
                                                                          "float64")
    dt = out_type.dtype
    return te.compute(out_type.shape, lambda i: tir.cast(start + step * tir.cast(i, "float64"),
                                                         dt), name="T_arange")


@rule("shape_of")
def _shape_of(inputs, attrs, out_type):
    (x,) = inputs
    dt = out_type.dtype
    if not x.shape:
        return te.compute((0,), lambda i: tir.const(0, dt), name="T_shape_of")

    def f(i):
        out: Expr = tir.const(x.shape[-1], dt)
        for d in range(x.ndim - 2, -1, -1):
            out = tir.select(tir.eq(i, d), tir.const(x.shape[d], dt), out)
        return out
    return te.compute(out_type.shape, f, name="T_shape_of")


@rule("ndarray_size")
def _ndarray_size(inputs, attrs, out_type):
    (x,) = inputs
    return te.compute((), lambda: tir.const(x.size, out_type.dtype), name="T_ndarray_size")


__all__ = ["sorted_indices"]
