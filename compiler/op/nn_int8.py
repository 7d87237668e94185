"""Packed int8 contractions: the ops the strategy layer's rewrite of qnn.dense / qnn.conv2d
with a constant weight produces (compiler.op.strategy.int8), and their weight packings.

They compute raw sums of uint8 data times int8 weights into int32, with no zero points: the
rewrite puts the zero points' terms (and a shift of int8 data to uint8, of uint8 weights to
int8) around them as ordinary Relay ops, which FoldConstant folds where they are constant.
The packed layout (codegen.schedules.int8_config) groups four consecutive K values of one
output column into a 32-bit lane, as `vpdpbusd` multiplies them.

- nn.contrib_dense_int8_weight_pack(w[N, K] int8; block) -> [ceil(N/block), ceil(K/4), block,
  4], Wp[j, g, v, q] = w[j*block + v, 4g + q], zero past N and K.
- nn.contrib_dense_int8(data[..., K] uint8, Wp; units = N) -> int32 [..., N], the sum over k
  of data * w (int32, wrapping as the kernels do).
- nn.contrib_conv2d_int8_weight_pack(w[K, C, R, S] int8; block) -> [ceil(K/block), ceil(C/4),
  R, S, block, 4], Wp[kb, g, r, s, v, q] = w[kb*block + v, 4g + q, r, s], zero past K and C.
- nn.contrib_conv2d_int8(data NCHW uint8, Wp, pad_value int32 scalar; conv2d's strides,
  padding, dilation, channels = K) -> int32 NCHW, data padded with pad_value (groups 1).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from codegen import te, tir
from compiler.ir.types import TensorType
from runtime.memory import aligned_empty
from .nn import _CONV2D_ATTRS, _conv2d_rel
from .registry import OpDef, OpPattern, make_call, register, register_compute
from .type_relations import check_arity, fail, static_shape, tensor_arg
from .window import conv_ref, pad_tuple2d, pair

__all__ = ["contrib_dense_int8_weight_pack", "contrib_dense_int8", "pack_dense_int8_weight",
           "unpack_dense_int8_weight", "contrib_conv2d_int8_weight_pack", "contrib_conv2d_int8",
           "pack_conv2d_int8_weight", "unpack_conv2d_int8_weight"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _dense_pack_rel(types, attrs):
    op = "nn.contrib_dense_int8_weight_pack"
    check_arity(op, types, 1)
    w = tensor_arg(op, types, 0, "weight")
    static_shape(op, w, "weight")
    if w.ndim != 2 or w.dtype != "int8" or attrs.block < 1:
        raise fail(op, f"expected an int8 [units, in] weight and block >= 1, got {w.dtype} "
                       f"{w.shape}, block={attrs.block}")
    n, k = w.shape
    return TensorType((_ceil_div(n, attrs.block), _ceil_div(k, 4), attrs.block, 4), "int8")


def _dense_pack_ref(inputs, attrs):
    return pack_dense_int8_weight(inputs[0], attrs.block)


def pack_dense_int8_weight(w: np.ndarray, blk: int) -> np.ndarray:
    """The packed layout of an int8 [N, K] weight (numpy; the reference and tests)."""
    n, k = w.shape
    nt, groups = _ceil_div(n, blk), _ceil_div(k, 4)
    padded = np.zeros((nt * blk, groups * 4), np.int8)
    padded[:n, :k] = w
    packed = aligned_empty((nt, groups, blk, 4), np.dtype(np.int8))
    np.copyto(packed, padded.reshape(nt, blk, groups, 4).transpose(0, 2, 1, 3))
    return packed


register(OpDef(name="nn.contrib_dense_int8_weight_pack", num_inputs=1,
               type_rel=_dense_pack_rel, pattern=OpPattern.INJECTIVE,
               reference=_dense_pack_ref, attrs={"block": 48},
               attrs_type_key="relay.attrs.DenseInt8WeightPackAttrs",
               exact_reference="values"))


def unpack_dense_int8_weight(wp: np.ndarray, units: int, k: int) -> np.ndarray:
    """The [units, K] weight a packed one was made from (numpy)."""
    nt, groups, blk, _ = wp.shape
    full = wp.transpose(0, 2, 1, 3).reshape(nt * blk, groups * 4)
    return np.ascontiguousarray(full[:units, :k])


def _dense_rel(types, attrs):
    op = "nn.contrib_dense_int8"
    check_arity(op, types, 2)
    data, wp = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    static_shape(op, wp, "the packed weight")
    n = attrs.units
    k = data.shape[-1] if data.ndim else 0
    if not isinstance(k, int):
        raise fail(op, f"the data's last dim (the reduction) must be static, got {data.shape}")
    if data.dtype != "uint8" or wp.dtype != "int8" or data.ndim < 1 or wp.ndim != 4 \
            or n is None or _ceil_div(n, wp.shape[2]) != wp.shape[0] or wp.shape[3] != 4 \
            or wp.shape[1] != _ceil_div(k, 4):
        raise fail(op, f"packed weight {wp.dtype} {wp.shape} does not fit {data.dtype} data "
                       f"{data.shape} and units={n} (expected uint8 data and an int8 weight "
                       f"[ceil(units/block), ceil(in/4), block, 4])")
    return TensorType(data.shape[:-1] + (n,), "int32")


def _dense_ref(inputs, attrs):
    data, wp = inputs
    w = unpack_dense_int8_weight(wp, attrs.units, data.shape[-1])
    return np.matmul(data.astype(np.int64), w.astype(np.int64).T).astype(np.int32)


register(OpDef(name="nn.contrib_dense_int8", num_inputs=2, type_rel=_dense_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_dense_ref,
               attrs={"units": None}, attrs_type_key="relay.attrs.DenseInt8Attrs"))


def contrib_dense_int8_weight_pack(weight, block=48):
    """Pack an int8 [units, in] weight into the int8 GEMM's panels."""
    return make_call("nn.contrib_dense_int8_weight_pack", [weight], block=int(block))


