"""relay.nn deformable convolution: deformable_conv2d (TVM's name and attrs) and its modulated
form (ONNX DeformConv with a mask; DCNv2).

offset is [N, deformable_groups * KH * KW * 2, OH, OW] with the (dy, dx) pair of kernel tap
(ky, kx) of deformable group d at channel ((d * KH + ky) * KW + kx) * 2 (+1 for dx), as in TVM
and ONNX. mask is [N, deformable_groups * KH * KW, OH, OW]. Each tap samples the input
bilinearly at (y * stride - pad_top + ky * dilation + dy, x * ...); a corner outside the input
reads zero, exactly as ONNX's reference (GridSample, bilinear, zeros, align_corners=1) does.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from .nn import conv_out_dim, pad_tuple2d, pair
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import (check_arity, dims_agree, divides, fail, int_tuple, known,
                             shapes_agree, tensor_arg)

__all__ = ["deformable_conv2d", "modulated_deformable_conv2d"]

_FLOATS = ("float16", "float32", "float64")


def _deform_rel(op: str, modulated: bool):
    def rel(types, attrs):
        check_arity(op, types, 4 if modulated else 3)
        data = tensor_arg(op, types, 0, "data")
        offset = tensor_arg(op, types, 1, "offset")
        weight = tensor_arg(op, types, 2, "weight")
        for name, value, allowed in (("data_layout", attrs.data_layout, ("NCHW",)),
                                     ("kernel_layout", attrs.kernel_layout, ("OIHW",)),
                                     ("out_layout", attrs.out_layout, ("", "NCHW"))):
            if value not in allowed:
                raise fail(op, f"{name}={value!r} is not supported; expected one of {allowed}")
        if data.ndim != 4 or weight.ndim != 4 or offset.ndim != 4:
            raise fail(op, f"data, offset and weight must be 4-D, got {data.shape}, "
                           f"{offset.shape} and {weight.shape}")
        if data.dtype not in _FLOATS or weight.dtype != data.dtype or \
                offset.dtype != data.dtype:
            raise fail(op, f"data, offset and weight must share a float dtype, got "
                           f"{data.dtype}, {offset.dtype}, {weight.dtype}")
        n, c, h, w = data.shape
        o, i, kh, kw = weight.shape
        groups, dg = attrs.groups, attrs.deformable_groups
        if groups < 1 or not dims_agree(op, c, i * groups, "data channels must equal the "
                                        "weight's input channels times groups") or \
                not divides(op, o, groups, "groups must divide the output channels"):
            raise fail(op, f"channels do not match: data has {c} channels, weight "
                           f"{weight.shape} with groups={groups} expects {i * groups}")
        if dg < 1 or not divides(op, c, dg, "deformable_groups must divide the channels"):
            raise fail(op, f"deformable_groups={dg} must divide the {c} input channels")
        if attrs.channels is not None and not dims_agree(op, attrs.channels, o, "channels must "
                                                         "equal the weight's outputs"):
            raise fail(op, f"channels={attrs.channels} but weight has {o} output channels")
        if attrs.kernel_size is not None and not shapes_agree(
                op, tuple(attrs.kernel_size), (kh, kw), "kernel_size must match the weight"):
            raise fail(op, f"kernel_size={attrs.kernel_size} but weight kernel is {(kh, kw)}")
        sh, sw = int_tuple(op, attrs.strides, "strides", 2)
        dh, dw = int_tuple(op, attrs.dilation, "dilation", 2)
        pt, pl, pb, pr = int_tuple(op, attrs.padding, "padding", 4)
        oh = conv_out_dim(op, h, kh, sh, dh, pt + pb, "height")
        ow = conv_out_dim(op, w, kw, sw, dw, pl + pr, "width")
        want = (n, dg * kh * kw * 2, oh, ow)
        if not shapes_agree(op, offset.shape, want, "offset must be (N, deformable_groups*KH*KW*2,"
                                                    " OH, OW)"):
            raise fail(op, f"offset must be {want} (N, deformable_groups*KH*KW*2, OH, OW), "
                           f"got {offset.shape}")
        if modulated:
            mask = tensor_arg(op, types, 3, "mask")
            if not shapes_agree(op, mask.shape, want[:1] + (want[1] // 2,) + want[2:],
                                "mask must be (N, deformable_groups*KH*KW, OH, OW)") or \
                    mask.dtype != data.dtype:
                raise fail(op, f"mask must be {data.dtype} {want[:1] + (want[1] // 2,) + want[2:]}"
                               f" (N, deformable_groups*KH*KW, OH, OW), got {mask.dtype} "
                               f"{mask.shape}")
        return TensorType((known(n, offset.shape[0]), o, oh, ow), attrs.out_dtype or data.dtype)
    return rel


def bilinear_zeros(img: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """img [C, H, W] sampled at float positions y, x (same shape S): [C, *S]; corners outside
    the image read zero."""
    _, h, w = img.shape
    ok = np.isfinite(y) & np.isfinite(x)
    y, x = np.where(ok, y, -2.0), np.where(ok, x, -2.0)  # non-finite -> all corners outside
    y0, x0 = np.floor(y), np.floor(x)
    ly, lx = y - y0, x - x0
    y0, x0 = y0.clip(-2, h + 1).astype(np.int64), x0.clip(-2, w + 1).astype(np.int64)
    out = 0
    for yy, wy in ((y0, 1 - ly), (y0 + 1, ly)):
        for xx, wx in ((x0, 1 - lx), (x0 + 1, lx)):
            valid = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            picked = img[:, yy.clip(0, h - 1), xx.clip(0, w - 1)]
            out = out + np.where(valid, wy * wx, 0.0) * picked
    return out


def _deform_ref(inputs, attrs):
    data, offset, weight = (a.astype(np.float64) for a in inputs[:3])
    n, c, h, w = data.shape
    o, ig, kh, kw = weight.shape
    dg, groups = attrs.deformable_groups, attrs.groups
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    pt, pl = attrs.padding[0], attrs.padding[1]
    oh, ow = offset.shape[2:]
    off = offset.reshape(n, dg, kh, kw, 2, oh, ow)
    mask = inputs[3].astype(np.float64).reshape(n, dg, kh, kw, oh, ow) if len(inputs) > 3 \
        else np.ones((n, dg, kh, kw, oh, ow))
    base_y = (np.arange(oh) * sh - pt)[:, None]
    base_x = (np.arange(ow) * sw - pl)[None, :]
    cpg, og = c // dg, o // groups
    out = np.zeros((n, o, oh, ow))
    for b in range(n):
        # cols[c, ky, kx, oh, ow]: the modulated samples (an im2col of the deformed taps)
        cols = np.zeros((c, kh, kw, oh, ow))
        for d in range(dg):
            img = data[b, d * cpg:(d + 1) * cpg]
            for ky in range(kh):
                for kx in range(kw):
                    y = base_y + ky * dh + off[b, d, ky, kx, 0]
                    x = base_x + kx * dw + off[b, d, ky, kx, 1]
                    cols[d * cpg:(d + 1) * cpg, ky, kx] = \
                        bilinear_zeros(img, y, x) * mask[b, d, ky, kx]
        for g in range(groups):
            out[b, g * og:(g + 1) * og] = np.einsum(
                "cyxhw,ocyx->ohw", cols[g * ig:(g + 1) * ig], weight[g * og:(g + 1) * og])
    return out.astype(attrs.out_dtype or inputs[0].dtype)


_ATTRS = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1),
          "deformable_groups": 1, "groups": 1, "channels": None, "kernel_size": None,
          "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "", "out_dtype": ""}
for _name, _modulated in (("nn.deformable_conv2d", False),
                          ("nn.modulated_deformable_conv2d", True)):
    register(OpDef(name=_name, num_inputs=4 if _modulated else 3,
                   type_rel=_deform_rel(_name, _modulated),
                   pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_deform_ref,
                   attrs=dict(_ATTRS), attrs_type_key="relay.attrs.DeformableConv2DAttrs"))


def _attrs(strides, padding, dilation, deformable_groups, groups, channels, kernel_size,
           data_layout, kernel_layout, out_layout, out_dtype) -> dict:
    return dict(strides=pair(strides), padding=pad_tuple2d(padding), dilation=pair(dilation),
                deformable_groups=int(deformable_groups), groups=int(groups),
                channels=channels, kernel_size=None if kernel_size is None
                else pair(kernel_size), data_layout=data_layout, kernel_layout=kernel_layout,
                out_layout=out_layout, out_dtype=out_dtype)


def deformable_conv2d(data, offset, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                      deformable_groups=1, groups=1, channels=None, kernel_size=None,
                      data_layout="NCHW", kernel_layout="OIHW", out_layout="", out_dtype=""):
    """relay.nn.deformable_conv2d: conv2d whose taps sample data at learned offsets."""
    return make_call("nn.deformable_conv2d", [data, offset, weight],
                     **_attrs(strides, padding, dilation, deformable_groups, groups, channels,
                              kernel_size, data_layout, kernel_layout, out_layout, out_dtype))


def modulated_deformable_conv2d(data, offset, weight, mask, strides=(1, 1), padding=(0, 0),
                                dilation=(1, 1), deformable_groups=1, groups=1, channels=None,
                                kernel_size=None, data_layout="NCHW", kernel_layout="OIHW",
                                out_layout="", out_dtype=""):
    """deformable_conv2d with each tap's sample scaled by mask (DCNv2, ONNX DeformConv)."""
    return make_call("nn.modulated_deformable_conv2d", [data, offset, weight, mask],
                     **_attrs(strides, padding, dilation, deformable_groups, groups, channels,
                              kernel_size, data_layout, kernel_layout, out_layout, out_dtype))
