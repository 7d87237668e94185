"""nn.contrib_depthwise_conv2d_NCHWc: depthwise conv2d (channel multiplier 1) on channel-blocked
activations, TVM's op name and attributes.

    contrib_depthwise_conv2d_NCHWc(data [N, C/x, H, W, x], weight [C/x, 1, R, S, 1, x];
        conv2d attrs, groups = channels = C, data_layout = out_layout = "NCHW<x>c",
        kernel_layout = "OIHW1i<x>o") -> [N, C/x, OH, OW, x]

The weight is the depthwise OIHW weight [C, 1, R, S] laid out by depthwise_weight_pack (a
layout_transform OIHW -> OIHW1i<x>o, which FoldConstant computes at compile time when the
weight is a constant): weight[cb, 0, r, s, 0, v] = w[cb*x + v, 0, r, s], so a tap's weights
for a channel block are one vector. Schedule: codegen.schedules.window_nchwc (the strategy
layer's depthwise_conv2d_nchwc.window).
"""
from __future__ import annotations

import math

import numpy as np

from compiler.ir.types import TensorType
from .blocked_layout import block_ref, channel_block_of, unblock_ref, unblocked_attrs
from .nn import _CONV2D_ATTRS
from .registry import OpDef, OpPattern, make_call, register, register_flops
from .transform_layout import layout_transform
from .type_relations import (check_arity, dims_agree, fail, known, shapes_agree, static_shape,
                             tensor_arg)
from .window import conv_ref, conv_rel, pad_tuple2d, pair

__all__ = ["contrib_depthwise_conv2d_NCHWc", "depthwise_weight_pack", "depthwise_kernel_layout",
           "depthwise_blockable", "blocked_depthwise"]

OP = "nn.contrib_depthwise_conv2d_NCHWc"
_nchw_rel = conv_rel(OP, "NCHW", "OIHW")


def depthwise_kernel_layout(x: int) -> str:
    """The packed weight's layout for blocks of x channels: "OIHW1i<x>o"."""
    return f"OIHW1i{x}o"


def depthwise_weight_pack(weight, x: int):
    """[C, 1, R, S] (OIHW) -> [C/x, 1, R, S, 1, x]: a layout_transform, folded at compile time
    for a constant weight."""
    return layout_transform(weight, "OIHW", depthwise_kernel_layout(x))


def _unpack_ref(wp: np.ndarray) -> np.ndarray:
    """[C/x, 1, R, S, 1, x] -> [C, 1, R, S] (numpy)."""
    cb, _, r, s, _, x = wp.shape
    return np.ascontiguousarray(wp.transpose(0, 5, 1, 2, 3, 4).reshape(cb * x, 1, r, s))


def _rel(types, attrs):
    check_arity(OP, types, 2)
    data, wp = tensor_arg(OP, types, 0, "data"), tensor_arg(OP, types, 1, "weight")
    x = channel_block_of(attrs.data_layout)
    if x is None or attrs.out_layout not in ("", attrs.data_layout) \
            or attrs.kernel_layout != depthwise_kernel_layout(x):
        raise fail(OP, f"expected data_layout 'NCHW<x>c', out_layout '' or the same and "
                       f"kernel_layout 'OIHW1i<x>o', got data_layout={attrs.data_layout!r}, "
                       f"out_layout={attrs.out_layout!r}, kernel_layout={attrs.kernel_layout!r}")
    if data.ndim != 5 or not dims_agree(OP, data.shape[4], x, f"data dim 4 must be {x}"):
        raise fail(OP, f"data must be [N, C/{x}, H, W, {x}] for {attrs.data_layout}, got "
                       f"{data.shape}")
    static_shape(OP, wp, "weight")
    n, _, h, w, _ = data.shape
    cb = known(data.shape[1], wp.shape[0]) if wp.ndim == 6 else data.shape[1]
    c = cb * x
    if wp.ndim != 6 or not shapes_agree(OP, (wp.shape[0], wp.shape[1], wp.shape[4], wp.shape[5]),
                                        (data.shape[1], 1, 1, x), "the weight must fit the "
                                                                  "data's channel blocks"):
        raise fail(OP, f"weight must be [{cb}, 1, R, S, 1, {x}] ({attrs.kernel_layout}) for "
                       f"data {data.shape}, got {wp.shape}")
    if attrs.groups != c or attrs.out_dtype not in ("", data.dtype):
        raise fail(OP, f"groups={attrs.groups} and out_dtype={attrs.out_dtype!r}: expected "
                       f"groups = channels = {c} (channel multiplier 1) and the data's dtype")
    out = _nchw_rel([TensorType((n, c, h, w), data.dtype),
                     TensorType((c, 1, wp.shape[2], wp.shape[3]), wp.dtype)],
                    unblocked_attrs(attrs))
    return TensorType((n, cb, out.shape[2], out.shape[3], x), out.dtype)