def contrib_dense_int8(data, packed_weight, units):
    """Raw int32 sums of uint8 data times the packed int8 weight (no zero points)."""
    return make_call("nn.contrib_dense_int8", [data, packed_weight], units=int(units))


def _dense_pack_compute(inputs, attrs, out_type):
    (w,) = inputs
    n, k = w.shape
    blk = attrs.block

    def f(j, g, v, q):
        nn_, kk = j * blk + v, g * 4 + q
        conds = []
        if out_type.shape[0] * blk != n:
            conds.append(tir.lt(nn_, n))
            nn_ = tir.min(nn_, tir.const(n - 1, "int64"))
        if k % 4:
            conds.append(tir.lt(kk, k))
            kk = tir.min(kk, tir.const(k - 1, "int64"))
        val = w[nn_, kk]
        return tir.if_then_else(tir.all(*conds), val, tir.const(0, "int8")) if conds else val
    return te.compute(out_type.shape, f, name="T_dense_int8_weight_pack")


register_compute("nn.contrib_dense_int8_weight_pack")(_dense_pack_compute)


# --- conv2d ---------------------------------------------------------------------------------


def _conv_pack_rel(types, attrs):
    op = "nn.contrib_conv2d_int8_weight_pack"
    check_arity(op, types, 1)
    w = tensor_arg(op, types, 0, "weight")
    static_shape(op, w, "weight")
    if w.ndim != 4 or w.dtype != "int8" or attrs.block < 1:
        raise fail(op, f"expected an int8 OIHW weight and block >= 1, got {w.dtype} {w.shape}, "
                       f"block={attrs.block}")
    k, c, r, s = w.shape
    return TensorType((_ceil_div(k, attrs.block), _ceil_div(c, 4), r, s, attrs.block, 4),
                      "int8")


def pack_conv2d_int8_weight(w: np.ndarray, blk: int) -> np.ndarray:
    """The packed layout of an int8 OIHW weight (numpy; the reference and tests):
    Wp[kb, g, r, s, v, q] = w[kb*blk + v, 4g + q, r, s], zero past K and C."""
    k, c, r, s = w.shape
    nkb, groups = _ceil_div(k, blk), _ceil_div(c, 4)
    padded = np.zeros((nkb * blk, groups * 4, r, s), np.int8)
    padded[:k, :c] = w
    packed = aligned_empty((nkb, groups, r, s, blk, 4), np.dtype(np.int8))
    np.copyto(packed, padded.reshape(nkb, blk, groups, 4, r, s).transpose(0, 2, 4, 5, 1, 3))
    return packed


def unpack_conv2d_int8_weight(wp: np.ndarray, channels: int, in_channels: int) -> np.ndarray:
    """The OIHW weight a packed one was made from (numpy)."""
    nkb, groups, r, s, blk, _ = wp.shape
    full = wp.transpose(0, 4, 1, 5, 2, 3).reshape(nkb * blk, groups * 4, r, s)
    return np.ascontiguousarray(full[:channels, :in_channels])


