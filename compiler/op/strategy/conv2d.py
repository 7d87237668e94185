"""Strategies of the convolutions: conv2d in NCHW (plain, packed and Winograd-transformed
weights; other layouts and conv1d through views), channel-blocked conv2d and depthwise conv2d,
conv2d + max pool, conv2d_transpose.

Implementations (configuration type; weight layout):
- conv2d_nchw.direct    Conv2dConfig: the direct family (direct, rows, pointwise_rows, gemm
                        algorithms; codegen.schedules.conv2d); a constant weight is packed in
                        the configuration's channel blocks (PackedConvWeight).
- conv2d_nchw.winograd  WinogradConfig: F(m x m, 3 x 3) for 3x3 stride-1 convs of a constant
                        weight, transformed at compile time (WinogradWeight).
- conv2d_nchw.depthwise WindowConfig: one input channel a group, per channel plane.
- conv2d_nchwc.direct   Conv2dConfig (direct): NCHW<x>c activations, a packed weight.
- depthwise_conv2d_nchwc.window  BlockedWindowConfig.
- conv2d_max_pool.strips ConvPoolConfig.
- conv2d_transpose_nchw.gemm GemmConfig.
"""
from __future__ import annotations

from dataclasses import dataclass

from codegen.schedules import conv2d_nchw, conv2d_nchw_packed, conv2d_transpose_nchw
from codegen.schedules.conv2d_config import Conv2dConfig, conv_geometry, resolve_conv2d
from codegen.schedules.conv2d_nchwc import (conv2d_nchwc_packed, nchwc_applicable,
                                            nchwc_geometry, resolve_conv2d_nchwc)
from codegen.schedules.conv_pool import ConvPoolConfig, conv2d_max_pool_nchw, resolve_conv_pool
from codegen.schedules.gemm_config import GemmConfig, resolve_gemm
from codegen.schedules.window import WindowConfig, depthwise_conv2d_nchw, resolve_window
from codegen.schedules.window_nchwc import (BlockedWindowConfig, depthwise_conv2d_nchwc,
                                            resolve_blocked_window)
from codegen.schedules.winograd import (WinogradConfig, conv2d_winograd, resolve_winograd,
                                        winograd_tile_size)
from compiler.ir.types import TensorType
from ..compute.conv_layout import any_layout
from ..compute.nn import height1, height1_attrs, height1_shape
from ..conv_layout import canonical_attrs, is_canonical, out_layout, permutation, permute
from .registry import CallInfo, OpStrategy, Workload, implementation, register_strategy

__all__ = ["PackedConvWeight", "WinogradWeight", "conv_workload", "blocked_conv_supported"]

F32 = "float32"


@dataclass(frozen=True)
class PackedConvWeight:
    """An OIHW weight packed by nn.contrib_conv2d_weight_pack in blocks of `block` output
    channels (codegen.schedules.conv2d_pack_geometry)."""

    groups: int
    block: int


@dataclass(frozen=True)
class WinogradWeight:
    """A 3x3 weight transformed for F(tile_size x tile_size, 3 x 3)."""

    tile_size: int


def conv_workload(kind: str, data_shape, kernel_shape, attrs, weight: str, **extra
                  ) -> Workload:
    """The workload of an NCHW conv: data [N, C, H, W] (or blocked [N, C/x, H, W, x]), the
    logical OIHW kernel [K, Cg, R, S], strides, padding, dilation, groups and the weight's
    form ("plain", "packed", "winograd")."""
    return Workload.of(kind, data=tuple(data_shape), kernel=tuple(kernel_shape),
                       strides=tuple(attrs.strides), padding=tuple(attrs.padding),
                       dilation=tuple(attrs.dilation), groups=int(attrs.groups),
                       dtype=F32, weight=weight, **extra)


def _geometry(w: Workload) -> dict:
    return conv_geometry(w["data"], w["kernel"], w["strides"], w["padding"], w["dilation"],
                         w["groups"])


def _f32(*types) -> bool:
    return all(isinstance(t, TensorType) and t.dtype == F32 for t in types)


# ---- implementations ---------------------------------------------------------------------

def _resolve_direct(w: Workload, options, given: Conv2dConfig) -> Conv2dConfig:
    return resolve_conv2d(_geometry(w), w["weight"] == "packed", options, given)


CONV2D_DIRECT = implementation(
    "conv2d_nchw.direct", Conv2dConfig, _resolve_direct,
    lambda w, c: PackedConvWeight(w["groups"], c.channel_block)
    if w["weight"] == "packed" else None)


