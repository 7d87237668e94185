"""Winograd conv2d ops (TVM's nn.contrib_conv2d_winograd_weight_transform and
nn.contrib_conv2d_winograd_without_weight_transform), produced by AlterOpLayout for constant
3x3, stride-1 float32 convolutions where the strategy layer chooses conv2d_nchw.winograd
(codegen.schedules.winograd has the algorithm and the tile choice, winograd_tile_size).

- nn.contrib_conv2d_winograd_weight_transform(w[K, C, 3, 3]; tile_size m) -> U[a, a, K, C]
  with a = m + 2, U[:, :, k, c] = G w[k, c] G^T; FoldConstant evaluates it at compile time.
- nn.contrib_conv2d_winograd_without_weight_transform(data NCHW, U; conv2d attrs, tile_size,
  channels = K) -> NCHW, the convolution of data with the weight U was made from.
"""
from __future__ import annotations

import numpy as np

from codegen.schedules.winograd import (
    MATRICES, TILE_SIZES, transform_weight, weight_transform, winograd_tile_size,
)
from compiler.ir.types import TensorType
from .nn import _CONV2D_ATTRS, _conv2d_ref, _conv2d_rel
from .blocked_layout import (BLOCKED_FORM, block_ref, channel_block_of, unblock_ref,
                             unblocked_attrs)
from .registry import OpDef, OpPattern, get_def, make_call, register, register_compute
from .type_relations import check_arity, dims_agree, fail, static_shape, tensor_arg
from .window import pad_tuple2d, pair

__all__ = ["contrib_conv2d_winograd_weight_transform",
           "contrib_conv2d_winograd_without_weight_transform", "winograd_tile_size"]

def _transform_rel(types, attrs):
    op = "nn.contrib_conv2d_winograd_weight_transform"
    check_arity(op, types, 1)
    w = tensor_arg(op, types, 0, "weight")
    static_shape(op, w, "weight")
    m = attrs.tile_size
    if w.ndim != 4 or tuple(w.shape[2:]) != (3, 3) or m not in TILE_SIZES:
        raise fail(op, f"expected an OIHW 3x3 weight and tile_size in {TILE_SIZES}, got "
                       f"{w.shape}, tile_size={m}")
    k, c = w.shape[:2]
    return TensorType((m + 2, m + 2, k, c), w.dtype)


def _transform_ref(inputs, attrs):
    return transform_weight(inputs[0], attrs.tile_size)


register(OpDef(name="nn.contrib_conv2d_winograd_weight_transform", num_inputs=1,
               type_rel=_transform_rel, pattern=OpPattern.OPAQUE, reference=_transform_ref,
               attrs={"tile_size": 4},
               attrs_type_key="relay.attrs.ConvWinogradWeightTransformAttrs"))


def untransform_weight(u: np.ndarray, m: int) -> np.ndarray:
    """The 3x3 weight U was made from (least squares through G, exact for a transform)."""
    g_inv = np.linalg.pinv(np.array(MATRICES[m][0], dtype=np.float64))
    return np.einsum("ax,xykc,by->kcab", g_inv, u.astype(np.float64), g_inv).astype(u.dtype)


def _conv_rel(types, attrs):
    op = "nn.contrib_conv2d_winograd_without_weight_transform"
    check_arity(op, types, 2)
    data, u = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    static_shape(op, u, "the transformed weight")
    m = attrs.tile_size
    if u.ndim != 4 or m not in TILE_SIZES or tuple(u.shape[:2]) != (m + 2, m + 2) \
            or attrs.channels != u.shape[2] or tuple(attrs.strides) != (1, 1) \
            or tuple(attrs.dilation) != (1, 1) or attrs.groups != 1:
        raise fail(op, f"transformed weight {u.shape} does not fit tile_size={m}, "
                       f"channels={attrs.channels}, strides={attrs.strides}, dilation="
                       f"{attrs.dilation}, groups={attrs.groups} (expected [m+2, m+2, K, C], "
                       "stride 1, dilation 1, groups 1)")
    k, c = u.shape[2:]
    x = channel_block_of(attrs.data_layout)
    if x is None:
        return _conv2d_rel([data, TensorType((k, c, 3, 3), u.dtype)], attrs)
    # NCHW<x>c (ConvertBlockedLayout): the NCHW conv's type, blocked
    if data.ndim != 5 or not dims_agree(op, data.shape[4], x, f"data dim 4 must be {x}") \
            or attrs.out_layout not in ("", attrs.data_layout):
        raise fail(op, f"data {data.shape} in {attrs.data_layout!r} (out_layout "
                       f"{attrs.out_layout!r}): expected [N, C/{x}, H, W, {x}] and out_layout "
                       f"the same")
    n, cb, h, w, _ = data.shape
    out = _conv2d_rel([TensorType((n, cb * x, h, w), data.dtype),
                       TensorType((k, c, 3, 3), u.dtype)], unblocked_attrs(attrs))
    if out.shape[1] % x:
        raise fail(op, f"{k} output channels are not whole blocks of {x}")
    return TensorType((n, k // x, *out.shape[2:], x), out.dtype)


def _conv_ref(inputs, attrs):
    data, u = inputs
    x = channel_block_of(attrs.data_layout)
    if x is not None:
        return block_ref(_conv2d_ref([unblock_ref(data), untransform_weight(u, attrs.tile_size)],
                                     unblocked_attrs(attrs)), x)
    return _conv2d_ref([data, untransform_weight(u, attrs.tile_size)], attrs)


register(OpDef(name="nn.contrib_conv2d_winograd_without_weight_transform", num_inputs=2,
               type_rel=_conv_rel, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_conv_ref,
               attrs={**_CONV2D_ATTRS, "tile_size": 4},
               attrs_type_key="relay.attrs.Conv2DWinogradAttrs"))
get_def("nn.contrib_conv2d_winograd_without_weight_transform").set_attr(BLOCKED_FORM,
                                                                        "data_layout")


def contrib_conv2d_winograd_weight_transform(weight, tile_size=4):
    """U = G w G^T per (K, C) of a 3x3 OIHW weight."""
    return make_call("nn.contrib_conv2d_winograd_weight_transform", [weight],
                     tile_size=int(tile_size))


def contrib_conv2d_winograd_without_weight_transform(data, weight, tile_size, channels,
                                                     padding=(0, 0, 0, 0), kernel_size=None,
                                                     out_dtype="", data_layout="NCHW"):
    """3x3 stride-1 conv2d (NCHW, or NCHW<x>c in and out) whose weight was transformed by the
    op above."""
    return make_call("nn.contrib_conv2d_winograd_without_weight_transform", [data, weight],
                     strides=(1, 1), padding=pad_tuple2d(padding), dilation=(1, 1), groups=1,
                     channels=int(channels), kernel_size=None if kernel_size is None
                     else pair(kernel_size), out_dtype=out_dtype, tile_size=int(tile_size),
                     data_layout=data_layout,
                     out_layout="" if data_layout == "NCHW" else data_layout)


# --- compute rule of the weight transform (the conv runs the strategy's conv2d_nchw.winograd) ---


def _transform_compute(inputs, attrs, out_type):
    return weight_transform(inputs[0], attrs.tile_size)


register_compute("nn.contrib_conv2d_winograd_weight_transform")(_transform_compute)
