"""AlterOpLayout: give conv2d / dense with constant weights a pre-packed weight (TVM's pass idea).

The anchor schedules (codegen.schedules) reorder the weight into the panels their micro-kernel
reads. With a constant weight that work belongs at compile time, so this pass rewrites

    nn.conv2d(x, W)  ->  nn.contrib_conv2d_packed(x, nn.contrib_conv2d_weight_pack(W))
    nn.dense(x, W)   ->  nn.contrib_dense_pack(x, nn.contrib_dense_weight_pack(W))

and 3x3 stride-1 convs that pay for it (nn_winograd.winograd_tile_size) to Winograd:

    nn.conv2d(x, W)  ->  nn.contrib_conv2d_winograd_without_weight_transform(
                             x, nn.contrib_conv2d_winograd_weight_transform(W))

when W is constant-foldable (built from constants only: no variables, no stateful ops), the
op is float32 and in the layouts the schedules take (NCHW / OIHW). FoldConstant, which runs
next in relay.build, evaluates the packing op once; the kernel then skips its run-time pack.
Depthwise convs (Cg == 1, groups > 1) keep nn.conv2d: their schedule reads OIHW directly.

Algorithm: one bottom-up rewrite (rewrite_post_order, explicit stack); while walking, each
visited node records whether it is constant-foldable from its children's records, so the test
is O(1) per node. Types come from the original (type-checked) nodes; InferType is required.
The block sizes come from the host's micro-kernel vector width (codegen.schedules), fixed in
the packing op's attributes, so the packed type does not depend on the machine later.
"""
from __future__ import annotations

from typing import Callable

from codegen.schedules import conv2d_pack_geometry, dense_pack_geometry
from compiler.analysis.constant import is_constant_foldable
from compiler.ir.expr import Call, Function, Op, RelayExpr, TupleGetItem
from compiler.ir.traversal import rewrite_post_order
from compiler.ir.types import TensorType
from compiler.op import nn_packed, nn_winograd
from compiler.op.nn_winograd import winograd_tile_size
from compiler.transform import function_pass, register_pass

__all__ = ["AlterOpLayout", "PackConstantWeights", "alter_op_layout"]

F32 = "float32"


def _f32(ty) -> bool:
    return isinstance(ty, TensorType) and ty.dtype == F32


# pack(packing op, weight, **attrs): the packed weight, one node per distinct (op, weight,
# attrs), so a weight shared by many calls (an unrolled recurrence's R) is packed and stored once
Packer = Callable[..., RelayExpr]


def _conv2d(call: Call, old: Call, pack: Packer) -> RelayExpr | None:
    a = call.attrs
    data_t, w_t = old.args[0].checked_type, old.args[1].checked_type
    if not (_f32(data_t) and _f32(w_t)) or a.out_dtype not in ("", F32) \
            or a.data_layout != "NCHW" or a.kernel_layout != "OIHW" \
            or a.out_layout not in ("", "NCHW") or len(w_t.shape) != 4:
        return None
    k, cg, r, s = w_t.shape
    if cg == 1 and a.groups > 1:  # depthwise-like: the schedule's own loop reads OIHW
        return None
    out_h, out_w = old.checked_type.shape[2:]
    m = winograd_tile_size(k, cg, out_h, out_w) if (r, s) == (3, 3) and a.groups == 1 \
        and tuple(a.strides) == (1, 1) and tuple(a.dilation) == (1, 1) else None
    if m is not None:
        u = pack(nn_winograd.contrib_conv2d_winograd_weight_transform, call.args[1],
                 tile_size=m)
        return nn_winograd.contrib_conv2d_winograd_without_weight_transform(
            call.args[0], u, tile_size=m, channels=k, padding=a.padding,
            kernel_size=a.kernel_size, out_dtype=a.out_dtype)
    block = conv2d_pack_geometry(k, cg, r, s, a.groups)[-1]
    packed = pack(nn_packed.contrib_conv2d_weight_pack, call.args[1], groups=a.groups,
                  block=block)
    return nn_packed.contrib_conv2d_packed(call.args[0], packed, channels=k, strides=a.strides,
                                           padding=a.padding, dilation=a.dilation,
                                           groups=a.groups, kernel_size=a.kernel_size,
                                           out_dtype=a.out_dtype)


def _dense(call: Call, old: Call, pack: Packer) -> RelayExpr | None:
    data_t, w_t = old.args[0].checked_type, old.args[1].checked_type
    if not (_f32(data_t) and _f32(w_t)) or call.attrs.out_dtype not in ("", F32) \
            or len(w_t.shape) != 2 or len(data_t.shape) < 1:
        return None
    n, k = w_t.shape
    if n == 0 or k == 0:
        return None
    _, kp, nr = dense_pack_geometry(n, k)
    packed = pack(nn_packed.contrib_dense_weight_pack, call.args[1], block=nr, k_padded=kp)
    return nn_packed.contrib_dense_pack(call.args[0], packed, units=n,
                                        out_dtype=call.attrs.out_dtype)


_RULES = {"nn.conv2d": _conv2d, "nn.dense": _dense}


def alter_op_layout(expr: RelayExpr) -> RelayExpr:
    """Rewrite conv2d/dense with constant-foldable weights to their packed-weight variants."""
    foldable: dict = {}  # old node -> built from constants only
    packed: dict = {}  # (packing op, weight node, attrs) -> packed weight node
    # Equal constant-foldable subexpressions become one node (an unrolled recurrence slices
    # its R anew at every step), so a shared weight is packed and folded once, not per step.
    shared: dict = {}

    def pack(make, weight: RelayExpr, **attrs) -> RelayExpr:
        key = (make, weight, tuple(sorted(attrs.items())))
        if key not in packed:
            packed[key] = make(weight, **attrs)
        return packed[key]

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        foldable[old] = is_constant_foldable(old, foldable)
        if foldable[old] and type(new) in (Call, TupleGetItem):
            key = (new.op, new.attrs, tuple(new.args)) if type(new) is Call \
                else (new.tuple_value, new.index)
            try:
                new = shared.setdefault(key, new)
            except TypeError:  # attributes that cannot be hashed: keep the node
                pass
        if type(new) is Call and isinstance(new.op, Op) and new.op.name in _RULES \
                and len(new.args) == 2 and foldable.get(old.args[1], False):
            out = _RULES[new.op.name](new, old, pack)
            if out is not None:
                return out
        return new

    return rewrite_post_order(expr, rewrite)


@register_pass
def AlterOpLayout():  # noqa: N802  (TVM's pass name)
    """Pre-pack constant conv2d/dense weights into the micro-kernels' layout (opt_level 3)."""

    @function_pass(opt_level=3, name="AlterOpLayout", required=["InferType"])
    def alter_op_layout_pass(func: Function, mod, ctx) -> Function:
        return alter_op_layout(func)  # FunctionPass already skips Primitive functions

    return alter_op_layout_pass


@register_pass
def PackConstantWeights():  # noqa: N802
    """relay.build's weight packing at opt_level 2 (TVM's default level).

    Packing constant weights is what the schedules need to be fast, not an optional layout
    optimisation, so the build does it wherever FoldConstant runs (opt_level >= 2) and not
    only at AlterOpLayout's level 3. Disabling AlterOpLayout disables this too, and at
    opt_level 3 it finds nothing left to pack.
    """

    @function_pass(opt_level=2, name="PackConstantWeights", required=["InferType"])
    def pack_constant_weights_pass(func: Function, mod, ctx) -> Function:
        if "AlterOpLayout" in ctx.disabled_pass:
            return func
        return alter_op_layout(func)

    return pack_constant_weights_pass

