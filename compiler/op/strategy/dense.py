"""Strategies of the GEMM family: dense (plain and packed weights), matmul, batch_matmul and
its axes variant.

Implementations (configuration type; weight layout):
- dense.gemm        GemmConfig (codegen.schedules.gemm: packed panels, register tiles); a
                    constant weight is packed into the configuration's panels
                    (PackedDenseWeight).
- dense.gemv        GemvConfig: a packed dense of at most GEMV_MAX_ROWS rows as
                    matrix-vector products over the same panels.
- matmul.gemm, batch_matmul.gemm, batch_matmul_axes.gemm   GemmConfig.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from codegen.schedules import batch_matmul, batch_matmul_axes, dense, dense_gemv, dense_packed
from codegen.schedules import matmul
from codegen.schedules.gemm_config import (GEMV_MAX_ROWS, GemmConfig, GemvConfig,
                                           dense_pack_geometry, gemm_pays, resolve_gemm,
                                           resolve_gemv)
from compiler.ir.types import TensorType
from ..nn_batch_matmul_axes import window
from .registry import CallInfo, OpStrategy, Workload, implementation, register_strategy

__all__ = ["PackedDenseWeight"]

F32 = "float32"


@dataclass(frozen=True)
class PackedDenseWeight:
    """A [N, K] weight packed by nn.contrib_dense_weight_pack into panels of `block` columns,
    K padded to k_padded (codegen.schedules.dense_pack_geometry)."""

    block: int
    k_padded: int


def _f32(*types) -> bool:
    return all(isinstance(t, TensorType) and t.dtype == F32 for t in types)


def _gemm_workload(kind: str, m: int, n: int, k: int, **fields) -> Workload:
    return Workload.of(kind, m=m, n=n, k=k, dtype=F32, **fields)


def _dense_layout(w: Workload, config) -> PackedDenseWeight | None:
    if w["weight"] != "packed":
        return None
    _, kp, nr = dense_pack_geometry(w["n"], w["k"], config)
    return PackedDenseWeight(nr, kp)


DENSE_GEMM = implementation(
    "dense.gemm", GemmConfig,
    lambda w, options, given: resolve_gemm(w["m"], w["n"], w["k"], True, options, given,
                                           wide=True), _dense_layout)
DENSE_GEMV = implementation(
    "dense.gemv", GemvConfig, lambda w, options, given: resolve_gemv(w["n"], options, given),
    _dense_layout)
MATMUL_GEMM = implementation(
    "matmul.gemm", GemmConfig,
    lambda w, options, given: resolve_gemm(w["m"], w["n"], w["k"], not w["transpose_a"],
                                           options, given, wide=True))
BATCH_MATMUL_GEMM = implementation(
    "batch_matmul.gemm", GemmConfig,
    lambda w, options, given: resolve_gemm(w["m"], w["n"], w["k"], not w["transpose_a"],
                                           options, given, wide=True))
BATCH_MATMUL_AXES_GEMM = implementation(
    "batch_matmul_axes.gemm", GemmConfig,
    lambda w, options, given: resolve_gemm(w["m"], w["n"], w["k"], w["a_axes"][-1] == "K",
                                           options, given, wide=True))


@register_strategy("nn.dense")
def dense_strategy(call: CallInfo, options) -> OpStrategy | None:
    """float32 dense: with a constant weight (packed at compile time: AlterOpLayout) the GEMV
    kernel for at most GEMV_MAX_ROWS rows, else the GEMM; with a plain weight the GEMM where
    it pays (gemm_pays), else the generic reduction."""
    a, x, w = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, w, call.out_type) or a.out_dtype not in ("", F32) or w.ndim != 2 \
            or x.ndim < 1:
        return None
    (n, k), m = w.shape, math.prod(x.shape[:-1])
    strategy = OpStrategy()
    if 1 in call.constants:
        if n == 0 or k == 0:
            return None
        workload = _gemm_workload("dense", m, n, k, weight="packed")
        strategy.add(DENSE_GEMV, workload, None, plevel=15 if m <= GEMV_MAX_ROWS else 5)
        strategy.add(DENSE_GEMM, workload, None, plevel=10)
    elif gemm_pays(m, n, k):
        strategy.add(DENSE_GEMM, _gemm_workload("dense", m, n, k, weight="plain"),
                     lambda ins, attrs, out, options, config: dense(
                         ins[0], ins[1], options=options, config=config))
    return strategy


@register_strategy("nn.contrib_dense_pack")
def dense_pack_strategy(call: CallInfo, options) -> OpStrategy | None:
    """The packed dense: the candidates (and workload) AlterOpLayout chose the packing with."""
    a, x, wp = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, wp, call.out_type):
        return None
    n, k, m = a.units, x.shape[-1], math.prod(x.shape[:-1])
    workload = _gemm_workload("dense", m, n, k, weight="packed")
    facts = {"tile_columns": wp.shape[2]}
    strategy = OpStrategy()
    strategy.add(DENSE_GEMV, workload, lambda ins, attrs, out, options, config: dense_gemv(
        ins[0], ins[1], attrs.units, options=options, config=config),
        plevel=15 if m <= GEMV_MAX_ROWS else 5, facts=facts)
    strategy.add(DENSE_GEMM, workload, lambda ins, attrs, out, options, config: dense_packed(
        ins[0], ins[1], attrs.units, options=options, config=config), plevel=10, facts=facts)
    return strategy


@register_strategy("nn.matmul")
def matmul_strategy(call: CallInfo, options) -> OpStrategy | None:
    a, x, y = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, y, call.out_type) or x.ndim != 2:
        return None
    m, n = call.out_type.shape
    k = x.shape[0] if a.transpose_a else x.shape[-1]
    if not gemm_pays(m, n, k):
        return None
    strategy = OpStrategy()
    strategy.add(MATMUL_GEMM, _gemm_workload("matmul", m, n, k,
                                             transpose_a=bool(a.transpose_a),
                                             transpose_b=bool(a.transpose_b)),
                 lambda ins, attrs, out, options, config: matmul(
                     ins[0], ins[1], bool(attrs.transpose_a), bool(attrs.transpose_b),
                     options=options, config=config))
    return strategy


@register_strategy("nn.batch_matmul")
def batch_matmul_strategy(call: CallInfo, options) -> OpStrategy | None:
    a, x, y = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, y, call.out_type):
        return None
    _, m, n = call.out_type.shape
    k = x.shape[1] if a.transpose_a else x.shape[2]
    if not gemm_pays(m, n, k):
        return None
    strategy = OpStrategy()
    strategy.add(BATCH_MATMUL_GEMM, _gemm_workload(
        "batch_matmul", m, n, k, a=tuple(x.shape), b=tuple(y.shape),
        transpose_a=bool(a.transpose_a), transpose_b=bool(a.transpose_b)),
        lambda ins, attrs, out, options, config: batch_matmul(
            ins[0], ins[1], bool(attrs.transpose_a), bool(attrs.transpose_b),
            options=options, config=config))
    return strategy


@register_strategy("nn.contrib_batch_matmul_axes")
def batch_matmul_axes_strategy(call: CallInfo, options) -> OpStrategy | None:
    a, x, y = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, y, call.out_type):
        return None
    a0, xs = window(x.shape, a.a_begin, a.a_shape, "tensor_a")
    b0, ys = window(y.shape, a.b_begin, a.b_shape, "tensor_b")
    ea, eb = dict(zip(a.a_axes, xs)), dict(zip(a.b_axes, ys))
    if not gemm_pays(ea["M"], eb["N"], ea["K"]):
        return None
    strategy = OpStrategy()
    strategy.add(BATCH_MATMUL_AXES_GEMM, _gemm_workload(
        "batch_matmul_axes", ea["M"], eb["N"], ea["K"], a=tuple(x.shape), b=tuple(y.shape),
        a_axes=a.a_axes, b_axes=a.b_axes, out_axes=a.out_axes,
        out_shape=tuple(call.out_type.shape), a_window=(a0, xs), b_window=(b0, ys)),
        lambda ins, attrs, out, options, config: batch_matmul_axes(
            ins[0], ins[1], attrs.a_axes, attrs.b_axes, attrs.out_axes, tuple(out.shape),
            (a0, xs), (b0, ys), options=options, config=config))
    return strategy
