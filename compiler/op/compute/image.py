"""image.grid_sample and nn.upsampling: gathers whose indices are clamped before every load.

Each output element sums its (2 or 4)^ndim taps, unrolled; a tap outside the input reads a
clamped index and is then masked (zeros padding) so native code never reads out of bounds,
whatever the grid holds (NaN and huge coordinates included).
"""
from __future__ import annotations

import itertools

from compiler.op.image import CUBIC_A, bounds
from compiler.op.nn_upsampling import NEAREST_EPSILON, source_scale, spatial_axes

from .common import clamp, rule, te, tir


def _f(value: float, dt: str):
    return tir.const(float(value), dt)


def _reflect(x, lo: float, hi: float, dt: str):
    """Fold x into [lo, hi] by repeated reflection (ONNX's _gs_reflect), as an expression."""
    rng = hi - lo
    if rng <= 0:
        return _f(lo, dt)
    below, above = tir.lt(x, _f(lo, dt)), tir.gt(x, _f(hi, dt))
    dx = tir.select(below, _f(lo, dt) - x, tir.select(above, x - _f(hi, dt), _f(0, dt)))
    n = tir.trunc(dx / _f(rng, dt))
    r = dx - n * _f(rng, dt)
    even = tir.eq(tir.floormod(n, _f(2, dt)), _f(0, dt))
    low_side = tir.select(below, even, tir.logical_not(even))
    folded = tir.select(low_side, _f(lo, dt) + r, _f(hi, dt) - r)
    return tir.select(tir.logical_or(below, above), folded, x)


def _safe(x, size: int, dt: str):
    """x limited to [-8, size + 8] (NaN -> -8) so the float-to-int conversion is defined."""
    ok = tir.all(tir.ge(x, _f(-8, dt)), tir.le(x, _f(size + 8, dt)))
    return tir.select(ok, x, _f(-8, dt))


def _cubic(t, dt: str) -> list:
    a = CUBIC_A

    def near(d):
        return ((_f(a + 2, dt) * d - _f(a + 3, dt)) * d) * d + _f(1, dt)

    def far(d):
        return ((_f(a, dt) * d - _f(5 * a, dt)) * d + _f(8 * a, dt)) * d - _f(4 * a, dt)
    one = _f(1, dt)
    return [far(t + one), near(t), near(one - t), far(_f(2, dt) - t)]


def _axis_taps(g, size: int, attrs, dt: str) -> list:
    """[(load index, validity or None, weight or None)] along one axis for grid value g."""
    lo, hi = bounds(size, attrs.align_corners)
    if attrs.align_corners:
        x = (g + _f(1, dt)) * _f((size - 1) / 2, dt)
    else:
        x = ((g + _f(1, dt)) * _f(size, dt) - _f(1, dt)) / _f(2, dt)
    if attrs.method == "nearest":
        x = tir.round(x)
    outside = tir.logical_or(tir.lt(x, _f(lo, dt)), tir.gt(x, _f(hi, dt)))
    if attrs.padding_mode == "border":
        x = tir.select(outside, tir.min(tir.max(x, _f(0, dt)), _f(size - 1, dt)), x)
    elif attrs.padding_mode == "reflection":
        x = _reflect(x, lo, hi, dt)
    x = _safe(x, size, dt)
    if attrs.method == "nearest":
        starts, weights = [tir.cast(x, "int64")], [None]
    else:
        x0 = tir.floor(x)
        t = x - x0
        base = tir.cast(x0, "int64")
        if attrs.method == "bilinear":
            starts, weights = [base, base + 1], [_f(1, dt) - t, t]
        else:
            starts, weights = [base - 1, base, base + 1, base + 2], _cubic(t, dt)
    out = []
    for i, w in zip(starts, weights):
        valid = None
        if attrs.padding_mode == "zeros":
            valid = tir.all(tir.ge(i, 0), tir.lt(i, size))
        elif attrs.padding_mode == "reflection":
            i = tir.cast(tir.trunc(_reflect(tir.cast(i, dt), lo, hi, dt)), "int64")
        out.append((clamp(i, 0, size - 1), valid, w))
    return out


@rule("image.grid_sample")
def _grid_sample(inputs, attrs, out_type):
    data, grid = inputs
    dt = out_type.dtype
    nd = data.ndim - 2
    sizes = data.shape[2:]

    def f(n, c, *pos):
        per_axis = [_axis_taps(tir.cast(grid[(n, nd - 1 - a) + pos], dt), sizes[a], attrs, dt)
                    for a in range(nd)]
        total = None
        for combo in itertools.product(*per_axis):
            v = data[(n, c) + tuple(i for i, _, _ in combo)]
            for _, _, w in combo:
                if w is not None:
                    v = v * w
            conds = [ok for _, ok, _ in combo if ok is not None]
            if conds:
                v = tir.select(tir.all(*conds), v, _f(0, dt))
            total = v if total is None else total + v
        return total
    return te.compute(out_type.shape, f, name="T_grid_sample")


def _upsampling_taps(i, in_size: int, out: int, attrs) -> list:
    """[(int64 index, float32 weight or None)] along one axis for output index i."""
    f32 = "float32"
    src = tir.cast(i, f32) * _f(source_scale(in_size, out, attrs.align_corners), f32)
    if attrs.method == "nearest_neighbor":
        near = tir.round(src) if attrs.align_corners \
            else tir.floor(src + _f(NEAREST_EPSILON, f32))
        return [(clamp(tir.cast(near, "int64"), 0, in_size - 1), None)]
    low = tir.floor(src)
    t = src - low
    low = tir.cast(low, "int64")
    return [(clamp(low, 0, in_size - 1), _f(1, f32) - t), (clamp(low + 1, 0, in_size - 1), t)]


@rule("nn.upsampling")
def _upsampling(inputs, attrs, out_type):
    (x,) = inputs
    ah, aw = spatial_axes(attrs.layout)

    def f(*i):
        rows = _upsampling_taps(i[ah], x.shape[ah], out_type.shape[ah], attrs)
        cols = _upsampling_taps(i[aw], x.shape[aw], out_type.shape[aw], attrs)

        def at(r, c):
            idx = list(i)
            idx[ah], idx[aw] = r, c
            return tir.cast(x[tuple(idx)], "float32")
        if attrs.method == "nearest_neighbor":
            return tir.cast(at(rows[0][0], cols[0][0]), out_type.dtype)
        (c0, w0), (c1, w1) = cols
        top = at(rows[0][0], c0) * w0 + at(rows[0][0], c1) * w1
        bottom = at(rows[1][0], c0) * w0 + at(rows[1][0], c1) * w1
        return tir.cast(top * rows[0][1] + bottom * rows[1][1], out_type.dtype)
    return te.compute(out_type.shape, f, name="T_upsampling")
