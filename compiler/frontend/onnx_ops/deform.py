"""ONNX DeformConv: nn.deformable_conv2d, or nn.modulated_deformable_conv2d when a mask is
given; the optional bias becomes nn.bias_add.

ONNX's offset and mask layouts ([N, offset_group * KH * KW * 2 | 1, OH, OW], (dy, dx) pairs)
are TVM's, so the converter only maps attributes.
"""
from __future__ import annotations

from .common import NodeContext, converter, op


@converter("DeformConv", since=19)
def _deform_conv(ctx: NodeContext, inputs):
    x, w, offset = inputs[:3]
    bias = inputs[3] if len(inputs) > 3 else None
    mask = inputs[4] if len(inputs) > 4 else None
    shape, wshape = ctx.shape(x), ctx.shape(w)
    if len(shape) != 4:
        raise ctx.error(f"only 2-D DeformConv (4-D input) is supported, got input {shape}")
    kernel = list(ctx.attr("kernel_shape", wshape[2:]))
    if tuple(kernel) != tuple(wshape[2:]):
        raise ctx.error(f"kernel_shape {kernel} does not match the weight's {wshape[2:]}")
    pads = list(ctx.attr("pads", [0, 0, 0, 0]))
    attrs = dict(strides=tuple(ctx.attr("strides", [1, 1])), padding=tuple(pads),
                 dilation=tuple(ctx.attr("dilations", [1, 1])),
                 deformable_groups=int(ctx.attr("offset_group", 1)),
                 groups=int(ctx.attr("group", 1)), channels=int(wshape[0]),
                 kernel_size=tuple(kernel))
    if mask is None:
        out = op("nn.deformable_conv2d", x, offset, w, **attrs)
    else:
        out = op("nn.modulated_deformable_conv2d", x, offset, w, mask, **attrs)
    if bias is not None:
        out = op("nn.bias_add", out, bias, axis=1)
    return out