def _resolve_winograd(w: Workload, options, given: WinogradConfig) -> WinogradConfig:
    g = _geometry(w)
    return resolve_winograd(g["k"], g["c"], g["oh"], g["ow"], options, given)


CONV2D_WINOGRAD = implementation("conv2d_nchw.winograd", WinogradConfig, _resolve_winograd,
                                 lambda w, c: WinogradWeight(c.tile_size))
CONV2D_DEPTHWISE = implementation("conv2d_nchw.depthwise", WindowConfig,
                                  lambda w, options, given: resolve_window(given))


def _resolve_nchwc(w: Workload, options, given: Conv2dConfig) -> Conv2dConfig:
    k, c, r, s = w["kernel"]
    g = nchwc_geometry(w["data"], (1, 0, c, r, s, w["block"]), k, w["strides"], w["padding"],
                       w["dilation"])
    return resolve_conv2d_nchwc(g, w["block"], options, given)


CONV2D_NCHWC = implementation("conv2d_nchwc.direct", Conv2dConfig, _resolve_nchwc)
DEPTHWISE_NCHWC = implementation(
    "depthwise_conv2d_nchwc.window", BlockedWindowConfig,
    lambda w, options, given: resolve_blocked_window(w["kernel"][2] * w["kernel"][3], True,
                                                     options, given))
CONV2D_MAX_POOL = implementation("conv2d_max_pool.strips", ConvPoolConfig,
                                 lambda w, options, given: resolve_conv_pool(given))


def _resolve_transpose(w: Workload, options, given: GemmConfig) -> GemmConfig:
    n, c, h, wd = w["data"]
    _, o, kh, kw = w["kernel"]
    return resolve_gemm(o * kh * kw, h * wd, c, False, options, given)


CONV2D_TRANSPOSE = implementation("conv2d_transpose_nchw.gemm", GemmConfig, _resolve_transpose)


# ---- nn.conv2d ------------------------------------------------------------------------------

def _through(strategy: OpStrategy | None, wrap) -> OpStrategy | None:
    """strategy with each candidate's compute wrapped: wrap(rule) -> rule, a compute rule
    (inputs, attrs, out_type) around the candidate's own (options and config bound)."""
    if strategy is None:
        return None
    for cand in strategy.candidates:
        if cand.compute is not None:
            inner = cand.compute
            cand.compute = (lambda ins, attrs, out, options, config, inner=inner: wrap(
                lambda i, a, t: inner(i, a, t, options, config))(ins, attrs, out))
    return strategy


def _canonical_call(call: CallInfo, data: str, kernel: str) -> CallInfo | None:
    """The call in the canonical layouts (types and attrs transposed), for a call in another
    permutation of them; None when a type is unknown."""
    a = call.attrs
    x, w = call.tensor(0), call.tensor(1)
    if x is None or w is None or not isinstance(call.out_type, TensorType) \
            or x.ndim != len(data) or w.ndim != len(kernel):
        return None
    types = (TensorType(permute(x.shape, permutation(a.data_layout, data)), x.dtype),
             TensorType(permute(w.shape, permutation(a.kernel_layout, kernel)), w.dtype))
    out = TensorType(permute(call.out_type.shape, permutation(out_layout(a), data)),
                     call.out_type.dtype)
    return CallInfo(call.op, canonical_attrs(a, data, kernel), types, out, frozenset())


@register_strategy("nn.conv2d")
def conv2d_strategy(call: CallInfo, options) -> OpStrategy | None:
    """float32 conv2d: depthwise (Cg == 1) per plane; else the direct family, or with a
    constant 3x3 stride-1 weight Winograd where winograd_tile_size finds it pays (a constant
    weight is packed or transformed at compile time: AlterOpLayout)."""
    a = call.attrs
    x, w = call.tensor(0), call.tensor(1)
    if not _f32(x, w, call.out_type) or a.out_dtype not in ("", F32):
        return None
    if not is_canonical(a, "NCHW", "OIHW"):
        canon = _canonical_call(call, "NCHW", "OIHW")
        return None if canon is None else _through(conv2d_strategy(canon, options),
                                                   lambda rule: any_layout("NCHW", "OIHW", rule))
    if x.ndim != 4 or w.ndim != 4:
        return None
    k, cg, r, s = w.shape
    constant = 1 in call.constants
    strategy = OpStrategy()
    if cg == 1 and (a.groups > 1 or not constant):
        strategy.add(CONV2D_DEPTHWISE, conv_workload("conv2d_nchw", x.shape, w.shape, a,
                                                     "plain"), _depthwise_compute, plevel=30)
        return strategy
    if constant and (r, s) == (3, 3) and a.groups == 1 and tuple(a.strides) == (1, 1) \
            and tuple(a.dilation) == (1, 1):
        oh, ow = call.out_type.shape[2:]
        pays = winograd_tile_size(k, cg, oh, ow) is not None
        strategy.add(CONV2D_WINOGRAD, conv_workload("conv2d_nchw", x.shape, w.shape, a,
                                                    "winograd"), None, plevel=20 if pays else 5)
    strategy.add(CONV2D_DIRECT, conv_workload("conv2d_nchw", x.shape, w.shape, a,
                                              "packed" if constant else "plain"),
                 _direct_compute, plevel=10)
    return strategy


