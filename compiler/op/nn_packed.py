"""Packed-weight variants of conv2d and dense (TVM's nn.contrib_conv2d_NCHWc / contrib_dense_pack
idea), produced by the AlterOpLayout pass for constant weights.

The packing ops reorder an OIHW / [N, K] weight into exactly the panels the micro-kernels read
(codegen.schedules.conv2d_pack_geometry / dense_pack_geometry, in the blocks the strategy
layer's configuration chose); applied to a constant, they are evaluated once by FoldConstant,
so the anchor kernels skip their run-time packing. The packed convs and dense run the
implementations compiler.op.strategy selects for them; the packing ops' compute rules are here.

- nn.contrib_conv2d_weight_pack(w[K, Cg, R, S]; groups, block) -> [G, ceil(Kg/block), Cg, R, S,
  block], Wp[g, kb, c, r, s, v] = w[g*Kg + kb*block + v, c, r, s], zero past Kg.
- nn.contrib_conv2d_packed(data NCHW, Wp; conv2d attrs, channels = K) -> NCHW.
- nn.contrib_dense_weight_pack(w[N, K]; block, k_padded) -> [ceil(N/block), k_padded, block],
  Bp[j, k, v] = w[j*block + v, k], zero past N and K.
- nn.contrib_dense_pack(data[..., K], Bp; units = N) -> [..., N].
"""
from __future__ import annotations

import numpy as np

from codegen import te, tir
from compiler.ir.expr import Constant
from compiler.ir.types import TensorType
from runtime.memory import aligned_empty
from .nn import _CONV2D_ATTRS, _conv2d_ref, _conv2d_rel, _dense_ref
from .registry import OpDef, OpPattern, make_call, register, register_compute
from .type_relations import check_arity, fail, holds, static_shape, tensor_arg
from .window import pad_tuple2d, pair

