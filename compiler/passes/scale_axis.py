"""What ForwardFoldScaleAxis and BackwardFoldScaleAxis share: finding a per-channel scale and
building the squeeze / expand_dims / multiply expressions TVM's fold_scale_axis.cc builds.

A scale is per-channel when, right-aligned against the tensor it scales, it is 1 on every axis
but one (the channel axis). TVM squeezes a scale of rank > 1 to 1-D once, and expands the 1-D
scale so that it lines up with the channel axis of each tensor it multiplies (weight, bias):
`expand_dims(s, axis=1, num_newaxis=ndim - axis - 1)` when that count is positive.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Call, Constant, Function, Op, RelayExpr
from compiler.ir.traversal import children, post_order, rewrite_post_order
from compiler.ir.types import TensorType
from compiler.op.tensor import multiply
from compiler.op.transform import expand_dims, squeeze

# ops a scale passes through unchanged when it is positive (relu(s * x) == s * relu(x))
POSITIVE_HOMOGENEOUS = ("nn.relu",)


def op_name(node) -> str | None:
    return node.op.name if type(node) is Call and isinstance(node.op, Op) else None


def tensor_shape(node: RelayExpr) -> tuple | None:
    ty = node._checked_type
    return tuple(int(d) for d in ty.shape) if isinstance(ty, TensorType) else None


def channel_axis(scale_shape: tuple, out_shape: tuple) -> int | None:
    """The one axis of out_shape where the right-aligned scale is not 1 (it must be the
    channel count there and 1 elsewhere), or None."""
    if len(scale_shape) > len(out_shape):
        return None
    lead = len(out_shape) - len(scale_shape)
    axes = [lead + i for i, d in enumerate(scale_shape) if d != 1]
    if len(axes) != 1 or scale_shape[axes[0] - lead] != out_shape[axes[0]]:
        return None
    return axes[0]


def broadcasts_along(shape: tuple, out_shape: tuple, axis: int) -> bool:
    """shape right-aligned against out_shape is 1 except (possibly) on axis."""
    if len(shape) > len(out_shape):
        return False
    lead = len(out_shape) - len(shape)
    return all(d == 1 or (lead + i == axis and d == out_shape[axis])
               for i, d in enumerate(shape))


def scale_operand(mult: Call) -> tuple | None:
    """(index of the scaled value, channel axis) when one operand of a multiply is a
    per-channel scale of the other (which has the result's shape)."""
    out = tensor_shape(mult)
    if out is None:
        return None
    for i in (0, 1):
        value, scale = tensor_shape(mult.args[i]), tensor_shape(mult.args[1 - i])
        if value == out and scale is not None:
            axis = channel_axis(scale, out)
            if axis is not None:
                return i, axis
    return None


def is_all_positive_constant(expr: RelayExpr) -> bool:
    return type(expr) is Constant and bool(np.all(expr.data.numpy() > 0))


def squeeze_scale(scale: RelayExpr, scale_shape: tuple, out_rank: int, axis: int) -> RelayExpr:
    """The scale as a 1-D tensor along the channel (TVM squeezes the other axes)."""
    if len(scale_shape) <= 1:
        return scale
    keep = axis - (out_rank - len(scale_shape))
    return squeeze(scale, [i for i in range(len(scale_shape)) if i != keep])


def expand_to_axis(scale_1d: RelayExpr, ndim: int, axis: int) -> RelayExpr:
    """TVM's ExpandBiasToMatchAxis for one axis: trailing size-1 axes after the channel."""
    pad = ndim - axis - 1
    return expand_dims(scale_1d, 1, pad) if pad > 0 else scale_1d


def consumers(func: Function) -> dict:
    """node -> [(consumer, argument index)]; the function body gets (None, -1) (it escapes)."""
    uses: dict = {func.body: [(None, -1)]}
    for node in post_order(func.body):
        args = node.args if type(node) is Call else children(node)
        for i, child in enumerate(args):
            uses.setdefault(child, []).append((node, i))
    return uses


CONV_LAYOUTS = {"nn.conv2d": ("NCHW", "OIHW"), "nn.conv3d": ("NCDHW", "OIDHW")}


def rewrite_body(func: Function, rewrite) -> Function:
    """func with its body rebuilt bottom-up by rewrite(old, new) (rewrite_post_order)."""
    body = rewrite_post_order(func.body, rewrite)
    if body is func.body:
        return func
    return Function(func.params, body, func.ret_type, func.type_params, func.attrs, func.span)


def conv_kernel_axis(conv: Call, data_channel_axis: int, channel: str) -> int | None:
    """The kernel axis a channel scale of a conv's data ("I") or output ("O") lands on.

    Only full (groups=1) and depthwise convolutions fold, as in TVM; for a depthwise one the
    input channel is the output channel, so both scales land on the kernel's O axis."""
    data_canon, kernel_canon = CONV_LAYOUTS[op_name(conv)]
    attrs = conv.attrs
    kernel_layout = attrs.kernel_layout
    layout = (attrs.out_layout or attrs.data_layout) if channel == "O" else attrs.data_layout
    if sorted(layout) != sorted(data_canon) or sorted(kernel_layout) != sorted(kernel_canon) \
            or layout.index("C") != data_channel_axis:
        return None
    wshape = tensor_shape(conv.args[1])
    if wshape is None:
        return None
    o, i = wshape[kernel_layout.index("O")], wshape[kernel_layout.index("I")]
    depthwise = attrs.groups == o and i == 1
    if attrs.groups != 1 and not depthwise:
        return None
    return kernel_layout.index("O" if depthwise or channel == "O" else "I")


def scaled_weight(anchor: Call, weight: RelayExpr, scale_1d: RelayExpr, data_channel_axis: int,
                  channel: str) -> RelayExpr:
    """weight * scale laid along the anchor's kernel axis for channel "I" (forward) or "O"
    (backward); dense's weight is [units, in]."""
    if op_name(anchor) == "nn.dense":
        return multiply(weight, expand_to_axis(scale_1d, 2, 1 if channel == "I" else 0))
    axis = conv_kernel_axis(anchor, data_channel_axis, channel)
    return multiply(weight, expand_to_axis(scale_1d, len(anchor.attrs.kernel_layout), axis))
