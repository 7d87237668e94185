"""Strategies of pooling and of the row kernels (softmax, log_softmax, layer norm).

Implementations (configuration type):
- pool2d_nchw.window    WindowConfig: float NCHW max/avg pools per channel plane
                        (codegen.schedules.window).
- pool2d_nchwc.window   BlockedWindowConfig: float NCHW<x>c max/avg pools.
- global_pool2d_nchwc   BlockedWindowConfig: float NCHW<x>c global max/avg pools.
- softmax.rows, layer_norm.rows   RowsConfig: float32 rows along the last axis (float16 log
                        softmax and layer norm computed in float32 through them).
"""
from __future__ import annotations

from codegen.schedules.layer_norm import layer_norm_rows
from codegen.schedules.rows import RowsConfig, resolve_rows
from codegen.schedules.softmax import softmax_rows
from codegen.schedules.window import WindowConfig, pool2d_nchw, resolve_window
from codegen.schedules.window_nchwc import (BlockedWindowConfig, global_pool_nchwc,
                                            pool2d_nchwc, resolve_blocked_window)
from codegen.tir.dtype import is_float, is_integer
from ..blocked_layout import channel_block_of
from ..compute.common import in_float32, tensor_name
from ..compute.pool import blocked_finish, plane_finish
from .registry import CallInfo, OpStrategy, Workload, implementation, register_strategy

POOL_NCHW = implementation("pool2d_nchw.window", WindowConfig,
                           lambda w, options, given: resolve_window(given))
POOL_NCHWC = implementation("pool2d_nchwc.window", BlockedWindowConfig,
                            lambda w, options, given: resolve_blocked_window(0, False, options,
                                                                             given))
GLOBAL_POOL_NCHWC = implementation("global_pool2d_nchwc", BlockedWindowConfig,
                                   lambda w, options, given: resolve_blocked_window(
                                       0, False, options, given))
SOFTMAX_ROWS = implementation("softmax.rows", RowsConfig,
                              lambda w, options, given: resolve_rows(options, given))
LAYER_NORM_ROWS = implementation("layer_norm.rows", RowsConfig,
                                 lambda w, options, given: resolve_rows(options, given))


def _pool_workload(kind: str, call: CallInfo) -> Workload:
    a, x = call.attrs, call.tensor(0)
    return Workload.of(kind, data=tuple(x.shape), dtype=x.dtype, layout=a.layout,
                       out=tuple(call.out_type.shape),
                       **{k: a[k] if not isinstance(a[k], (list, tuple)) else tuple(a[k])
                          for k in ("pool_size", "strides", "dilation", "padding",
                                    "ceil_mode", "count_include_pad")
                          if k in a})


def _pool_strategy(kind: str):
    op = f"nn.{kind}_pool2d"

    def strategy_fn(call: CallInfo, options) -> OpStrategy | None:
        x = call.tensor(0)
        if x is None or not (is_float(x.dtype) or (kind == "max" and is_integer(x.dtype))):
            return None
        a = call.attrs
        if not is_float(x.dtype) and a.layout != "NCHW":
            return None  # integer max pools: the NCHW window schedule (uint8 activations)
        hi, wi = (1, 2) if a.layout == "NHWC" else (2, 3)
        out_hw = (call.out_type.shape[hi], call.out_type.shape[wi])
        strategy = OpStrategy()
        if a.layout == "NCHW":
            def compute(ins, attrs, out, options, config):
                return pool2d_nchw(ins[0], kind, attrs.pool_size, attrs.strides,
                                   attrs.dilation, attrs.padding, out_hw,
                                   plane_finish(kind, ins[0], attrs, out_hw), tensor_name(op),
                                   options=options, config=config)
            strategy.add(POOL_NCHW, _pool_workload(kind + "_pool2d", call), compute)
        elif channel_block_of(a.layout) is not None:
            def compute(ins, attrs, out, options, config):
                return pool2d_nchwc(ins[0], kind, attrs.pool_size, attrs.strides,
                                    attrs.dilation, attrs.padding, out_hw,
                                    blocked_finish(kind, ins[0], attrs), tensor_name(op),
                                    options=options, config=config)
            strategy.add(POOL_NCHWC, _pool_workload(kind + "_pool2d", call), compute)
        return strategy
    return strategy_fn


def _global_pool_strategy(kind: str):
    op = f"nn.global_{kind}_pool2d"

    def strategy_fn(call: CallInfo, options) -> OpStrategy | None:
        x = call.tensor(0)
        if x is None or not is_float(x.dtype) or channel_block_of(call.attrs.layout) is None:
            return None
        strategy = OpStrategy()
        strategy.add(GLOBAL_POOL_NCHWC, Workload.of(
            "global_" + kind + "_pool2d", data=tuple(x.shape), dtype=x.dtype,
            layout=call.attrs.layout),
            lambda ins, attrs, out, options, config: global_pool_nchwc(
                ins[0], kind, tensor_name(op), options=options, config=config))
        return strategy
    return strategy_fn


for _kind in ("max", "avg"):
    register_strategy(f"nn.{_kind}_pool2d")(_pool_strategy(_kind))
    register_strategy(f"nn.global_{_kind}_pool2d")(_global_pool_strategy(_kind))


def _rows_applicable(call: CallInfo, dtypes: tuple, nonempty) -> bool:
    x = call.tensor(0)
    return x is not None and x.ndim > 0 and x.dtype in dtypes \
        and call.attrs.axis % x.ndim == x.ndim - 1 \
        and nonempty(x.shape)


def _softmax_strategy(log: bool):
    # float16 softmax rounds each step to half, as its reference and ONNX's do (the generic
    # rule); log_softmax computes in float32 and rounds once (in_float32)
    dtypes = ("float32", "float16") if log else ("float32",)
    name = "T_log_softmax" if log else "T_softmax"

    def strategy_fn(call: CallInfo, options) -> OpStrategy | None:
        if not _rows_applicable(call, dtypes, lambda shape: shape[-1] > 0):
            return None
        x = call.tensor(0)
        strategy = OpStrategy()
        strategy.add(SOFTMAX_ROWS, Workload.of("softmax", data=tuple(x.shape), dtype=x.dtype,
                                               log=log),
                     lambda ins, attrs, out, options, config: in_float32(
                         lambda i, a, t: softmax_rows(i[0], log, name, options=options,
                                                      config=config))(
                             ins, attrs, out))
        return strategy
    return strategy_fn


register_strategy("nn.softmax")(_softmax_strategy(False))
register_strategy("nn.log_softmax")(_softmax_strategy(True))


@register_strategy("nn.layer_norm")
def layer_norm_strategy(call: CallInfo, options) -> OpStrategy | None:
    """Layer norm over the last axis of float32 (or, computed in float32, float16) rows."""
    if not _rows_applicable(call, ("float32", "float16"), lambda s: all(d > 0 for d in s)):
        return None
    x = call.tensor(0)

    def compute(ins, attrs, out, options, config):
        def rows(i, a, t):
            return layer_norm_rows(i[0], i[1] if a.scale else None,
                                   i[2] if a.center else None, a.epsilon, options=options,
                                   config=config)
        return in_float32(rows)(ins, attrs, out)

    strategy = OpStrategy()
    strategy.add(LAYER_NORM_ROWS, Workload.of("layer_norm", data=tuple(x.shape),
                                              dtype=x.dtype, scale=bool(call.attrs.scale),
                                              center=bool(call.attrs.center)), compute)
    return strategy