__all__ = ["contrib_conv2d_weight_pack", "contrib_conv2d_packed", "contrib_dense_weight_pack",
           "contrib_dense_pack", "unpack_conv2d_weight", "unpack_dense_weight"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- conv2d ---------------------------------------------------------------------------------


def _conv_pack_rel(types, attrs):
    op = "nn.contrib_conv2d_weight_pack"
    check_arity(op, types, 1)
    w = tensor_arg(op, types, 0, "weight")
    static_shape(op, w, "weight")
    g, blk = attrs.groups, attrs.block
    if w.ndim != 4 or g < 1 or w.shape[0] % g or blk < 1:
        raise fail(op, f"expected an OIHW weight with output channels divisible by groups={g} "
                       f"and block >= 1, got {w.shape}, block={blk}")
    k, cg, r, s = w.shape
    return TensorType((g, _ceil_div(k // g, blk), cg, r, s, blk), w.dtype)


def _conv_pack_ref(inputs, attrs):
    (w,) = inputs
    g, blk = attrs.groups, attrs.block
    k, cg, r, s = w.shape
    kg = k // g
    nkb = _ceil_div(kg, blk)
    # one pass straight into aligned storage (FoldConstant keeps it without another copy);
    # the padding channels of the last block stay zero
    packed = aligned_empty((g, nkb, cg, r, s, blk), w.dtype)
    blocks = packed.transpose(0, 1, 5, 2, 3, 4)  # (g, nkb, blk, cg, r, s), a view
    per_group = w.reshape(g, kg, cg, r, s)
    full = kg // blk
    np.copyto(blocks[:, :full], per_group[:, :full * blk].reshape(g, full, blk, cg, r, s))
    if full < nkb:
        blocks[:, full, :kg - full * blk] = per_group[:, full * blk:]
    return packed


register(OpDef(name="nn.contrib_conv2d_weight_pack", num_inputs=1, type_rel=_conv_pack_rel,
               pattern=OpPattern.INJECTIVE, reference=_conv_pack_ref,
               attrs={"groups": 1, "block": 16},
               attrs_type_key="relay.attrs.Conv2DWeightPackAttrs", exact_reference="values"))


def unpack_conv2d_weight(wp: np.ndarray, channels: int) -> np.ndarray:
    """The OIHW weight a packed one was made from (numpy; references and tests)."""
    g, nkb, cg, r, s, blk = wp.shape
    full = wp.transpose(0, 1, 5, 2, 3, 4).reshape(g, nkb * blk, cg, r, s)
    return np.ascontiguousarray(full[:, :channels // g].reshape(channels, cg, r, s))


def _conv_packed_rel(types, attrs):
    op = "nn.contrib_conv2d_packed"
    check_arity(op, types, 2)
    data, wp = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    k = attrs.channels
    static_shape(op, wp, "the packed weight")
    if wp.ndim != 6 or k is None or wp.shape[0] != attrs.groups or k % attrs.groups \
            or _ceil_div(k // attrs.groups, wp.shape[5]) != wp.shape[1]:
        raise fail(op, f"packed weight {wp.shape} does not fit channels={k}, "
                       f"groups={attrs.groups} (expected [G, ceil(K/G/block), Cg, R, S, block])")
    unpacked = TensorType((k,) + tuple(wp.shape[2:5]), wp.dtype)
    return _conv2d_rel([data, unpacked], attrs)


def _conv_packed_ref(inputs, attrs):
    data, wp = inputs
    return _conv2d_ref([data, unpack_conv2d_weight(wp, attrs.channels)], attrs)


register(OpDef(name="nn.contrib_conv2d_packed", num_inputs=2, type_rel=_conv_packed_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_conv_packed_ref,
               attrs=dict(_CONV2D_ATTRS), attrs_type_key="relay.attrs.Conv2DAttrs"))


def contrib_conv2d_weight_pack(weight, groups=1, block=16):
    """Pack an OIHW weight into the direct conv micro-kernel's panels."""
    return make_call("nn.contrib_conv2d_weight_pack", [weight], groups=int(groups),
                     block=int(block))


def contrib_conv2d_packed(data, packed_weight, channels, strides=(1, 1), padding=(0, 0, 0, 0),
                          dilation=(1, 1), groups=1, kernel_size=None, out_dtype=""):
    """conv2d (NCHW) whose weight was packed by contrib_conv2d_weight_pack."""
    return make_call("nn.contrib_conv2d_packed", [data, packed_weight], strides=pair(strides),
                     padding=pad_tuple2d(padding), dilation=pair(dilation), groups=int(groups),
                     channels=int(channels), kernel_size=None if kernel_size is None
                     else pair(kernel_size), out_dtype=out_dtype)


# --- dense ----------------------------------------------------------------------------------


def _dense_pack_rel(types, attrs):
    op = "nn.contrib_dense_weight_pack"
    check_arity(op, types, 1)
    w = tensor_arg(op, types, 0, "weight")
    static_shape(op, w, "weight")
    blk, kp = attrs.block, attrs.k_padded
    if w.ndim != 2 or blk < 1 or kp < w.shape[1]:
        raise fail(op, f"expected a [units, in] weight, block >= 1 and k_padded >= in, got "
                       f"{w.shape}, block={blk}, k_padded={kp}")
    return TensorType((_ceil_div(w.shape[0], blk), kp, blk), w.dtype)


def _dense_pack_ref(inputs, attrs):
    (w,) = inputs
    n, k = w.shape
    blk, kp = attrs.block, attrs.k_padded
    nt = _ceil_div(n, blk)
    packed = aligned_empty((nt, kp, blk), w.dtype)  # padding rows and columns stay zero
    blocks = packed.transpose(0, 2, 1)  # (nt, blk, kp), a view
    full = n // blk
    np.copyto(blocks[:full, :, :k], w[:full * blk].reshape(full, blk, k))
    if full < nt:
        blocks[full, :n - full * blk, :k] = w[full * blk:]
    return packed


register(OpDef(name="nn.contrib_dense_weight_pack", num_inputs=1, type_rel=_dense_pack_rel,
               pattern=OpPattern.INJECTIVE, reference=_dense_pack_ref,
               attrs={"block": 32, "k_padded": int(0)},
               attrs_type_key="relay.attrs.DenseWeightPackAttrs", exact_reference="values"))


def unpack_dense_weight(wp: np.ndarray, units: int, k: int) -> np.ndarray:
    """The [units, K] weight a packed one was made from (numpy)."""
    nt, kp, blk = wp.shape
    return np.ascontiguousarray(wp.transpose(0, 2, 1).reshape(nt * blk, kp)[:units, :k])


def _dense_packed_rel(types, attrs):
    op = "nn.contrib_dense_pack"
    check_arity(op, types, 2)
    data, wp = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    n = attrs.units
    static_shape(op, wp, "the packed weight")
    if data.ndim < 1 or wp.ndim != 3 or n is None or _ceil_div(n, wp.shape[2]) != wp.shape[0] \
            or not holds(op, "ge", wp.shape[1], data.shape[-1], "the packed weight must cover "
                                                                "the data's last dim"):
        raise fail(op, f"packed weight {wp.shape} does not fit data {data.shape} and "
                       f"units={n} (expected [ceil(units/block), k_padded >= in, block])")
    return TensorType(data.shape[:-1] + (n,), attrs.out_dtype or data.dtype)


def _dense_packed_ref(inputs, attrs):
    data, wp = inputs
    w = unpack_dense_weight(wp, attrs.units, data.shape[-1])
    return _dense_ref([data, w], attrs)


register(OpDef(name="nn.contrib_dense_pack", num_inputs=2, type_rel=_dense_packed_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_dense_packed_ref,
               attrs={"units": None, "out_dtype": ""}, attrs_type_key="relay.attrs.DenseAttrs"))


def contrib_dense_weight_pack(weight, block=32, k_padded=None):
    """Pack a [units, in] weight into the GEMM micro-kernel's B panels."""
    if k_padded is None:
        shape = weight.data.shape if isinstance(weight, Constant) else weight.checked_type.shape
        k_padded = shape[1]
    return make_call("nn.contrib_dense_weight_pack", [weight], block=int(block),
                     k_padded=int(k_padded))


def contrib_dense_pack(data, packed_weight, units, out_dtype=""):
    """dense whose weight was packed by contrib_dense_weight_pack."""
    return make_call("nn.contrib_dense_pack", [data, packed_weight], units=int(units),
                     out_dtype=out_dtype)


# --- compute rules of the packing ops -------------------------------------------------------


def _conv_pack_compute(inputs, attrs, out_type):
    (w,) = inputs
    k = w.shape[0]
    kg, blk = k // attrs.groups, attrs.block

    def f(g, kb, c, r, s, v):
        kk = kb * blk + v
        val = w[g * kg + kk, c, r, s] if kg % blk == 0 else w[
            g * kg + tir.min(kk, tir.const(kg - 1, "int64")), c, r, s]
        return val if kg % blk == 0 else tir.if_then_else(
            tir.lt(kk, kg), val, tir.const(0, w.dtype))
    return te.compute(out_type.shape, f, name="T_conv2d_weight_pack")


def _dense_pack_compute(inputs, attrs, out_type):
    (w,) = inputs
    n, k = w.shape
    blk = attrs.block

    def f(j, kk, v):
        nn_ = j * blk + v
        conds = []
        if out_type.shape[0] * blk != n:
            conds.append(tir.lt(nn_, n))
            nn_ = tir.min(nn_, tir.const(n - 1, "int64"))
        kx = kk
        if attrs.k_padded != k:
            conds.append(tir.lt(kk, k))
            kx = tir.min(kk, tir.const(k - 1, "int64"))
        val = w[nn_, kx]
        return tir.if_then_else(tir.all(*conds), val, tir.const(0, w.dtype)) if conds else val
    return te.compute(out_type.shape, f, name="T_dense_weight_pack")


register_compute("nn.contrib_conv2d_weight_pack")(_conv_pack_compute)
register_compute("nn.contrib_dense_weight_pack")(_dense_pack_compute)