register(OpDef(name="nn.contrib_conv2d_int8_weight_pack", num_inputs=1,
               type_rel=_conv_pack_rel, pattern=OpPattern.INJECTIVE,
               reference=lambda inputs, attrs: pack_conv2d_int8_weight(inputs[0], attrs.block),
               attrs={"block": 64}, attrs_type_key="relay.attrs.Conv2DInt8WeightPackAttrs",
               exact_reference="values"))


def _conv_rel(types, attrs):
    op = "nn.contrib_conv2d_int8"
    check_arity(op, types, 3)
    data, wp = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    pad = tensor_arg(op, types, 2, "pad_value")
    static_shape(op, wp, "the packed weight")
    k = attrs.channels
    if data.ndim != 4 or not isinstance(data.shape[1], int):
        raise fail(op, f"expected NCHW data with a static channel count, got {data.shape}")
    if data.dtype != "uint8" or wp.dtype != "int8" or wp.ndim != 6 or k is None \
            or _ceil_div(k, wp.shape[4]) != wp.shape[0] or wp.shape[5] != 4 \
            or wp.shape[1] != _ceil_div(data.shape[1], 4) or pad.dtype != "int32" \
            or pad.ndim != 0:
        raise fail(op, f"packed weight {wp.dtype} {wp.shape} does not fit {data.dtype} data "
                       f"{data.shape}, channels={k} and pad value {pad} (expected uint8 NCHW "
                       f"data, an int8 weight [ceil(K/block), ceil(C/4), R, S, block, 4] and "
                       f"an int32 scalar)")
    weight = TensorType((k, data.shape[1], wp.shape[2], wp.shape[3]), "int8")
    out = _conv2d_rel([data, weight], _plain_conv_attrs(attrs))
    return TensorType(out.shape, "int32")


def _plain_conv_attrs(attrs) -> SimpleNamespace:
    return SimpleNamespace(**{**_CONV2D_ATTRS, "strides": attrs.strides,
                              "padding": attrs.padding, "dilation": attrs.dilation,
                              "channels": attrs.channels, "kernel_size": attrs.kernel_size,
                              "out_dtype": "int64"})


def _conv_ref(inputs, attrs):
    data, wp, pad = inputs
    pt, pl, pb, pr = attrs.padding
    padded = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)),
                    constant_values=int(pad))
    w = unpack_conv2d_int8_weight(wp, attrs.channels, data.shape[1])
    plain = _plain_conv_attrs(attrs)
    plain.padding = (0, 0, 0, 0)
    return conv_ref([padded, w], plain).astype(np.int32)


register(OpDef(name="nn.contrib_conv2d_int8", num_inputs=3, type_rel=_conv_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_conv_ref,
               attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1),
                      "channels": None, "kernel_size": None},
               attrs_type_key="relay.attrs.Conv2DInt8Attrs"))


def contrib_conv2d_int8_weight_pack(weight, block=64):
    """Pack an int8 OIHW weight into the int8 conv's channel blocks."""
    return make_call("nn.contrib_conv2d_int8_weight_pack", [weight], block=int(block))


def contrib_conv2d_int8(data, packed_weight, pad_value, channels, strides=(1, 1),
                        padding=(0, 0, 0, 0), dilation=(1, 1), kernel_size=None):
    """Raw int32 sums of uint8 NCHW data, padded with pad_value, times the packed int8 weight
    (groups 1, no zero points)."""
    return make_call("nn.contrib_conv2d_int8", [data, packed_weight, pad_value],
                     strides=pair(strides), padding=pad_tuple2d(padding),
                     dilation=pair(dilation), channels=int(channels),
                     kernel_size=None if kernel_size is None else pair(kernel_size))


def _conv_pack_compute(inputs, attrs, out_type):
    (w,) = inputs
    k, c = w.shape[:2]
    blk = attrs.block

    def f(kb, g, r, s, v, q):
        kk, cc = kb * blk + v, g * 4 + q
        conds = []
        if out_type.shape[0] * blk != k:
            conds.append(tir.lt(kk, k))
            kk = tir.min(kk, tir.const(k - 1, "int64"))
        if c % 4:
            conds.append(tir.lt(cc, c))
            cc = tir.min(cc, tir.const(c - 1, "int64"))
        val = w[kk, cc, r, s]
        return tir.if_then_else(tir.all(*conds), val, tir.const(0, "int8")) if conds else val
    return te.compute(out_type.shape, f, name="T_conv2d_int8_weight_pack")


register_compute("nn.contrib_conv2d_int8_weight_pack")(_conv_pack_compute)
