"""relay.nn pooling (max/avg, global, adaptive) and depth_to_space / space_to_depth.

Pools take NCHW, NHWC and TVM's channel-blocked NCHW<x>c (data [N, C/x, H, W, x] -> out
[N, C/x, OH, OW, x], x any block size; the ConvertBlockedLayout pass keeps activations in it).
"""
from __future__ import annotations

import math

import numpy as np

from compiler.ir.types import TensorType
from .blocked_layout import BLOCKED_FORM, block_ref, channel_block_of, unblock_ref
from .registry import OpDef, OpPattern, get_def, make_call, register
from .type_relations import check_arity, dims_agree, divides, fail, holds, int_tuple, tensor_arg
from .window import lowest_value, pad_tuple2d, pair, pool_counts, window_out_dim

__all__ = ["max_pool2d", "avg_pool2d", "global_max_pool2d", "global_avg_pool2d",
           "adaptive_max_pool2d", "adaptive_avg_pool2d", "depth_to_space", "space_to_depth"]

_LAYOUTS = ("NCHW", "NHWC")


def _data_4d(op: str, types, attrs) -> TensorType:
    data = tensor_arg(op, types, 0, "data")
    block = channel_block_of(attrs.layout)
    if attrs.layout not in _LAYOUTS and block is None:
        raise fail(op, f"layout={attrs.layout!r} is not supported; expected one of {_LAYOUTS} "
                       f"or NCHW<x>c")
    if attrs.out_layout not in ("", attrs.layout):
        raise fail(op, f"out_layout={attrs.out_layout!r} must be '' or the input layout "
                       f"{attrs.layout!r}")
    if block is not None:  # NCHW<x>c: [N, C/x, H, W, x]
        if data.ndim != 5 or not dims_agree(op, data.shape[4], block, f"dim 4 must be {block}"):
            raise fail(op, f"layout={attrs.layout!r} needs data [N, C/{block}, H, W, {block}], "
                           f"got shape {data.shape}")
    elif data.ndim != 4:
        raise fail(op, f"data must be 4-D ({attrs.layout}), got shape {data.shape}")
    return data


def _hw(layout: str) -> tuple:
    return (1, 2) if layout == "NHWC" else (2, 3)


def _with_hw(shape: tuple, layout: str, h: int, w: int) -> tuple:
    out = list(shape)
    hi, wi = _hw(layout)
    out[hi], out[wi] = h, w
    return tuple(out)


def _pool_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = _data_4d(op, types, attrs)
        kh, kw = int_tuple(op, attrs.pool_size, "pool_size", 2)
        sh, sw = int_tuple(op, attrs.strides, "strides", 2)
        dh, dw = int_tuple(op, attrs.dilation, "dilation", 2)
        pt, pl, pb, pr = int_tuple(op, attrs.padding, "padding", 4)
        hi, wi = _hw(attrs.layout)
        oh = window_out_dim(op, data.shape[hi], kh, sh, dh, pt + pb, attrs.ceil_mode)
        ow = window_out_dim(op, data.shape[wi], kw, sw, dw, pl + pr, attrs.ceil_mode)
        return TensorType(_with_hw(data.shape, attrs.layout, oh, ow), data.dtype)
    return rel


def _to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    if channel_block_of(layout) is not None:
        return unblock_ref(x)
    return x if layout == "NCHW" else x.transpose(0, 3, 1, 2)


def _from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    block = channel_block_of(layout)
    if block is not None:
        return block_ref(x, block)
    return x if layout == "NCHW" else x.transpose(0, 2, 3, 1)


