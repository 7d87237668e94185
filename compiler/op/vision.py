"""relay.vision ops: roi_align (TVM's name and attrs, ONNX RoiAlign / onnxruntime semantics).

rois are [R, 5] rows (batch index, x1, y1, x2, y2) as in TVM. `aligned` shifts the box by half
a pixel (ONNX's half_pixel) and drops the 1-pixel minimum box size. Max mode takes the maximum
of the weighted corner values of each sample, as onnxruntime (and ONNX's reference) does.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import check_arity, dims_agree, fail, int_tuple, tensor_arg

__all__ = ["roi_align"]


def _roi_align_rel(types, attrs):
    op = "vision.roi_align"
    check_arity(op, types, 2)
    data, rois = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "rois")
    if attrs.layout != "NCHW" or data.ndim != 4:
        raise fail(op, f"only 4-D NCHW data is supported, got layout={attrs.layout!r} "
                       f"shape {data.shape}")
    if rois.ndim != 2 or not dims_agree(op, rois.shape[1], 5, "rois must be [R, 5]"):
        raise fail(op, f"rois must be [R, 5] (batch, x1, y1, x2, y2), got {rois.shape}")
    if data.dtype not in ("float32", "float64") or rois.dtype != data.dtype:
        raise fail(op, f"data and rois must share a float dtype, got {data.dtype}, {rois.dtype}")
    if attrs.mode not in ("avg", "max"):
        raise fail(op, f"mode must be 'avg' or 'max', got {attrs.mode!r}")
    if attrs.sample_ratio < 1:
        raise fail(op, f"sample_ratio={attrs.sample_ratio}: adaptive sampling (<= 0) needs a "
                       "data-dependent sample count; give a positive sample_ratio")
    ph, pw = int_tuple(op, attrs.pooled_size, "pooled_size", 2)
    return TensorType((rois.shape[0], data.shape[1], ph, pw), data.dtype)


def sample_corners(y: float, x: float, h: int, w: int) -> list:
    """[(weight, row, col)] of the bilinear corners of one sample (weights 0 outside)."""
    if not (-1.0 <= y <= h and -1.0 <= x <= w):  # outside (or NaN): contributes nothing
        return [(0.0, 0, 0)] * 4
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    hy, hx = 1 - ly, 1 - lx
    return [(hy * hx, yl, xl), (hy * lx, yl, xh), (ly * hx, yh, xl), (ly * lx, yh, xh)]


def _roi_align_ref(inputs, attrs):
    data, rois = inputs
    n, c, h, w = data.shape
    ph, pw = attrs.pooled_size
    g = attrs.sample_ratio
    offset = 0.5 if attrs.aligned else 0.0
    out = np.zeros((rois.shape[0], c, ph, pw), data.dtype)
    for r, (b, x1, y1, x2, y2) in enumerate(rois.astype(np.float64)):
        img = data[int(b) if 0 <= b <= n - 1 else 0].astype(np.float64)  # NaN/out -> 0
        sy, sx = y1 * attrs.spatial_scale - offset, x1 * attrs.spatial_scale - offset
        rh, rw = y2 * attrs.spatial_scale - offset - sy, x2 * attrs.spatial_scale - offset - sx
        if not attrs.aligned:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            for j in range(pw):
                vals = []
                for iy in range(g):
                    for ix in range(g):
                        y = sy + i * bh + (iy + 0.5) * bh / g
                        x = sx + j * bw + (ix + 0.5) * bw / g
                        corners = [wt * img[:, yy, xx]
                                   for wt, yy, xx in sample_corners(y, x, h, w)]
                        vals.append(np.max(corners, axis=0) if attrs.mode == "max"
                                    else np.sum(corners, axis=0))
                out[r, :, i, j] = np.max(vals, axis=0) if attrs.mode == "max" \
                    else np.sum(vals, axis=0) / (g * g)
    return out


register(OpDef(name="vision.roi_align", num_inputs=2, type_rel=_roi_align_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_roi_align_ref,
               attrs={"pooled_size": (1, 1), "spatial_scale": 1.0, "sample_ratio": 2,
                      "layout": "NCHW", "mode": "avg", "aligned": False},
               attrs_type_key="relay.attrs.ROIAlignAttrs"))


def roi_align(data, rois, pooled_size, spatial_scale, sample_ratio=2, layout="NCHW",
              mode="avg", aligned=False):
    """relay.vision.roi_align: bilinear-sampled average (or max) over each box's bins."""
    size = (int(pooled_size),) * 2 if isinstance(pooled_size, (int, np.integer)) \
        else tuple(int(s) for s in pooled_size)
    return make_call("vision.roi_align", [data, rois], pooled_size=size,
                     spatial_scale=float(spatial_scale), sample_ratio=int(sample_ratio),
                     layout=layout, mode=mode, aligned=bool(aligned))
