"""Strategies of the QNN contractions with constant weights: int8 kernels through vpdpbusd
where the target has VNNI, widening multiplies where it has not (codegen.schedules.
int8_config decides from the target's features), and the rewrite that puts them in place
(AlterOpLayout, the ops' FTVMAlterOpLayout).

Implementations (configuration type; weight layout):
- dense_int8.gemm   Int8Config (codegen.schedules.dense_int8): qnn.dense's weight packed into
                    panels of four-byte lanes (PackedInt8DenseWeight).

The kernels compute raw sums of uint8 data times int8 weights. qnn.dense(x, w, zx, zw)
computes sum((x - zx)(w - zw)) = sum(x w) - zx sum_k w - zw sum_k x + K zx zw, so the rewrite
is

    nn.contrib_dense_int8(x, pack(w)) + zx * (K zw - sum_k w) [- zw * sum_k x]

with int8 data moved to uint8 first (x + 128, zx + 128) and uint8 weights to int8 (w - 128,
zw - 128): the centered values do not change. The column term is a constant (folded at
compile time) when zx is, else a vector of N computed per run; the row term is there only when
zw may be nonzero. Every term is int32 arithmetic, wrapping as the reference's cast of its
exact sum to int32 does, so the results are equal bit for bit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from codegen.schedules.dense_int8 import dense_int8
from codegen.schedules.int8_config import Int8Config, int8_lanes, resolve_int8
from compiler.ir.expr import Call, Constant, RelayExpr, Var, const
from compiler.ir.traversal import children
from compiler.ir.types import TensorType
from .. import nn_int8
from ..interpreter import evaluate
from ..reduce import sum as reduce_sum
from ..registry import get_def
from ..tensor import add, cast, multiply, subtract
from ..transform import reshape
from .alter import ALTER_LAYOUT, Packer
from .registry import CallInfo, OpStrategy, Workload, implementation, register_strategy, select

__all__ = ["PackedInt8DenseWeight"]

I32 = "int32"
OPERANDS = ("uint8", "int8")
SMALL_EXPRESSION = 16  # nodes of a zero point's expression the rewrite evaluates


@dataclass(frozen=True)
class PackedInt8DenseWeight:
    """An int8 [N, K] weight packed by nn.contrib_dense_int8_weight_pack in panels of
    `block` columns."""

    block: int


DENSE_INT8 = implementation(
    "dense_int8.gemm", Int8Config,
    lambda w, options, given: resolve_int8(options, given, columns=w["n"]),
    lambda w, c: PackedInt8DenseWeight(c.block()))


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


# ---- the rewrite ---------------------------------------------------------------------------

def _constant_value(expr: RelayExpr) -> np.ndarray | None:
    """The value of a small closed expression (a zero point: a constant, maybe cast or
    reshaped), else None."""
    if isinstance(expr, Constant):
        return expr.data.numpy()
    stack, seen = [expr], 0
    while stack:  # closed and small: no variable within SMALL_EXPRESSION nodes
        node = stack.pop()
        seen += 1
        if seen > SMALL_EXPRESSION or isinstance(node, Var):
            return None
        stack.extend(children(node))
    value = evaluate(expr)
    return value if isinstance(value, np.ndarray) else None


def _shift(value: RelayExpr, zero_point: RelayExpr, dtype: str, delta: int
           ) -> tuple[RelayExpr, RelayExpr]:
    """(value + delta as dtype, zero_point + delta): the same centered values."""
    shifted = cast(add(cast(value, I32), const(delta, I32)), dtype)
    known = _constant_value(zero_point)
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
    known = _constant_value(zw)
    if known is not None and not known.any():
        return out
    rowsum = reduce_sum(cast(x, I32), axis=[-1], keepdims=True)
    return subtract(out, multiply(rowsum, zw))


def _alter_qnn_dense(call: Call, old: Call, pack: Packer, options) -> RelayExpr | None:
    info = CallInfo(old.op.name, old.attrs, tuple(a.checked_type for a in old.args),
                    old.checked_type, frozenset({1}))
    choice = select(info, options)
    layout = choice.weight_layout() if choice is not None else None
    if not isinstance(layout, PackedInt8DenseWeight):
        return None
    x, w, zx, zw = call.args[:4]
    types = [a.checked_type for a in old.args]
    zx, zw = _scalar(zx, types[2]), zw if len(types[3].shape) != 1 or \
        types[3].shape[0] != 1 else reshape(zw, [])
    if types[0].dtype == "int8":
        x, zx = _shift(x, zx, "uint8", 128)
    if types[1].dtype == "uint8":
        w, zw = _shift(w, zw, "int8", -128)
    n, k = types[1].shape
    packed = pack(nn_int8.contrib_dense_int8_weight_pack, w, block=layout.block)
    raw = nn_int8.contrib_dense_int8(x, packed, units=n)
    return _dense_terms(raw, x, w, zx, zw, k)


get_def("qnn.dense").set_attr(ALTER_LAYOUT, _alter_qnn_dense)