def _ref(inputs, attrs):
    data, wp = inputs
    out = conv_ref([unblock_ref(data), _unpack_ref(wp)], unblocked_attrs(attrs))
    return block_ref(out, data.shape[4])


register(OpDef(name=OP, num_inputs=2, type_rel=_rel, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               reference=_ref, attrs=dict(_CONV2D_ATTRS, data_layout="NCHW16c",
                                          kernel_layout="OIHW1i16o", out_layout="NCHW16c"),
               attrs_type_key="relay.attrs.Conv2DAttrs"))


@register_flops(OP)
def _flops(arg_types, attrs, out_type):
    wp = arg_types[1]
    return 2 * math.prod(out_type.shape) * wp.shape[2] * wp.shape[3]


def contrib_depthwise_conv2d_NCHWc(data, weight, strides=(1, 1), padding=(0, 0),  # noqa: N802
                                   dilation=(1, 1), groups=1, channels=None, kernel_size=None,
                                   data_layout="NCHW16c", kernel_layout="OIHW1i16o",
                                   out_layout="", out_dtype=""):
    """relay.nn.contrib_depthwise_conv2d_nchwc: data in data_layout (NCHW<x>c), weight packed
    by depthwise_weight_pack; groups = channels = C."""
    return make_call(OP, [data, weight], strides=pair(strides), padding=pad_tuple2d(padding),
                     dilation=pair(dilation), groups=int(groups),
                     channels=None if channels is None else int(channels),
                     kernel_size=None if kernel_size is None else pair(kernel_size),
                     data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


def depthwise_blockable(attrs, data_type, weight_type, x: int) -> bool:
    """Whether an nn.conv2d (its attrs and argument types) is a depthwise conv this op computes
    in NCHW<x>c: NCHW / OIHW float32, groups = C = K (channel multiplier 1), C whole blocks."""
    if not isinstance(data_type, TensorType) or not isinstance(weight_type, TensorType) \
            or data_type.ndim != 4 or weight_type.ndim != 4 or data_type.dtype != "float32":
        return False
    c = data_type.shape[1]
    return attrs.data_layout == "NCHW" and attrs.kernel_layout == "OIHW" \
        and attrs.out_layout in ("", "NCHW") and attrs.out_dtype in ("", "float32") \
        and attrs.groups == c and c % x == 0 and weight_type.shape[:2] == (c, 1)


def blocked_depthwise(attrs, blocked_data, weight, x: int):
    """The depthwise_blockable nn.conv2d with these attrs over blocked_data (already
    NCHW<x>c) and its OIHW weight: contrib_depthwise_conv2d_NCHWc, the weight packed by
    depthwise_weight_pack (ConvertBlockedLayout's rewrite of a depthwise conv)."""
    return contrib_depthwise_conv2d_NCHWc(
        blocked_data, depthwise_weight_pack(weight, x), strides=attrs.strides,
        padding=attrs.padding, dilation=attrs.dilation, groups=attrs.groups,
        channels=attrs.channels, kernel_size=attrs.kernel_size, data_layout=f"NCHW{x}c",
        kernel_layout=depthwise_kernel_layout(x), out_dtype=attrs.out_dtype)

