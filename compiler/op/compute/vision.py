"""vision.roi_align: bilinear samples at box-dependent positions, reduced over each bin.

Box coordinates come from data, so every float is limited (NaN included) before it becomes an
index and every index is clamped: native code never reads outside the feature map.
"""
from __future__ import annotations

from .common import clamp, rule, te, tir


def _f(value: float, dt: str):
    return tir.const(float(value), dt)


def _box(rois, r, k: int, scale: float, offset: float, dt: str):
    return tir.cast(rois[r, k], dt) * _f(scale, dt) - _f(offset, dt)


@rule("vision.roi_align")
def _roi_align(inputs, attrs, out_type):
    data, rois = inputs
    dt = out_type.dtype
    n, _, h, w = data.shape
    ph, pw = attrs.pooled_size
    g = attrs.sample_ratio
    offset = 0.5 if attrs.aligned else 0.0

    def f(r, ch, i, j):
        bf = tir.cast(rois[r, 0], dt)
        bf = tir.select(tir.all(tir.ge(bf, _f(0, dt)), tir.le(bf, _f(n - 1, dt))), bf, _f(0, dt))
        b = tir.cast(bf, "int64")
        sx, sy = (_box(rois, r, k, attrs.spatial_scale, offset, dt) for k in (1, 2))
        rw = _box(rois, r, 3, attrs.spatial_scale, offset, dt) - sx
        rh = _box(rois, r, 4, attrs.spatial_scale, offset, dt) - sy
        if not attrs.aligned:
            rw, rh = tir.max(rw, _f(1, dt)), tir.max(rh, _f(1, dt))
        bh, bw = rh / _f(ph, dt), rw / _f(pw, dt)
        iy, ix = te.reduce_axis(g, "iy"), te.reduce_axis(g, "ix")
        y = sy + tir.cast(i, dt) * bh + (tir.cast(iy, dt) + _f(0.5, dt)) * bh / _f(g, dt)
        x = sx + tir.cast(j, dt) * bw + (tir.cast(ix, dt) + _f(0.5, dt)) * bw / _f(g, dt)
        inside = tir.all(tir.ge(y, _f(-1, dt)), tir.le(y, _f(h, dt)),
                         tir.ge(x, _f(-1, dt)), tir.le(x, _f(w, dt)))
        yc = tir.select(inside, tir.min(tir.max(y, _f(0, dt)), _f(h - 1, dt)), _f(0, dt))
        xc = tir.select(inside, tir.min(tir.max(x, _f(0, dt)), _f(w - 1, dt)), _f(0, dt))
        yl, xl = tir.cast(tir.floor(yc), "int64"), tir.cast(tir.floor(xc), "int64")
        ly, lx = yc - tir.floor(yc), xc - tir.floor(xc)
        mask = tir.select(inside, _f(1, dt), _f(0, dt))
        hy, hx = (_f(1, dt) - ly) * mask, _f(1, dt) - lx
        ly = ly * mask
        yh, xh = clamp(yl + 1, 0, h - 1), clamp(xl + 1, 0, w - 1)
        yl, xl = clamp(yl, 0, h - 1), clamp(xl, 0, w - 1)
        corners = [hy * hx * data[b, ch, yl, xl], hy * lx * data[b, ch, yl, xh],
                   ly * hx * data[b, ch, yh, xl], ly * lx * data[b, ch, yh, xh]]
        if attrs.mode == "max":
            best = corners[0]
            for v in corners[1:]:
                best = tir.max(best, v)
            return te.max(best, (iy, ix))
        total = corners[0] + corners[1] + corners[2] + corners[3]
        return te.sum(total, (iy, ix)) / _f(g * g, dt)
    return te.compute(out_type.shape, f, name="T_roi_align")
