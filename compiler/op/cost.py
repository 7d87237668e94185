"""FLOP counts of the contraction ops (conv, dense, matmul), attached to their OpDefs.

The profiler divides a kernel's FLOPs by its time to report GFLOP/s. Every count is
2 * output elements * reduction length (one multiply and one add per term), the nominal figure
TVM and vendors quote: a Winograd convolution is credited with the direct algorithm's FLOPs.
Ops without a count are reported by the bytes they move instead.
"""
from __future__ import annotations

import math

from .registry import register_flops


def _contraction(out_type, reduction: int) -> int:
    return 2 * math.prod(out_type.shape) * int(reduction)


def _conv_flops(kernel_dims):
    """Conv FLOPs; `kernel_dims(weight_shape, attrs)` gives the spatial kernel extents."""
    def flops(arg_types, attrs, out_type):
        data, weight = arg_types[0], arg_types[1]
        layout = attrs.data_layout or "NCHW"
        channels = data.shape[layout.index("C")]
        kernel = attrs.kernel_size or kernel_dims(weight.shape, attrs)
        return _contraction(out_type, channels // attrs.groups * math.prod(kernel))
    return flops


def _oihw_kernel(shape, attrs):
    layout = attrs.kernel_layout or "OIHW"
    return [shape[layout.index(axis)] for axis in "HW"]


register_flops("nn.conv2d")(_conv_flops(_oihw_kernel))
register_flops("qnn.conv2d")(_conv_flops(_oihw_kernel))  # integer operations (OPs)
register_flops("nn.contrib_conv2d_packed")(_conv_flops(lambda shape, attrs: shape[3:5]))
register_flops("nn.contrib_conv2d_winograd_without_weight_transform")(
    _conv_flops(lambda shape, attrs: (3, 3)))


@register_flops("nn.dense")
@register_flops("nn.contrib_dense_pack")
@register_flops("qnn.dense")
def _dense_flops(arg_types, attrs, out_type):
    return _contraction(out_type, arg_types[0].shape[-1])


@register_flops("nn.matmul")
def _matmul_flops(arg_types, attrs, out_type):
    a = arg_types[0].shape
    return _contraction(out_type, a[0] if attrs.transpose_a else a[-1])


@register_flops("nn.batch_matmul")
@register_flops("qnn.batch_matmul")
def _batch_matmul_flops(arg_types, attrs, out_type):
    x = arg_types[0].shape
    return _contraction(out_type, x[1] if attrs.transpose_a else x[2])