def _direct_compute(ins, attrs, out_type, options, config):
    return conv2d_nchw(ins[0], ins[1], tuple(attrs.strides), tuple(attrs.padding),
                       tuple(attrs.dilation), attrs.groups, options=options, config=config)


def _depthwise_compute(ins, attrs, out_type, options, config):
    return depthwise_conv2d_nchw(ins[0], ins[1], tuple(attrs.strides), tuple(attrs.padding),
                                 tuple(attrs.dilation), attrs.groups, options=options,
                                 config=config)


@register_strategy("nn.conv1d")
def conv1d_strategy(call: CallInfo, options) -> OpStrategy | None:
    """conv1d as conv2d over height-1 views (any permutation layout)."""
    a = call.attrs
    if not is_canonical(a, "NCW", "OIW"):
        canon = _canonical_call(call, "NCW", "OIW")
        return None if canon is None else _through(conv1d_strategy(canon, options),
                                                   lambda rule: any_layout("NCW", "OIW", rule))
    x, w = call.tensor(0), call.tensor(1)
    if x is None or w is None or x.ndim != 3 or w.ndim != 3 \
            or not isinstance(call.out_type, TensorType):
        return None
    call2d = CallInfo("nn.conv2d", height1_attrs(a, "OIHW"),
                      (TensorType(height1_shape(x.shape), x.dtype),
                       TensorType(height1_shape(w.shape), w.dtype)),
                      TensorType(height1_shape(call.out_type.shape), call.out_type.dtype))
    return _through(conv2d_strategy(call2d, options),
                    lambda rule: height1(rule, "conv1d", "OIHW"))


# ---- the rewritten convs ---------------------------------------------------------------

@register_strategy("nn.contrib_conv2d_packed")
def conv2d_packed_strategy(call: CallInfo, options) -> OpStrategy | None:
    """The direct family on the weight AlterOpLayout packed: the workload (hence the
    configuration, hence the block) is the one the pass chose the packing for."""
    a, x, wp = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, wp, call.out_type):
        return None
    kernel = (a.channels,) + tuple(wp.shape[2:5])
    strategy = OpStrategy()
    strategy.add(CONV2D_DIRECT, conv_workload("conv2d_nchw", x.shape, kernel, a, "packed"),
                 _packed_compute, facts={"channel_block": wp.shape[5]})
    return strategy


def _packed_compute(ins, attrs, out_type, options, config):
    return conv2d_nchw_packed(ins[0], ins[1], tuple(attrs.strides), tuple(attrs.padding),
                              tuple(attrs.dilation), attrs.groups, attrs.channels,
                              options=options, config=config)


@register_strategy("nn.contrib_conv2d_winograd_without_weight_transform")
def winograd_strategy(call: CallInfo, options) -> OpStrategy | None:
    """Winograd on the weight AlterOpLayout transformed (NCHW, or NCHW<x>c after
    ConvertBlockedLayout): the workload of the NCHW conv the pass chose it for."""
    a, x, u = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, u, call.out_type):
        return None
    data = x.shape if x.ndim == 4 else (x.shape[0], x.shape[1] * x.shape[4], *x.shape[2:4])
    strategy = OpStrategy()
    strategy.add(CONV2D_WINOGRAD, conv_workload(
        "conv2d_nchw", data, (u.shape[2], u.shape[3], 3, 3), a, "winograd",
        data_layout=a.data_layout), _winograd_compute, facts={"tile_size": u.shape[0] - 2})
    return strategy


def _winograd_compute(ins, attrs, out_type, options, config):
    return conv2d_winograd(ins[0], ins[1], tuple(out_type.shape), tuple(attrs.padding),
                           options=options, config=config)


@register_strategy("nn.contrib_conv2d_NCHWc")
def conv2d_nchwc_strategy(call: CallInfo, options) -> OpStrategy | None:
    a, x, wp = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, wp, call.out_type):
        return None
    strategy = OpStrategy()
    strategy.add(CONV2D_NCHWC, conv_workload(
        "conv2d_nchwc", x.shape, (a.channels, *wp.shape[2:5]), a, "packed",
        block=wp.shape[5]), _nchwc_compute, facts={"channel_block": wp.shape[5]})
    return strategy


