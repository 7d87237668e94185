"""Sliding windows over one channel plane at a time (NCHW): pooling, and the padded-plane copy
that depthwise convolution shares.

Per (image, channel), the task of one parallel iteration, the channel's plane is first copied
into cache-resident scratch with its padding filled in (zeros, or -inf for a max), when the
window has padding. The output rows are then one vectorised loop whose taps are plain loads:
no bounds test, no clamped index per tap (the generic pooling rule tests every tap, and an
Inception 3x3 average pool with padding ran 9x slower than onnxruntime's).

A max is reduced as a balanced tree of plain maxima (vmaxps) beside a tree of NaN tests, so a
window's taps are not one serial chain of compare-and-select steps; a NaN anywhere in the
window still gives NaN, as numpy.maximum does.
"""
from __future__ import annotations

from typing import Callable

from .. import te
from ..parallel import MIN_PARALLEL_WORK
from ..tir.expr import Expr, Load
from ..tir.ops import const, ge, gt, logical_and, logical_or, lt, ne, select
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import Epilogue, mark_epilogue, var

# finish(window value, output row, output column) -> the pool's result (average divisor,
# the value of a window that covers only padding)
Finish = Callable[[Expr, Expr, Expr], Expr]


def padded_plane(xb: Buffer, n, c, g: dict, fill: Expr, name: str) -> tuple[Buffer, Stmt]:
    """Scratch plane[hp][wp] = x[n, c] inside, `fill` in the padding; g holds h, w, hp, wp,
    pt, pl. Rows above and below are all fill; the others: fill, the input row, fill."""
    plane = Buffer(f"{name}_plane", (g["hp"], g["wp"]), xb.dtype)
    ph, pw = var(f"{name}_ph"), var(f"{name}_pw")
    pl, w = g["pl"], g["w"]
    pr = g["wp"] - pl - w

    def fills(start: int, extent: int, tag: str) -> Stmt | None:
        v = var(f"{name}_{tag}")
        return For(v, extent, Store(plane, (ph, v + start), fill), "vectorized") \
            if extent > 0 else None

    row = seq(fills(0, pl, "fl"),
              For(pw, w, Store(plane, (ph, pw + pl), Load(
                  xb, (n, c, ph - g["pt"], pw), xb.dtype)), "vectorized"),
              fills(pl + w, pr, "fr"))
    inside = logical_and(ge(ph, g["pt"]), lt(ph, g["pt"] + g["h"]))
    return plane, For(ph, g["hp"], IfThenElse(inside, row, fills(0, g["wp"], "frow")))


def _tree(values: list[Expr], combine) -> Expr:
    """combine over values as a balanced tree (log depth instead of one serial chain)."""
    while len(values) > 1:
        pairs = [combine(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        values = pairs + ([values[-1]] if len(values) % 2 else [])
    return values[0]


def _max_with_nan(taps: list[Expr], dtype: str) -> Expr:
    """max of taps, NaN when any tap is NaN."""
    top = _tree(taps, lambda a, b: select(gt(a, b), a, b))
    nan = _tree([ne(t, t) for t in taps], logical_or)
    return select(nan, const(float("nan"), dtype), top)


def pool2d_nchw(x: te.Tensor, kind: str, pool_size, strides, dilation, padding, out_hw,
                finish: Finish, name: str) -> te.Tensor:
    """max or avg pooling of a float NCHW tensor; padding is (top, left, bottom, right);
    `finish` turns the window's max or sum into the result at (row, column)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = pool_size, strides, dilation
    pt, pl, pb, pr = padding
    oh, ow = out_hw
    # rows and columns the windows reach (ceil mode may reach past the end padding)
    hp = max(h + pt + pb, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + pl + pr, (ow - 1) * sw + (kw - 1) * dw + 1)
    g = dict(h=h, w=w, hp=hp, wp=wp, pt=pt, pl=pl)
    dtype = x.dtype

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        xb, out = ins[0], outs[0]
        ni, ci, oi, oj = (var(f"{name}_{t}") for t in ("n", "c", "h", "w"))
        padded = (hp, wp) != (h, w)
        fill = const(float("-inf") if kind == "max" else 0.0, dtype)
        plane, fill_plane = padded_plane(xb, ni, ci, g, fill, name) if padded else (None, None)

        def tap(r: int, s: int) -> Expr:
            y, xx = oi * sh + r * dh, oj * sw + s * dw
            return Load(plane, (y, xx), dtype) if padded else Load(xb, (ni, ci, y, xx), dtype)

        taps = [tap(r, s) for r in range(kh) for s in range(kw)]
        acc = _max_with_nan(taps, dtype) if kind == "max" else _tree(taps, lambda a, b: a + b)
        idx = (ni, ci, oi, oj)
        val = finish(acc, oi, oj)
        if epilogue is not None:
            val = epilogue(val, idx)
        rows: Stmt = For(oi, oh, For(oj, ow, Store(out, idx, val), "vectorized"))
        if padded:
            rows = Allocate(plane, seq(fill_plane, rows))
        kind_ = "parallel" if n * c * oh * ow * kh * kw >= MIN_PARALLEL_WORK else "serial"
        return For(ni, n, For(ci, c, rows, kind_))

    return te.extern((n, c, oh, ow), [x], mark_epilogue(fcompute), dtype=dtype, name=name)
