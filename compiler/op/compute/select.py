"""argwhere as a sequential kernel; unique as counting reductions (O(n^2) comparisons, as the sorts in index.py: exact, stable,
no data-dependent control flow).

For items i, j (elements, or rows of 2-D data): first[i] is the smallest j holding the same
item, so item i is a first occurrence when first[i] == i; pos[i], its place in the output,
counts the first occurrences that sort before it (sorted) or come before it (not sorted).
Every output is then a reduction or a gather over those: sel[p] = the first occurrence at
place p, counts[p] = how many items have first == sel[p], inverse[j] = pos[first[j]]. Rows
compare lexicographically through diff[i, j], the first column where they differ.

argwhere's output has as many rows as the data has nonzero elements (its shape function
counted them before the kernel runs): one pass in row-major order appends each nonzero
element's coordinates, never writing past the rows it was given.
"""
from __future__ import annotations

from codegen.tir.expr import Load
from codegen.tir.stmt import Allocate, Buffer, For, IfThenElse, Store, seq

from .common import rule, te, tir
from .index import _before, _same

_I64 = "int64"


def _c(value: int):
    return tir.const(value, _I64)


def _item_relations(x: te.Tensor):
    """(same(i, j), j_before_i(i, j)) as expression builders over loop variables."""
    if len(x.shape) == 1:
        return (lambda i, j: _same(x[i], x[j]),
                lambda i, j: _before(x[j], x[i], True))
    m = int(x.shape[1])

    def first_diff(i, j):
        k = te.reduce_axis(m, "k")
        return te.min(tir.cast(k, _I64), k, where=tir.logical_not(_same(x[i, k], x[j, k])))
    diff = te.compute((x.shape[0], x.shape[0]), first_diff, name="T_unique_diff")

    def before(i, j):
        d = diff[i, j]
        col = tir.min(d, _c(m - 1))  # a column that exists, read only when d < m
        return tir.logical_and(tir.lt(d, _c(m)), _before(x[j, col], x[i, col], True))
    return (lambda i, j: tir.ge(diff[i, j], _c(m))), before


@rule("argwhere")
def _argwhere(inputs, attrs, out_type):
    (x,) = inputs
    rows, rank = (int(d) for d in out_type.shape)
    dt = out_type.dtype

    def fcompute(ins, outs):
        data, out = ins[0], outs[0]
        count = Buffer("argwhere_count", (1,), _I64)
        loops = [tir.Var(f"argwhere_i{d}", _I64) for d in range(rank)]
        at = Load(count, (_c(0),), _I64)
        nonzero = tir.ne(Load(data, tuple(loops), data.dtype), tir.const(0, data.dtype))
        body = IfThenElse(tir.logical_and(nonzero, tir.lt(at, _c(rows))), seq(
            *(Store(out, (at, _c(d)), tir.cast(loops[d], dt)) for d in range(rank)),
            Store(count, (_c(0),), at + _c(1))))
        for var, extent in reversed(list(zip(loops, x.shape))):
            body = For(var, int(extent), body)
        return Allocate(count, seq(Store(count, (_c(0),), _c(0)), body))

    return te.extern((rows, rank), [x], fcompute, dtype=dt, name="T_argwhere")


@rule("unique")
def _unique(inputs, attrs, out_type):
    (x,) = inputs
    n = int(x.shape[0])
    same, before = _item_relations(x)
    index_dtype = out_type.fields[1].dtype

    def first_of(i):
        j = te.reduce_axis(n, "j")
        return te.min(tir.cast(j, _I64), j, where=same(i, j))
    first = te.compute((n,), first_of, name="T_unique_first")

    def is_first(i):
        return tir.eq(first[i], tir.cast(i, _I64))

    def pos_of(i):
        j = te.reduce_axis(n, "j")
        earlier = before(i, j) if attrs.sorted else tir.lt(j, i)
        return te.sum(_c(1), j, where=tir.logical_and(is_first(j), earlier))
    pos = te.compute((n,), pos_of, name="T_unique_pos")

    def count_firsts(_):
        j = te.reduce_axis(n, "j")
        return te.sum(_c(1), j, where=is_first(j))
    num = te.compute((1,), count_firsts, name="T_unique_num")

    def selected(p):
        i = te.reduce_axis(n, "i")
        return te.sum(tir.cast(i, _I64), i,
                      where=tir.logical_and(is_first(i), tir.eq(pos[i], tir.cast(p, _I64))))
    sel = te.compute((n,), selected, name="T_unique_sel")

    def used(p):
        return tir.lt(tir.cast(p, _I64), num[0])

    def pick(p, *rest):
        row = tir.min(tir.max(sel[p], _c(0)), _c(n - 1))
        return tir.select(used(p), x[(row, *rest)], tir.const(0, x.dtype))
    output = te.compute(x.shape, pick, name="T_unique_output")
    indices = te.compute((n,), lambda p: tir.cast(tir.select(used(p), sel[p], _c(0)),
                                                  index_dtype), name="T_unique_indices")
    inverse = te.compute((n,), lambda j: tir.cast(
        pos[tir.min(tir.max(first[j], _c(0)), _c(n - 1))], index_dtype),
        name="T_unique_inverse")
    num_out = te.compute((1,), lambda z: tir.cast(num[z], index_dtype), name="T_unique_count")
    outs = [output, indices, inverse, num_out]
    if attrs.return_counts:
        def counts_of(p):
            j = te.reduce_axis(n, "j")
            return te.sum(_c(1), j, where=tir.logical_and(used(p), tir.eq(first[j], sel[p])))
        counts = te.compute((n,), counts_of, name="T_unique_counted")
        outs.append(te.compute((n,), lambda p: tir.cast(counts[p], index_dtype),
                               name="T_unique_counts"))
    return tuple(outs)
