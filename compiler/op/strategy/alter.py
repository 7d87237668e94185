"""The rewrites AlterOpLayout applies to calls with constant weights (TVM's FTVMAlterOpLayout,
registered on nn.conv2d and nn.dense): the strategy selects the implementation the call will
run with its weight constant, and the weight layout that implementation's configuration reads
decides the rewrite, so the packed weight and the schedule reading it come from one choice.

    PackedConvWeight(groups, block)  nn.conv2d -> nn.contrib_conv2d_packed(x,
                                         nn.contrib_conv2d_weight_pack(W, groups, block))
    WinogradWeight(m)                nn.conv2d -> nn.contrib_conv2d_winograd_without_weight_
                                         transform(x, nn.contrib_conv2d_winograd_weight_
                                         transform(W, m))
    PackedDenseWeight(block, Kp)     nn.dense  -> nn.contrib_dense_pack(x,
                                         nn.contrib_dense_weight_pack(W, block, Kp))
    None                             unchanged (depthwise convs read OIHW themselves)

The QNN contractions' rewrites into the int8 kernels (zero points as Relay terms around them)
are in int8.py.
"""
from __future__ import annotations

from typing import Callable

from codegen.options import CodegenOptions
from compiler.ir.expr import Call, RelayExpr
from compiler.ir.types import is_dynamic_type
from .. import nn_packed, nn_winograd
from ..registry import get_def
from .conv2d import PackedConvWeight, WinogradWeight
from .dense import PackedDenseWeight
from .registry import CallInfo, select

__all__ = ["ALTER_LAYOUT", "alter_layout"]

ALTER_LAYOUT = "FTVMAlterOpLayout"  # op attribute: fn(new call, old call, pack, options)

# pack(packing op, weight, **attrs) -> the packed weight node (shared per weight and attrs)
Packer = Callable[..., RelayExpr]


def _choice(old: Call, options: CodegenOptions):
    """The selection for the call with its weight (argument 1) constant."""
    info = CallInfo(old.op.name, old.attrs, tuple(a.checked_type for a in old.args),
                    old.checked_type, frozenset({1}))
    return select(info, options)


def _alter_conv2d(call: Call, old: Call, pack: Packer, options: CodegenOptions
                  ) -> RelayExpr | None:
    choice = _choice(old, options)
    layout = choice.weight_layout() if choice is not None else None
    a = call.attrs
    k = old.args[1].checked_type.shape[0]
    if isinstance(layout, WinogradWeight):
        u = pack(nn_winograd.contrib_conv2d_winograd_weight_transform, call.args[1],
                 tile_size=layout.tile_size)
        return nn_winograd.contrib_conv2d_winograd_without_weight_transform(
            call.args[0], u, tile_size=layout.tile_size, channels=k, padding=a.padding,
            kernel_size=a.kernel_size, out_dtype=a.out_dtype)
    if isinstance(layout, PackedConvWeight):
        packed = pack(nn_packed.contrib_conv2d_weight_pack, call.args[1],
                      groups=layout.groups, block=layout.block)
        return nn_packed.contrib_conv2d_packed(call.args[0], packed, channels=k,
                                               strides=a.strides, padding=a.padding,
                                               dilation=a.dilation, groups=a.groups,
                                               kernel_size=a.kernel_size,
                                               out_dtype=a.out_dtype)
    return None


def _alter_dense(call: Call, old: Call, pack: Packer, options: CodegenOptions
                 ) -> RelayExpr | None:
    choice = _choice(old, options)
    layout = choice.weight_layout() if choice is not None else None
    if not isinstance(layout, PackedDenseWeight):
        return None
    packed = pack(nn_packed.contrib_dense_weight_pack, call.args[1], block=layout.block,
                  k_padded=layout.k_padded)
    return nn_packed.contrib_dense_pack(call.args[0], packed,
                                        units=old.args[1].checked_type.shape[0],
                                        out_dtype=call.attrs.out_dtype)


get_def("nn.conv2d").set_attr(ALTER_LAYOUT, _alter_conv2d)
get_def("nn.dense").set_attr(ALTER_LAYOUT, _alter_dense)


def alter_layout(call: Call, old: Call, pack: Packer, options: CodegenOptions
                 ) -> RelayExpr | None:
    """The call rewritten for its constant weight (argument 1), or None (the op has no
    layout to alter, or its chosen implementation reads the weight as it is)."""
    fn = get_def(call.op.name).get_attr(ALTER_LAYOUT)
    if fn is None or any(is_dynamic_type(t) for t in (old.checked_type,
                                                      *(a.checked_type for a in old.args))):
        return None  # a dynamic (Any) shape: the implementation is chosen per concrete shape
    return fn(call, old, pack, options)
