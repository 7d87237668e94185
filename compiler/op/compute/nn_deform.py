"""nn.deformable_conv2d / nn.modulated_deformable_conv2d: a reduction over input channels x
kernel taps of bilinear samples at data-dependent positions.

Offsets come from data, so each sample position is limited (NaN and huge values included)
before it becomes an integer, and every corner index is clamped before its load; a corner
outside the input is then masked to zero (ONNX's zeros padding). Native code never reads out
of bounds whatever the offsets hold.
"""
from __future__ import annotations

from .common import clamp, in_float32, rule, te, tir


def _f(value: float, dt: str):
    return tir.const(float(value), dt)


def _limited(p, size: int, dt: str):
    """p when it lies in [-2, size + 1] (every corner outside otherwise, and for NaN)."""
    ok = tir.all(tir.ge(p, _f(-2, dt)), tir.le(p, _f(size + 1, dt)))
    return tir.select(ok, p, _f(-2, dt))


def _axis(p, size: int, dt: str) -> list:
    """[(clamped index, inside, weight)] of the two bilinear corners along one axis."""
    p = _limited(p, size, dt)
    p0 = tir.floor(p)
    t = p - p0
    i0 = tir.cast(p0, "int64")
    out = []
    for i, wt in ((i0, _f(1, dt) - t), (i0 + 1, t)):
        out.append((clamp(i, 0, size - 1), tir.all(tir.ge(i, 0), tir.lt(i, size)), wt))
    return out


@rule("nn.deformable_conv2d", "nn.modulated_deformable_conv2d")
@in_float32
def _deformable_conv2d(inputs, attrs, out_type):
    data, offset, weight = inputs[:3]
    mask = inputs[3] if len(inputs) > 3 else None
    dt = out_type.dtype
    _, c, h, w = data.shape
    o, ig, kh, kw = weight.shape
    og, cpg = o // attrs.groups, c // attrs.deformable_groups
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    pt, pl = attrs.padding[0], attrs.padding[1]

    def f(n, oc, y, x):
        ic = te.reduce_axis(ig, "ic")
        ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
        ch = tir.floordiv(oc, og) * ig + ic if attrs.groups > 1 else ic
        d = tir.floordiv(ch, cpg) if attrs.deformable_groups > 1 else 0
        tap = (d * kh + ry) * kw + rx
        py = tir.cast(y * sh - pt + ry * dh, dt) + tir.cast(offset[n, tap * 2, y, x], dt)
        px = tir.cast(x * sw - pl + rx * dw, dt) + tir.cast(offset[n, tap * 2 + 1, y, x], dt)
        total = None
        for iy, oky, wy in _axis(py, h, dt):
            for ix, okx, wx in _axis(px, w, dt):
                v = tir.select(tir.all(oky, okx), wy * wx * tir.cast(data[n, ch, iy, ix], dt),
                               _f(0, dt))
                total = v if total is None else total + v
        if mask is not None:
            total = total * tir.cast(mask[n, tap, y, x], dt)
        return te.sum(total * tir.cast(weight[oc, ic, ry, rx], dt), (ic, ry, rx))
    return te.compute(out_type.shape, f, name="T_deformable_conv2d")
