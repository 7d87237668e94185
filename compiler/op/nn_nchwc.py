"""nn.contrib_conv2d_NCHWc: conv2d on channel-blocked activations (TVM's op name and attributes),
produced by the ConvertBlockedLayout pass from nn.contrib_conv2d_packed.

    contrib_conv2d_NCHWc(data [N, C/x, H, W, x], Wp [1, ceil(K/KB), C, R, S, KB];
                         conv2d attrs, channels = K, data_layout = out_layout = "NCHW<x>c",
                         kernel_layout = "GOIHW<KB>o") -> [N, K/x, OH, OW, x]

Wp is nn.contrib_conv2d_weight_pack's packed weight (groups 1), so the blocked conv reads the
same panels as the NCHW one. x divides C and K, and KB is a multiple of x, so every output tile
is whole channel blocks (codegen.schedules.conv2d_nchwc, the strategy layer's
conv2d_nchwc.direct).
"""
from __future__ import annotations

import math

from compiler.ir.types import TensorType
from .blocked_layout import block_ref, channel_block_of, unblock_ref, unblocked_attrs
from .nn import _CONV2D_ATTRS
from .nn_packed import _conv_packed_ref, _conv_packed_rel
from .registry import OpDef, OpPattern, make_call, register, register_flops
from .type_relations import check_arity, dims_agree, fail, static_shape, tensor_arg
from .window import pad_tuple2d, pair

__all__ = ["contrib_conv2d_NCHWc"]

OP = "nn.contrib_conv2d_NCHWc"


def _block(attrs, data: TensorType) -> int:
    x = channel_block_of(attrs.data_layout)
    if x is None or attrs.out_layout not in ("", attrs.data_layout) or attrs.groups != 1:
        raise fail(OP, f"expected data_layout 'NCHW<x>c', out_layout the same and groups 1, "
                       f"got data_layout={attrs.data_layout!r}, out_layout="
                       f"{attrs.out_layout!r}, groups={attrs.groups}")
    if data.ndim != 5 or not dims_agree(OP, data.shape[4], x, f"data dim 4 must be {x}"):
        raise fail(OP, f"data must be [N, C/{x}, H, W, {x}] for {attrs.data_layout}, got "
                       f"{data.shape}")
    return x


def _rel(types, attrs):
    check_arity(OP, types, 2)
    data, wp = tensor_arg(OP, types, 0, "data"), tensor_arg(OP, types, 1, "weight")
    x = _block(attrs, data)
    static_shape(OP, wp, "the packed weight")
    n, cb, h, w, _ = data.shape
    k = attrs.channels
    if k is None or k % x or wp.ndim != 6 or wp.shape[5] % x or \
            not dims_agree(OP, wp.shape[2], cb * x, "the packed weight must fit the data's "
                                                    "channels") \
            or attrs.kernel_layout != f"GOIHW{wp.shape[5]}o":
        raise fail(OP, f"packed weight {wp.shape}, kernel_layout={attrs.kernel_layout!r} and "
                       f"channels={k} do not fit data {data.shape}: expected [1, ceil(K/KB), "
                       f"{cb * x}, R, S, KB] in 'GOIHW<KB>o' with KB and K multiples of {x}")
    out = _conv_packed_rel([TensorType((n, cb * x, h, w), data.dtype), wp], unblocked_attrs(attrs))
    n, k, oh, ow = out.shape
    return TensorType((n, k // x, oh, ow, x), out.dtype)


def _ref(inputs, attrs):
    data, wp = inputs
    out = _conv_packed_ref([unblock_ref(data), wp], unblocked_attrs(attrs))
    return block_ref(out, data.shape[4])


register(OpDef(name=OP, num_inputs=2, type_rel=_rel, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               reference=_ref, attrs=dict(_CONV2D_ATTRS, data_layout="NCHW16c",
                                          kernel_layout="GOIHW32o", out_layout="NCHW16c"),
               attrs_type_key="relay.attrs.Conv2DAttrs"))


@register_flops(OP)
def _flops(arg_types, attrs, out_type):
    data, wp = arg_types
    reduction = data.shape[1] * data.shape[4] * wp.shape[3] * wp.shape[4]
    return 2 * math.prod(out_type.shape) * reduction


def contrib_conv2d_NCHWc(data, packed_weight, channels, kernel_block,  # noqa: N802 - TVM
                         strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                         kernel_size=None, data_layout="NCHW16c", out_dtype=""):
    """conv2d over NCHW<x>c data with a weight packed by contrib_conv2d_weight_pack in blocks
    of kernel_block output channels; the output is in data_layout too."""
    return make_call(OP, [data, packed_weight], strides=pair(strides),
                     padding=pad_tuple2d(padding), dilation=pair(dilation), groups=1,
                     channels=int(channels), kernel_size=None if kernel_size is None
                     else pair(kernel_size), data_layout=data_layout,
                     kernel_layout=f"GOIHW{int(kernel_block)}o", out_layout=data_layout,
                     out_dtype=out_dtype)

