"""Sliding windows over one channel plane at a time (NCHW): pooling, and the padded-plane copy
that depthwise convolution shares.

Per (image, channel), the task of one parallel iteration, the channel is first copied into
cache-resident scratch with its padding filled in (zeros, or -inf for a max): for pooling, split
into its stride phases, so that every tap of every window is a contiguous run and the windows
reduce in one long vector loop over flattened rows. No bounds test per tap (the generic pooling
rule tests every tap: an Inception 3x3 average pool with padding ran 9x slower than
onnxruntime's) and no short strided rows (a 14-wide stride-2 row was mostly scalar).

A max is reduced as a balanced tree of plain maxima (vmaxps) beside a tree of NaN tests, so a
window's taps are not one serial chain of compare-and-select steps; a NaN anywhere in the
window still gives NaN, as numpy.maximum does.
"""
from __future__ import annotations

from typing import Callable

from .. import te
from ..parallel import MIN_PARALLEL_WORK
from ..tir.expr import Expr, Load
from ..tir.ops import const, ge, gt, if_then_else, logical_and, logical_or, lt, ne, select
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import Epilogue, imm, mark_epilogue, var

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


def _span(first: int, step: int, lo: int, hi: int, count: int) -> tuple[int, int]:
    """[a, b): the k in [0, count) with lo <= first + k*step < hi."""
    a = min(count, max(0, -(-(lo - first) // step)))
    b = min(count, max(a, -(-(hi - first) // step)))
    return a, b


def _phase(xb: Buffer, phases: Buffer, ni, ci, py: int, px: int, g: dict, fill: Expr,
           name: str) -> Stmt:
    """Phase (py, px) of channel ci: P[i*wq + j] = x[ci, i*sh + py - pt, j*sw + px - pl], fill
    outside x. The rows and columns inside x are static ranges, so the copy is plain strided
    loads (vectorised as interleaved loads) and the padding plain fills."""
    wq, size = g["wq"], g["size"]
    i0, i1 = _span(py - g["pt"], g["sh"], 0, g["h"], g["hq"])
    j0, j1 = _span(px - g["pl"], g["sw"], 0, g["w"], wq)
    ii, j = var(f"{name}_i"), var(f"{name}_j")
    i = ii + i0

    def fills(start, extent: int, tag: str) -> Stmt | None:
        v = var(f"{name}_{tag}")
        return For(v, extent, Store(phases, (imm(py), imm(px), start + v), fill),
                   "vectorized") if extent > 0 else None

    copy = For(j, j1 - j0, Store(phases, (imm(py), imm(px), i * wq + j0 + j), Load(
        xb, (ni, ci, i * g["sh"] + py - g["pt"], (j0 + j) * g["sw"] + px - g["pl"]), xb.dtype)),
        "vectorized")
    row = seq(fills(i * wq, j0, "l"), copy, fills(i * wq + j1, wq - j1, "r"))
    return seq(fills(imm(0), i0 * wq, "t"), For(ii, i1 - i0, row) if i1 > i0 else None,
               fills(imm(i1 * wq), size - i1 * wq, "b"))


def pool2d_nchw(x: te.Tensor, kind: str, pool_size, strides, dilation, padding, out_hw,
                finish: Finish, name: str) -> te.Tensor:
    """max or avg pooling of a float NCHW tensor; padding is (top, left, bottom, right);
    `finish` turns the window's max or sum into the result at (row, column).

    Per channel, the padded plane is split into its stride phases, P[py][px][i*wq + j] =
    xpad[i*sh + py][j*sw + px], so that every tap is a contiguous run of P, and the windows
    are reduced over the flattened rows of width wq (the wq - ow columns past the end of each
    row are computed and dropped): one long vector loop whatever the stride or the width (a
    14-wide stride-2 row was a short loop of strided loads, mostly scalar)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = pool_size, strides, dilation
    pt, pl = padding[0], padding[1]
    oh, ow = out_hw
    qy, qx = (kh - 1) * dh // sh, (kw - 1) * dw // sw  # the farthest tap, in phase rows/columns
    hq, wq = oh + qy, ow + qx
    size = hq * wq + qx  # the last flattened row's dropped columns read qx past the plane
    dtype = x.dtype
    g = dict(h=h, w=w, pt=pt, pl=pl, sh=sh, sw=sw, hq=hq, wq=wq, size=size)

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        xb, out = ins[0], outs[0]
        ni, ci = var(f"{name}_n"), var(f"{name}_c")
        fill = const(float("-inf") if kind == "max" else 0.0, dtype)
        phases = Buffer(f"{name}_phases", (sh, sw, size), dtype)
        flat = Buffer(f"{name}_flat", (oh * wq,), dtype)
        split = seq(*(_phase(xb, phases, ni, ci, py, px, g, fill, f"{name}_{py}{px}")
                      for py in range(sh) for px in range(sw)))
        q = var(f"{name}_q")
        taps = []
        for r in range(kh):
            ry, oy = (r * dh) % sh, (r * dh) // sh
            for s_ in range(kw):
                rx, ox = (s_ * dw) % sw, (s_ * dw) // sw
                taps.append(Load(phases, (imm(ry), imm(rx), q + (oy * wq + ox)), dtype))
        acc = _max_with_nan(taps, dtype) if kind == "max" else _tree(taps, lambda a, b: a + b)
        reduce_ = For(q, oh * wq, Store(flat, (q,), acc), "vectorized")
        oi, oj = var(f"{name}_h"), var(f"{name}_w")
        idx = (ni, ci, oi, oj)
        val = finish(Load(flat, (oi * wq + oj,), dtype), oi, oj)
        if epilogue is not None:
            val = epilogue(val, idx)
        store = For(oi, oh, For(oj, ow, Store(out, idx, val), "vectorized"))
        plane = Allocate(phases, Allocate(flat, seq(split, reduce_, store)))
        kind_ = "parallel" if n * c * oh * ow * kh * kw >= MIN_PARALLEL_WORK else "serial"
        return For(ni, n, For(ci, c, plane, kind_))

    return te.extern((n, c, oh, ow), [x], mark_epilogue(fcompute), dtype=dtype, name=name)