def _pool_ref(kind: str):
    def reference(inputs, attrs):
        data = inputs[0]
        x = _to_nchw(data, attrs.layout)
        (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
        pt, pl, pb, pr = attrs.padding
        h, w = x.shape[2:]
        oh = (h + pt + pb - dh * (kh - 1) - 1 + (sh - 1 if attrs.ceil_mode else 0)) // sh + 1
        ow = (w + pl + pr - dw * (kw - 1) - 1 + (sw - 1 if attrs.ceil_mode else 0)) // sw + 1
        # extra bottom/right padding so every (ceil-mode) window is inside the buffer
        eb = max(pb, (oh - 1) * sh + dh * (kh - 1) + 1 - h - pt)
        er = max(pr, (ow - 1) * sw + dw * (kw - 1) + 1 - w - pl)
        widths = ((0, 0), (0, 0), (pt, eb), (pl, er))
        if kind == "max":
            low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
            xp = np.pad(x, widths, constant_values=low)
            acc = np.full(x.shape[:2] + (oh, ow), low, dtype=x.dtype)
        else:
            xp = np.pad(x.astype(np.float64), widths)
            acc = np.zeros(x.shape[:2] + (oh, ow))
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
                cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
                if kind == "max":
                    acc = np.maximum(acc, xp[:, :, rows, cols])
                else:
                    acc = acc + xp[:, :, rows, cols]
        # taps inside the input (or, with count_include_pad, inside input + pads) per window
        include = kind == "avg" and attrs.count_include_pad
        count = np.outer(pool_counts(h, kh, sh, dh, pt, pb, oh, include),
                         pool_counts(w, kw, sw, dw, pl, pr, ow, include))
        if kind == "max":  # a window over padding alone: the lowest finite value
            acc = np.where(count == 0, x.dtype.type(lowest_value(x.dtype)), acc)
        else:
            acc = acc / np.maximum(count, 1)
            if x.dtype.kind in "iu":
                acc = np.trunc(acc)
        return _from_nchw(acc.astype(data.dtype), attrs.layout)
    return reference


_POOL_ATTRS = {"pool_size": (1, 1), "strides": (1, 1), "dilation": (1, 1),
               "padding": (0, 0, 0, 0), "layout": "NCHW", "out_layout": "", "ceil_mode": False}
register(OpDef(name="nn.max_pool2d", num_inputs=1, type_rel=_pool_rel("nn.max_pool2d"),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_pool_ref("max"),
               attrs=dict(_POOL_ATTRS), attrs_type_key="relay.attrs.MaxPool2DAttrs"))
register(OpDef(name="nn.avg_pool2d", num_inputs=1, type_rel=_pool_rel("nn.avg_pool2d"),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_pool_ref("avg"),
               attrs={**_POOL_ATTRS, "count_include_pad": False},
               attrs_type_key="relay.attrs.AvgPool2DAttrs"))


for _name in ("nn.max_pool2d", "nn.avg_pool2d"):
    get_def(_name).set_attr(BLOCKED_FORM, "layout")


def max_pool2d(data, pool_size=(1, 1), strides=(1, 1), dilation=(1, 1), padding=(0, 0),
               layout="NCHW", out_layout="", ceil_mode=False):
    """relay.nn.max_pool2d (padding is normalised to 4 values, as TVM does)."""
    return make_call("nn.max_pool2d", [data], pool_size=pair(pool_size), strides=pair(strides),
                     dilation=pair(dilation), padding=pad_tuple2d(padding), layout=layout,
                     out_layout=out_layout, ceil_mode=bool(ceil_mode))


def avg_pool2d(data, pool_size=(1, 1), strides=(1, 1), dilation=(1, 1), padding=(0, 0),
               layout="NCHW", out_layout="", ceil_mode=False, count_include_pad=False):
    """relay.nn.avg_pool2d; count_include_pad divides by the taps inside input + pads."""
    return make_call("nn.avg_pool2d", [data], pool_size=pair(pool_size), strides=pair(strides),
                     dilation=pair(dilation), padding=pad_tuple2d(padding), layout=layout,
                     out_layout=out_layout, ceil_mode=bool(ceil_mode),
                     count_include_pad=bool(count_include_pad))


def _adaptive_sizes(attrs, h: int, w: int) -> tuple:
    """output_size: () keeps the input size, one value means square, None keeps that dim."""
    size = tuple(attrs.output_size) if attrs.output_size is not None else ()
    if not size:
        return h, w
    if len(size) == 1:
        size = size * 2
    return (h if size[0] is None else size[0]), (w if size[1] is None else size[1])


def _adaptive_rel(op: str, is_global: bool):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = _data_4d(op, types, attrs)
        if is_global:
            return TensorType(_with_hw(data.shape, attrs.layout, 1, 1), data.dtype)
        hi, wi = _hw(attrs.layout)
        oh, ow = _adaptive_sizes(attrs, data.shape[hi], data.shape[wi])
        if not holds(op, "gt", oh, 0, "output_size must be positive") or \
                not holds(op, "gt", ow, 0, "output_size must be positive"):
            raise fail(op, f"output_size must be positive, got {attrs.output_size}")
        return TensorType(_with_hw(data.shape, attrs.layout, oh, ow), data.dtype)
    return rel


def _adaptive_ref(kind: str, is_global: bool):
    """Bin i covers [floor(i*H/OH), ceil((i+1)*H/OH)), as TVM's adaptive pool."""
    def reference(inputs, attrs):
        data = inputs[0]
        x = _to_nchw(data, attrs.layout)
        h, w = x.shape[2:]
        oh, ow = (1, 1) if is_global else _adaptive_sizes(attrs, h, w)
        out = np.empty(x.shape[:2] + (oh, ow), dtype=np.float64 if kind == "avg" else x.dtype)
        for i in range(oh):
            r0, r1 = (i * h) // oh, math.ceil((i + 1) * h / oh)
            for j in range(ow):
                c0, c1 = (j * w) // ow, math.ceil((j + 1) * w / ow)
                win = x[:, :, r0:r1, c0:c1]
                out[:, :, i, j] = (win.max(axis=(2, 3)) if kind == "max"
                                   else win.astype(np.float64).mean(axis=(2, 3)))
        if kind == "avg" and x.dtype.kind in "iu":
            out = np.trunc(out)
        return _from_nchw(out.astype(data.dtype), attrs.layout)
    return reference


for _kind in ("max", "avg"):
    register(OpDef(name=f"nn.global_{_kind}_pool2d", num_inputs=1,
                   type_rel=_adaptive_rel(f"nn.global_{_kind}_pool2d", True),
                   # a reduction over H and W, as mean / max: elementwise producers fuse in
                   pattern=OpPattern.COMM_REDUCE, reference=_adaptive_ref(_kind, True),
                   attrs={"layout": "NCHW", "out_layout": ""},
                   attrs_type_key="relay.attrs.GlobalPool2DAttrs"))
    register(OpDef(name=f"nn.adaptive_{_kind}_pool2d", num_inputs=1,
                   type_rel=_adaptive_rel(f"nn.adaptive_{_kind}_pool2d", False),
                   pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
                   reference=_adaptive_ref(_kind, False),
                   attrs={"output_size": (), "layout": "NCHW", "out_layout": ""},
                   attrs_type_key="relay.attrs.AdaptivePool2DAttrs"))
    for _name in (f"nn.global_{_kind}_pool2d", f"nn.adaptive_{_kind}_pool2d"):
        get_def(_name).set_attr(BLOCKED_FORM, "layout")


def global_max_pool2d(data, layout="NCHW", out_layout=""):
    """relay.nn.global_max_pool2d: max over H and W."""
    return make_call("nn.global_max_pool2d", [data], layout=layout, out_layout=out_layout)


def global_avg_pool2d(data, layout="NCHW", out_layout=""):
    """relay.nn.global_avg_pool2d: mean over H and W."""
    return make_call("nn.global_avg_pool2d", [data], layout=layout, out_layout=out_layout)


def _output_size(output_size) -> tuple:
    if output_size is None:
        return ()
    if isinstance(output_size, (int, np.integer)):
        return (int(output_size),) * 2
    return tuple(output_size)


def adaptive_max_pool2d(data, output_size=None, layout="NCHW", out_layout=""):
    """relay.nn.adaptive_max_pool2d."""
    return make_call("nn.adaptive_max_pool2d", [data], output_size=_output_size(output_size),
                     layout=layout, out_layout=out_layout)


def adaptive_avg_pool2d(data, output_size=None, layout="NCHW", out_layout=""):
    """relay.nn.adaptive_avg_pool2d."""
    return make_call("nn.adaptive_avg_pool2d", [data], output_size=_output_size(output_size),
                     layout=layout, out_layout=out_layout)


# --- depth_to_space / space_to_depth (NCHW) ------------------------------------------------


def _subpixel_rel(op: str, to_depth: bool):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        if attrs.layout != "NCHW" or data.ndim != 4:
            raise fail(op, f"only 4-D NCHW data is supported, got layout={attrs.layout!r} "
                           f"shape {data.shape}")
        if attrs.mode not in ("DCR", "CRD"):
            raise fail(op, f"mode must be 'DCR' or 'CRD', got {attrs.mode!r}")
        b = attrs.block_size
        n, c, h, w = data.shape
        if to_depth:
            rule = "block_size must divide H and W"
            if b < 1 or not divides(op, h, b, rule) or not divides(op, w, b, rule):
                raise fail(op, f"H and W ({h}, {w}) must be divisible by block_size={b}")
            return TensorType((n, c * b * b, h // b, w // b), data.dtype)
        if b < 1 or not divides(op, c, b * b, "block_size^2 must divide the channels"):
            raise fail(op, f"channels {c} must be divisible by block_size^2={b * b}")
        return TensorType((n, c // (b * b), h * b, w * b), data.dtype)
    return rel


def _depth_to_space_ref(inputs, attrs):
    x, b = inputs[0], attrs.block_size
    n, c, h, w = x.shape
    if attrs.mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


def _space_to_depth_ref(inputs, attrs):
    x, b = inputs[0], attrs.block_size
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


for _name, _ref, _to_depth in (("nn.depth_to_space", _depth_to_space_ref, False),
                               ("nn.space_to_depth", _space_to_depth_ref, True)):
    register(OpDef(name=_name, num_inputs=1, type_rel=_subpixel_rel(_name, _to_depth),
                   pattern=OpPattern.INJECTIVE, reference=_ref,
                   attrs={"block_size": 1, "layout": "NCHW", "mode": "DCR"},
                   attrs_type_key="relay.attrs.SubPixelAttrs"))


def depth_to_space(data, block_size, layout="NCHW", mode="DCR"):
    """relay.nn.depth_to_space (DCR: depth-column-row order, CRD: column-row-depth)."""
    return make_call("nn.depth_to_space", [data], block_size=int(block_size), layout=layout,
                     mode=mode)


def space_to_depth(data, block_size, layout="NCHW"):
    """relay.nn.space_to_depth."""
    return make_call("nn.space_to_depth", [data], block_size=int(block_size), layout=layout)