def _nchwc_compute(ins, attrs, out_type, options, config):
    return conv2d_nchwc_packed(ins[0], ins[1], tuple(attrs.strides), tuple(attrs.padding),
                               tuple(attrs.dilation), attrs.channels, options=options,
                               config=config)


def blocked_conv_supported(channels: int, out_channels: int, groups: int, block: int,
                           x: int) -> bool:
    """Whether conv2d_nchwc.direct computes a conv of these (padded) channels over blocks of
    x, with a weight packed in blocks of `block` output channels (ConvertBlockedLayout asks)."""
    return nchwc_applicable(channels, out_channels, groups, block, x)


@register_strategy("nn.contrib_depthwise_conv2d_NCHWc")
def depthwise_nchwc_strategy(call: CallInfo, options) -> OpStrategy | None:
    a, x, wp = call.attrs, call.tensor(0), call.tensor(1)
    if x is None or wp is None or not x.dtype.startswith("float"):
        return None
    strategy = OpStrategy()
    strategy.add(DEPTHWISE_NCHWC, conv_workload(
        "depthwise_conv2d_nchwc", x.shape, (x.shape[1] * x.shape[4], 1, *wp.shape[2:4]), a,
        "packed"), _depthwise_nchwc_compute)
    return strategy


def _depthwise_nchwc_compute(ins, attrs, out_type, options, config):
    return depthwise_conv2d_nchwc(ins[0], ins[1], tuple(attrs.strides), tuple(attrs.padding),
                                  tuple(attrs.dilation), options=options, config=config)


@register_strategy("nn.contrib_conv2d_max_pool")
def conv2d_max_pool_strategy(call: CallInfo, options) -> OpStrategy | None:
    a, x, wp = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, wp, call.out_type):
        return None
    strategy = OpStrategy()
    strategy.add(CONV2D_MAX_POOL, conv_workload(
        "conv2d_max_pool", x.shape, (a.channels, *wp.shape[2:5]), a, "packed",
        pool_size=tuple(a.pool_size), pool_strides=tuple(a.pool_strides),
        pool_padding=tuple(a.pool_padding)), _conv_pool_compute)
    return strategy


def _conv_pool_compute(ins, attrs, out_type, options, config):
    return conv2d_max_pool_nchw(ins[0], ins[1], tuple(attrs.strides), tuple(attrs.padding),
                                tuple(attrs.dilation), attrs.channels, tuple(attrs.pool_size),
                                tuple(attrs.pool_strides), tuple(attrs.pool_padding),
                                options=options, config=config)


# ---- conv2d_transpose -----------------------------------------------------------------------

@register_strategy("nn.conv2d_transpose")
def conv2d_transpose_strategy(call: CallInfo, options) -> OpStrategy | None:
    """float32 groups-1 conv2d_transpose as one GEMM and a gather."""
    a, x, w = call.attrs, call.tensor(0), call.tensor(1)
    if not _f32(x, w, call.out_type) or a.groups != 1 or x.ndim != 4 or w.ndim != 4:
        return None
    strategy = OpStrategy()
    strategy.add(CONV2D_TRANSPOSE, conv_workload("conv2d_transpose_nchw", x.shape, w.shape, a,
                                                 "plain", out=tuple(call.out_type.shape)),
                 _transpose_compute)
    return strategy


def _transpose_compute(ins, attrs, out_type, options, config):
    return conv2d_transpose_nchw(ins[0], ins[1], tuple(out_type.shape), tuple(attrs.strides),
                                 tuple(attrs.padding), tuple(attrs.dilation), options=options,
                                 config=config)


@register_strategy("nn.conv1d_transpose")
def conv1d_transpose_strategy(call: CallInfo, options) -> OpStrategy | None:
    """conv1d_transpose as conv2d_transpose over height-1 views."""
    x, w = call.tensor(0), call.tensor(1)
    if x is None or w is None or x.ndim != 3 or w.ndim != 3 \
            or not isinstance(call.out_type, TensorType):
        return None
    call2d = CallInfo("nn.conv2d_transpose", height1_attrs(call.attrs, "IOHW"),
                      (TensorType(height1_shape(x.shape), x.dtype),
                       TensorType(height1_shape(w.shape), w.dtype)),
                      TensorType(height1_shape(call.out_type.shape), call.out_type.dtype))
    return _through(conv2d_transpose_strategy(call2d, options),
                    lambda rule: height1(rule, "conv1d_transpose", "IOHW"))
