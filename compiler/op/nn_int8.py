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
"""
from __future__ import annotations

import numpy as np

from codegen import te, tir
from compiler.ir.types import TensorType
from runtime.memory import aligned_empty
from .registry import OpDef, OpPattern, make_call, register, register_compute
from .type_relations import check_arity, fail, static_shape, tensor_arg

__all__ = ["contrib_dense_int8_weight_pack", "contrib_dense_int8", "pack_dense_int8_weight",
           "unpack_dense_int8_weight"]


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
