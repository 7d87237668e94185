"""Compute rules of the dyn.* ops, for a call whose output type is concrete: the VM
specialises a dynamic kernel at the shapes its shape program computed, so the output shape
is known when lowering even though the shape-like inputs are read only at run time.

Most become the static op's rule over the data inputs (the output shape is all they need:
reshape, broadcast_to, tile, zeros/ones/full, topk, one_hot, upsampling; the reductions,
whose reduced dims are the ones that became 1). strided_slice and
pad also need where the window starts, which the shape does not tell: their kernels load
begin, strides and pad widths from the value tensors.
"""
from __future__ import annotations

from compiler.ir.attrs import Attrs
from compiler.ir.types import is_dynamic_type
from compiler.op.dyn import DYN_OPS
from compiler.op.registry import get_def

from .common import Expr, clamp, fail, rule, scalar, te, tir


def _concrete(op: str, out_type) -> None:
    if is_dynamic_type(out_type):
        raise fail(op, f"lowering needs the output shape, got {out_type}: specialise the call "
                       "at the shapes its shape program computes")


def _as_static(name: str) -> None:
    dyn = DYN_OPS[name]
    static = get_def(dyn.static)

    @rule(name)
    def lower(inputs, attrs, out_type):
        _concrete(name, out_type)
        data, _ = dyn.split(list(inputs))
        return static.compute(data, attrs, out_type)


for _name in ("dyn.broadcast_to", "dyn.tile", "dyn.zeros", "dyn.ones", "dyn.full", "dyn.topk",
              "dyn.one_hot", "dyn.nn.upsampling"):
    _as_static(_name)


def _reduction(name: str) -> None:
    """A dyn reduction keeps the reduced dims as 1s, so the shapes tell which axes it reduced:
    a dim that became 1 (reducing a dim that already was 1 changes nothing)."""
    dyn = DYN_OPS[name]
    static = get_def(dyn.static)

    @rule(name)
    def lower(inputs, attrs, out_type):
        _concrete(name, out_type)
        x = inputs[0]
        axes = tuple(d for d, (i, o) in enumerate(zip(x.shape, out_type.shape))
                     if int(o) == 1 and int(i) != 1)
        fields = {"axis": axes, "keepdims": True, "exclude": False}
        return static.compute([x], Attrs(fields, static.attrs_type_key), out_type)


for _name in ("dyn.sum", "dyn.mean", "dyn.max", "dyn.min", "dyn.prod"):
    _reduction(_name)


def _i64(t: te.Tensor, *index) -> Expr:
    return tir.cast(t[index], "int64")


@rule("dyn.strided_slice")
def _strided_slice(inputs, attrs, out_type):
    _concrete("dyn.strided_slice", out_type)
    x, begin, _, strides = inputs
    sliced = begin.shape[0]
    size_mode = attrs.slice_mode == "size"

    def start_and_step(d: int) -> tuple:
        """Where numpy's slice starts on axis d for this begin and stride (slice.indices)."""
        n = x.shape[d]
        b = _i64(begin, d)
        step = tir.const(1, "int64") if size_mode else _i64(strides, d)
        pos = tir.select(tir.lt(b, 0), b + n, b)
        start = tir.select(tir.gt(step, 0), clamp(pos, 0, n), clamp(pos, -1, n - 1))
        return start, step

    bounds = [start_and_step(d) for d in range(sliced)]

    def f(*i):
        return x[tuple(bounds[d][0] + i[d] * bounds[d][1] if d < sliced else i[d]
                       for d in range(x.ndim))]
    return te.compute(out_type.shape, f, name="T_strided_slice")


@rule("dyn.nn.pad")
def _pad(inputs, attrs, out_type):
    _concrete("dyn.nn.pad", out_type)
    x, widths, value = inputs
    mode = attrs.pad_mode

    def src(i, d: int) -> Expr:
        j, n = i - _i64(widths, d, 0), x.shape[d]
        if mode == "edge":
            return clamp(j, 0, n - 1)
        if mode == "reflect":
            j = tir.select(tir.lt(j, 0), -j, j)
            return tir.select(tir.gt(j, n - 1), 2 * (n - 1) - j, j)
        return j

    def f(*i):
        idx = tuple(src(i[d], d) for d in range(x.ndim))
        if mode != "constant" or not x.ndim:
            return x[idx]
        inside = [tir.all(tir.ge(j, 0), tir.lt(j, x.shape[d])) for d, j in enumerate(idx)]
        return tir.if_then_else(tir.all(*inside), x[idx], tir.cast(scalar(value), x.dtype))
    return te.compute(out_type.shape, f, name="T_pad")
