"""Strategies of the QNN contractions: int8 kernels through vpdpbusd where the target has
VNNI, vpmaddwd or plain widening multiplies where it has not (codegen.schedules.int8_config
decides from the target's features), and, for constant weights, the rewrite that puts them in
place (AlterOpLayout, the ops' FTVMAlterOpLayout).

Implementations (configuration type; weight layout):
- dense_int8.gemm   Int8Config (codegen.schedules.dense_int8): qnn.dense's weight packed into
                    panels of four-byte lanes (PackedInt8DenseWeight).
- conv2d_int8.direct  Int8Config (codegen.schedules.conv2d_int8): qnn.conv2d (NCHW, groups 1,
                    weight zero point 0) on a weight packed in output channel blocks
                    (PackedInt8ConvWeight), the data padded with its zero point.
- batch_matmul_int8.gemm  Int8Config (codegen.schedules.batch_matmul_int8): qnn.batch_matmul
                    of run-time operands, y packed and the zero points' terms computed in the
                    kernel (no rewrite).

The kernels compute raw sums of uint8 data times int8 weights. qnn.dense(x, w, zx, zw)
computes sum((x - zx)(w - zw)) = sum(x w) - zx sum_k w - zw sum_k x + K zx zw, so the rewrite
is

    nn.contrib_dense_int8(x, pack(w)) + zx * (K zw - sum_k w) [- zw * sum_k x]

with int8 data moved to uint8 first (x + 128, zx + 128) and uint8 weights to int8 (w - 128,
zw - 128): the centered values do not change. The column term is a constant (folded at
compile time) when zx is, else a vector of N computed per run; the row term is there only when
zw may be nonzero. qnn.conv2d pads its data with zx (the centered padding is then 0) and
subtracts zx * sum_{c,r,s} w. Every term is int32 arithmetic, wrapping as the reference's
cast of its exact sum to int32 does, so the results are equal bit for bit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from codegen.schedules.batch_matmul_int8 import batch_matmul_int8
from codegen.schedules.conv2d_config import conv_geometry
from codegen.schedules.conv2d_int8 import conv2d_int8
from codegen.schedules.dense_int8 import dense_int8
from codegen.schedules.int8_config import Int8Config, int8_lanes, resolve_int8
from compiler.ir.expr import Call, RelayExpr, const
from compiler.ir.types import TensorType
from .. import nn_int8
from ..interpreter import small_constant_value
from ..qnn_math import dtype_range
from ..reduce import sum as reduce_sum
from ..registry import get_def
from ..tensor import add, cast, multiply, subtract
from ..transform import reshape
from .alter import ALTER_LAYOUT, Packer
from .registry import CallInfo, OpStrategy, Workload, implementation, register_strategy, select

__all__ = ["PackedInt8DenseWeight", "PackedInt8ConvWeight"]

I32 = "int32"
OPERANDS = ("uint8", "int8")


@dataclass(frozen=True)
class PackedInt8DenseWeight:
    """An int8 [N, K] weight packed by nn.contrib_dense_int8_weight_pack in panels of
    `block` columns."""

    block: int


@dataclass(frozen=True)
class PackedInt8ConvWeight:
    """An int8 OIHW weight packed by nn.contrib_conv2d_int8_weight_pack in blocks of `block`
    output channels."""

    block: int


DENSE_INT8 = implementation(
    "dense_int8.gemm", Int8Config,
    lambda w, options, given: resolve_int8(options, given, columns=w["n"]),
    lambda w, c: PackedInt8DenseWeight(c.block()))


def _resolve_conv(w: Workload, options, given: Int8Config) -> Int8Config:
    k, c, r, s = w["kernel"]
    g = conv_geometry(w["data"], w["kernel"], w["strides"], w["padding"], w["dilation"], 1)
    return resolve_int8(options, given, conv=True, columns=k, pixels=g["oh"] * g["ow"],
                        channels=c)


CONV2D_INT8 = implementation("conv2d_int8.direct", Int8Config, _resolve_conv,
                             lambda w, c: PackedInt8ConvWeight(c.block()))


BATCH_MATMUL_INT8 = implementation(
    "batch_matmul_int8.gemm", Int8Config,
    lambda w, options, given: resolve_int8(options, given, columns=w["n"]))


def _int8_operands(call: CallInfo) -> bool:
    x, w = call.tensor(0), call.tensor(1)
    return x is not None and w is not None and x.dtype in OPERANDS and w.dtype in OPERANDS \
        and isinstance(call.out_type, TensorType) and call.out_type.dtype == I32


@register_strategy("qnn.dense")
def qnn_dense_strategy(call: CallInfo, options) -> OpStrategy | None:
    """qnn.dense of 8-bit operands into int32 with a constant weight: the packed int8 GEMM
    (after AlterOpLayout's rewrite); otherwise the generic int32 reduction."""
    if 1 not in call.constants or not _int8_operands(call) or call.tensor(1).ndim != 2:
        return None
    (n, k), x = call.tensor(1).shape, call.tensor(0)
    if n == 0 or k == 0 or x.ndim < 1:
        return None
    strategy = OpStrategy()
    strategy.add(DENSE_INT8, Workload.of("dense_int8", m=math.prod(x.shape[:-1]), n=n, k=k,
                                         weight="packed"), None)
    return strategy


@register_strategy("nn.contrib_dense_int8")
def dense_int8_strategy(call: CallInfo, options) -> OpStrategy | None:
    """The packed int8 dense: the workload AlterOpLayout chose the packing for, its panel
    width a fact."""
    x, wp = call.tensor(0), call.tensor(1)
    n, k = call.attrs.units, x.shape[-1]
    lanes = options.overrides(DENSE_INT8.name).get("lanes") or int8_lanes(options)
    strategy = OpStrategy()
    strategy.add(DENSE_INT8, Workload.of("dense_int8", m=math.prod(x.shape[:-1]), n=n, k=k,
                                         weight="packed"),
                 lambda ins, attrs, out, options, config: dense_int8(
                     ins[0], ins[1], attrs.units, options=options, config=config),
                 facts={"tile_vectors": wp.shape[2] // lanes})
    return strategy


def _conv_workload(data, kernel, attrs) -> Workload:
    return Workload.of("conv2d_int8", data=tuple(data), kernel=tuple(kernel),
                       strides=tuple(attrs.strides), padding=tuple(attrs.padding),
                       dilation=tuple(attrs.dilation), weight="packed")


@register_strategy("qnn.conv2d")
def qnn_conv2d_strategy(call: CallInfo, options) -> OpStrategy | None:
    """qnn.conv2d (NCHW, OIHW, groups 1) of 8-bit operands into int32 with a constant weight:
    the packed int8 direct conv (after AlterOpLayout's rewrite); otherwise the generic
    int32 reduction."""
    a = call.attrs
    if 1 not in call.constants or not _int8_operands(call) or a.groups != 1 \
            or (a.data_layout, a.kernel_layout) != ("NCHW", "OIHW") \
            or a.out_layout not in ("", "NCHW"):
        return None
    x, w = call.tensor(0), call.tensor(1)
    if x.ndim != 4 or w.ndim != 4 or 0 in w.shape:
        return None
    strategy = OpStrategy()
    strategy.add(CONV2D_INT8, _conv_workload(x.shape, w.shape, a), None)
    return strategy


@register_strategy("nn.contrib_conv2d_int8")
def conv2d_int8_strategy(call: CallInfo, options) -> OpStrategy | None:
    """The packed int8 conv: the workload AlterOpLayout chose the packing for, its channel
    block a fact."""
    a, x, wp = call.attrs, call.tensor(0), call.tensor(1)
    kernel = (a.channels, x.shape[1], wp.shape[2], wp.shape[3])
    lanes = options.overrides(CONV2D_INT8.name).get("lanes") or int8_lanes(options)
    strategy = OpStrategy()
    strategy.add(CONV2D_INT8, _conv_workload(x.shape, kernel, a),
                 lambda ins, attrs, out, options, config: conv2d_int8(
                     ins[0], ins[1], ins[2], tuple(attrs.strides), tuple(attrs.padding),
                     tuple(attrs.dilation), attrs.channels, options=options, config=config),
                 facts={"tile_vectors": wp.shape[4] // lanes})
    return strategy


@register_strategy("qnn.batch_matmul")
def qnn_batch_matmul_strategy(call: CallInfo, options) -> OpStrategy | None:
    """qnn.batch_matmul of 8-bit run-time operands into int32 (x not transposed): the int8
    GEMM tiles with y packed and the zero points' sums computed in the kernel."""
    a, x, y = call.attrs, call.tensor(0), call.tensor(1)
    if not _int8_operands(call) or a.transpose_a or x.ndim != 3 or y.ndim != 3 \
            or 0 in x.shape or 0 in y.shape:
        return None
    _, m, n = call.out_type.shape
    strategy = OpStrategy()
    strategy.add(BATCH_MATMUL_INT8, Workload.of(
        "batch_matmul_int8", a=tuple(x.shape), b=tuple(y.shape), n=n, data=x.dtype,
        weight=y.dtype, transpose_b=bool(a.transpose_b)),
        lambda ins, attrs, out, options, config: batch_matmul_int8(
            ins[0], ins[1], ins[2], ins[3], bool(attrs.transpose_b), options=options,
            config=config))
    return strategy


# ---- the rewrite ---------------------------------------------------------------------------

def _shift(value: RelayExpr, zero_point: RelayExpr, dtype: str, delta: int
           ) -> tuple[RelayExpr, RelayExpr]:
    """(value + delta as dtype, zero_point + delta): the same centered values."""
    shifted = cast(add(cast(value, I32), const(delta, I32)), dtype)
    known = small_constant_value(zero_point)
    moved = const((known.astype(np.int64) + delta).astype(np.int32), I32) \
        if known is not None else add(zero_point, const(delta, I32))
    return shifted, moved


def _scalar(zero_point: RelayExpr, ty: TensorType) -> RelayExpr:
    return reshape(zero_point, []) if len(ty.shape) else zero_point


def _dense_terms(raw: RelayExpr, x: RelayExpr, w: RelayExpr, zx: RelayExpr, zw: RelayExpr,
                 k: int) -> RelayExpr:
    """raw + zx * (K zw - sum_k w) - zw * sum_k x (the last term only if zw may be nonzero)."""
    colsum = reduce_sum(cast(w, I32), axis=[1])
    out = add(raw, multiply(zx, subtract(multiply(zw, const(k, I32)), colsum)))
    known = small_constant_value(zw)
    if known is not None and not known.any():
        return out
    rowsum = reduce_sum(cast(x, I32), axis=[-1], keepdims=True)
    return subtract(out, multiply(rowsum, zw))


def _operands(call: Call, old: Call, options, layout_type: type):
    """(layout, uint8 data, int8 weight, data zero point, weight zero point) of a call whose
    selected implementation packs its weight as layout_type, else None."""
    info = CallInfo(old.op.name, old.attrs, tuple(a.checked_type for a in old.args),
                    old.checked_type, frozenset({1}))
    choice = select(info, options)
    layout = choice.weight_layout() if choice is not None else None
    if not isinstance(layout, layout_type):
        return None
    x, w, zx, zw = call.args[:4]
    types = [a.checked_type for a in old.args]
    zx, zw = _scalar(zx, types[2]), zw if len(types[3].shape) != 1 or \
        types[3].shape[0] != 1 else reshape(zw, [])
    if types[0].dtype == "int8":
        x, zx = _shift(x, zx, "uint8", 128)
    if types[1].dtype == "uint8":
        w, zw = _shift(w, zw, "int8", -128)
    return layout, x, w, zx, zw


def _in_range(zero_point: RelayExpr, dtype: str) -> bool:
    """Whether a (typed) zero point's values surely lie in dtype's range."""
    lo, hi = dtype_range(dtype)
    known = small_constant_value(zero_point)
    if known is not None:
        return bool(((known >= lo) & (known <= hi)).all())
    source = zero_point.args[0] if type(zero_point) is Call and \
        getattr(zero_point.op, "name", "") == "cast" else None
    return source is not None and source.checked_type.dtype == dtype


def _alter_qnn_dense(call: Call, old: Call, pack: Packer, options) -> RelayExpr | None:
    found = _operands(call, old, options, PackedInt8DenseWeight)
    if found is None:
        return None
    layout, x, w, zx, zw = found
    n, k = old.args[1].checked_type.shape
    packed = pack(nn_int8.contrib_dense_int8_weight_pack, w, block=layout.block)
    raw = nn_int8.contrib_dense_int8(x, packed, units=n)
    return _dense_terms(raw, x, w, zx, zw, k)


def _alter_qnn_conv2d(call: Call, old: Call, pack: Packer, options) -> RelayExpr | None:
    """raw(x padded with zx) - zx * sum_{c,r,s} w: the padding's centered value is zero. The
    padding is zx's byte, so zx must lie in the data's type (a constant there, or a cast from
    a value of that type, as ONNX's zero points are); a weight zero point that may be nonzero
    keeps the generic conv too (its term would need the windows' sums of x)."""
    if not _in_range(old.args[2], old.args[0].checked_type.dtype):
        return None
    found = _operands(call, old, options, PackedInt8ConvWeight)
    if found is None:
        return None
    layout, x, w, zx, zw = found
    known = small_constant_value(zw)
    if known is None or known.any():
        return None
    a = call.attrs
    k, _, r, s = old.args[1].checked_type.shape
    packed = pack(nn_int8.contrib_conv2d_int8_weight_pack, w, block=layout.block)
    raw = nn_int8.contrib_conv2d_int8(x, packed, zx, channels=k, strides=a.strides,
                                      padding=a.padding, dilation=a.dilation,
                                      kernel_size=(r, s))
    colsum = reduce_sum(cast(w, I32), axis=[1, 2, 3])
    return subtract(raw, reshape(multiply(zx, colsum), [k, 1, 1]))


get_def("qnn.dense").set_attr(ALTER_LAYOUT, _alter_qnn_dense)
get_def("qnn.conv2d").set_attr(ALTER_LAYOUT, _alter_qnn_conv2d)
