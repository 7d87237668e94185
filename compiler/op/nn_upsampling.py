"""relay.nn.upsampling: nearest-neighbour or bilinear 2-D upsampling (NCHW or NHWC), as TVM's.

TVM computes it as a resize to round(size * scale) with the "asymmetric" coordinate map
(source = out_index * in_size / out_size), or "align_corners" when asked: nearest picks
floor(source + 1e-5) (round half to even under align_corners), bilinear lerps the two
neighbours along each axis in float32, reading clamped indices. The reference and the compute
rule below follow those float32 steps, so they agree bit for bit on nearest.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import const
from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register, static_or_expr
from .type_relations import check_arity, fail, holds, is_dyn, tensor_arg

__all__ = ["upsampling"]

METHODS = ("nearest_neighbor", "bilinear")
NEAREST_EPSILON = 1e-5  # TVM's floor(x + eps) for nearest under the asymmetric map


def spatial_axes(layout: str) -> tuple:
    """(height axis, width axis) of an NCHW / NHWC tensor."""
    return layout.index("H"), layout.index("W")


def out_size(size: int, scale: float) -> int:
    """round(size * scale); for a dynamic size only a whole scale is exact (size * scale)."""
    if is_dyn(size):
        if float(scale) != int(scale):
            raise fail("nn.upsampling", f"a dynamic input dim needs a whole scale to give an "
                                        f"exact output size, got scale {scale}")
        return size * int(scale)
    return int(np.rint(size * scale))


def source_scale(in_size: int, out: int, align_corners: bool) -> np.float32:
    """Output index -> source coordinate factor, as float32 (TVM's get_inx)."""
    if align_corners:
        return np.float32(in_size - 1) / np.float32(out - 1) if out > 1 else np.float32(0)
    return np.float32(in_size) / np.float32(out)


def _upsampling_rel(types, attrs):
    op = "nn.upsampling"
    check_arity(op, types, 1)
    data = tensor_arg(op, types, 0, "data")
    if attrs.layout not in ("NCHW", "NHWC"):
        raise fail(op, f"layout={attrs.layout!r} is not supported; expected 'NCHW' or 'NHWC'")
    if attrs.method not in METHODS:
        raise fail(op, f"method={attrs.method!r} is not supported; expected one of {METHODS}")
    if data.ndim != 4:
        raise fail(op, f"data must be 4-D ({attrs.layout}), got shape {data.shape}")
    shape = list(data.shape)
    for axis, scale in zip(spatial_axes(attrs.layout), (attrs.scale_h, attrs.scale_w)):
        shape[axis] = out_size(shape[axis], scale)
        if not holds(op, "gt", shape[axis], 0, f"the scale must not empty axis {axis}"):
            raise fail(op, f"scale {scale} makes axis {axis} of data {data.shape} empty")
    return TensorType(tuple(shape), data.dtype)


def _axis_taps(in_size: int, out: int, attrs) -> list:
    """[(indices, weight)] along one axis: one tap for nearest, two for bilinear."""
    src = np.arange(out, dtype=np.float32) * source_scale(in_size, out, attrs.align_corners)
    if attrs.method == "nearest_neighbor":
        near = np.rint(src) if attrs.align_corners else np.floor(src + np.float32(NEAREST_EPSILON))
        return [(np.clip(near.astype(np.int64), 0, in_size - 1), None)]
    low = np.floor(src)
    t = src - low
    return [(np.clip(low.astype(np.int64) + k, 0, in_size - 1), w)
            for k, w in ((0, np.float32(1) - t), (1, t))]


def _upsampling_ref(inputs, attrs):
    x = inputs[0]
    ah, aw = spatial_axes(attrs.layout)
    out = x.astype(np.float32)
    rows = _axis_taps(x.shape[ah], out_size(x.shape[ah], attrs.scale_h), attrs)
    cols = _axis_taps(x.shape[aw], out_size(x.shape[aw], attrs.scale_w), attrs)
    if attrs.method == "nearest_neighbor":
        return out.take(rows[0][0], ah).take(cols[0][0], aw).astype(x.dtype)

    def lerp(a, b, t, axis):
        shape = [1] * x.ndim
        shape[axis] = -1
        t = t.reshape(shape)
        return a * (np.float32(1) - t) + b * t
    # TVM's order: along width in the two neighbouring rows, then between the rows
    top, bottom = (out.take(rows[k][0], ah) for k in (0, 1))
    top = lerp(top.take(cols[0][0], aw), top.take(cols[1][0], aw), cols[1][1], aw)
    bottom = lerp(bottom.take(cols[0][0], aw), bottom.take(cols[1][0], aw), cols[1][1], aw)
    return lerp(top, bottom, rows[1][1], ah).astype(x.dtype)


register(OpDef(name="nn.upsampling", num_inputs=1, type_rel=_upsampling_rel,
               pattern=OpPattern.INJECTIVE, reference=_upsampling_ref,
               attrs={"scale_h": 1.0, "scale_w": 1.0, "layout": "NCHW",
                      "method": "nearest_neighbor", "align_corners": False},
               attrs_type_key="relay.attrs.UpSamplingAttrs"))


def upsampling(data, scale_h=1, scale_w=1, layout="NCHW", method="nearest_neighbor",
               align_corners=False):
    """relay.nn.upsampling: scale H and W by scale_h / scale_w (nearest_neighbor or bilinear);
    dyn.nn.upsampling when a scale is a computed tensor."""
    (sh, dh), (sw, dw) = static_or_expr(scale_h), static_or_expr(scale_w)
    if dh is not None or dw is not None:
        scales = [d if d is not None else const(float(s), "float32") for s, d in
                  ((sh, dh), (sw, dw))]
        return make_call("dyn.nn.upsampling", [data, *scales], layout=layout, method=method,
                         align_corners=bool(align_corners))
    scale_h, scale_w = float(np.asarray(sh).reshape(-1)[0]), float(np.asarray(sw).reshape(-1)[0])
    return make_call("nn.upsampling", [data], scale_h=float(scale_h), scale_w=float(scale_w),
                     layout=layout, method=method, align_corners=bool(align_corners))
