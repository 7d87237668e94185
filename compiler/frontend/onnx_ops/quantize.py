"""QuantizeLinear, DequantizeLinear (ONNX's and com.microsoft's) and DynamicQuantizeLinear as
QNN ops (relay.qnn.op.quantize / dequantize), which relay.build's FakeQuantizationToInteger
turns QDQ patterns around float ops into integer ops with.

Scales become float32 and zero points int32, per tensor, along the axis, or (blocked
quantization) repeated block_size times along it to the data's rank. Parameters known at
import are checked (a zero or non-finite scale, a zero point outside its type) and the error
names the node. The small floats (float8, float4) quantize by a cast, as ONNX's reference:
x / scale saturated to the format (float8's zero point is not added; float4's is).
"""
from __future__ import annotations

import numpy as np

from codegen.tir.dtype import SMALL_FLOATS
from compiler.op import qnn
from compiler.op.qnn_math import QUANT_RANGES

from .common import NodeContext, cast, const, converter, norm_axis, onnx_dtype, op, reshape
from .elementwise import cast_to

MS_DOMAIN = "com.microsoft"


def check_quantized_type(ctx: NodeContext, dtype: str, what: str) -> None:
    if dtype not in QUANT_RANGES and dtype not in SMALL_FLOATS:
        raise ctx.error(f"{what} has type {dtype}; only {sorted(QUANT_RANGES)} and "
                        f"{sorted(SMALL_FLOATS)} are supported")


def _check_static(ctx: NodeContext, param, what: str, dtype: str | None) -> None:
    """A parameter the file fixes: a scale must be finite and non-zero, a zero point inside
    the range of the quantized type."""
    value = ctx.maybe_value(param)
    if value is None:
        return
    flat = value.reshape(-1)
    if dtype is None:  # a scale
        bad = ~np.isfinite(flat.astype(np.float64)) | (flat == 0)
        if bad.any():
            raise ctx.error(f"{what} must be finite and non-zero, got {flat[bad][:4].tolist()} "
                            f"(at flat index {int(np.argmax(bad))})")
    elif dtype in QUANT_RANGES:
        lo, hi = QUANT_RANGES[dtype]
        wide = flat.astype(np.int64)
        bad = (wide < lo) | (wide > hi)
        if bad.any():
            raise ctx.error(f"{what} {wide[bad][:4].tolist()} is outside the range "
                            f"[{lo}, {hi}] of {dtype}")


def qparam(ctx: NodeContext, param, x_shape: tuple, axis: int, block_size: int, what: str,
           dtype: str):
    """A scale (dtype float32) or zero point (int32) in the shape the QNN ops take: a scalar,
    a vector along axis, or (blocked) a tensor of x's rank."""
    shape = ctx.shape(param)
    size = int(np.prod(shape)) if shape else 1
    param = cast(param, ctx, dtype)
    if not shape or size == 1:
        return ctx.reshape(param, []) if shape else param
    axis = norm_axis(ctx, axis, len(x_shape))
    if block_size <= 0:
        if len(shape) != 1 or shape[0] != x_shape[axis]:
            raise ctx.error(f"a per-axis {what} must have shape ({x_shape[axis]},) for axis "
                            f"{axis} of {x_shape}, got {shape}")
        return param
    expected = tuple(-(-d // block_size) if i == axis else d for i, d in enumerate(x_shape))
    if tuple(shape) != expected:
        raise ctx.error(f"blocked quantization with block_size {block_size} on axis {axis} of "
                        f"{x_shape} needs a {what} of shape {expected}, got {shape}")
    out = op("repeat", param, repeats=block_size, axis=axis)
    if shape[axis] * block_size != x_shape[axis]:
        out = op("strided_slice", out, begin=[0], end=[x_shape[axis]], strides=[1],
                 axes=[axis], slice_mode="end")
    return out


def scale_of(ctx: NodeContext, scale, x_shape: tuple = (), axis: int = 1, block_size: int = 0,
             what: str = "scale"):
    _check_static(ctx, scale, what, None)
    return qparam(ctx, scale, x_shape, axis, block_size, what, "float32")


def zero_point_of(ctx: NodeContext, zp, dtype: str, x_shape: tuple = (), axis: int = 1,
                  block_size: int = 0, what: str = "zero point"):
    """An ONNX zero point as int32 (0 when absent); its own type must be the data's."""
    if zp is None:
        return const(0, "int32")
    if ctx.dtype(zp) != dtype:
        raise ctx.error(f"the {what} is {ctx.dtype(zp)} but the quantized data is {dtype}")
    _check_static(ctx, zp, what, dtype)
    return qparam(ctx, zp, x_shape, axis, block_size, what, "int32")


def quantize(ctx: NodeContext, x, scale, zero_point, out_dtype: str, axis: int = 1,
             block_size: int = 0):
    """saturate(round(x / scale) + zero_point) in out_dtype (a small float: module comment)."""
    check_quantized_type(ctx, out_dtype, "the quantized output")
    shape = ctx.shape(x)
    if out_dtype in SMALL_FLOATS:
        dtype = ctx.dtype(x)
        scaled = op("divide", x, _broadcastable(ctx, scale, shape, axis, block_size, dtype))
        if zero_point is not None and SMALL_FLOATS[out_dtype].bits < 8:
            scaled = op("add", scaled, _broadcastable(ctx, zero_point, shape, axis, block_size,
                                                      dtype))
        return cast_to(ctx, scaled, out_dtype)
    if ctx.dtype(x) not in ("float32", "float16", "bfloat16", "float64"):
        x = op("cast", x, dtype="float32")
    s = scale_of(ctx, scale, shape, axis, block_size)
    zp = zero_point_of(ctx, zero_point, out_dtype, shape, axis, block_size)
    return qnn.quantize(x, s, zp, axis=_axis(ctx, axis, shape), out_dtype=out_dtype)


def dequantize(ctx: NodeContext, x, scale, zero_point, out_dtype: str, axis: int = 1,
               block_size: int = 0):
    """(x - zero_point) * scale in out_dtype (computed in float32, as the ONNX reference)."""
    dtype, shape = ctx.dtype(x), ctx.shape(x)
    check_quantized_type(ctx, dtype, "the quantized input")
    if dtype in SMALL_FLOATS:
        value = op("cast", x, dtype="float32")
        if zero_point is not None and SMALL_FLOATS[dtype].bits < 8:
            value = op("subtract", value, _broadcastable(ctx, zero_point, shape, axis,
                                                         block_size, "float32"))
        return cast(op("multiply", value, _broadcastable(ctx, scale, shape, axis, block_size,
                                                         "float32")), ctx, out_dtype)
    s = scale_of(ctx, scale, shape, axis, block_size)
    zp = zero_point_of(ctx, zero_point, dtype, shape, axis, block_size)
    wide = out_dtype if out_dtype in ("float32", "float16") else "float32"
    return cast(qnn.dequantize(x, s, zp, axis=_axis(ctx, axis, shape), out_dtype=wide), ctx,
                out_dtype)


def _axis(ctx: NodeContext, axis: int, shape: tuple) -> int:
    """The axis for the QNN op: ONNX's, normalized (any in-range value when the parameters
    are per tensor, whose axis ONNX does not check)."""
    return axis % len(shape) if shape and -len(shape) <= axis < len(shape) else -1


def _broadcastable(ctx: NodeContext, param, shape: tuple, axis: int, block_size: int,
                   dtype: str):
    """A parameter of the small-float path as an operand that broadcasts against x."""
    param = qparam(ctx, param, shape, axis, block_size, "quantization parameter", dtype)
    if len(ctx.shape(param)) == 1 and len(shape) > 1:
        param = reshape(param, [-1] + [1] * (len(shape) - norm_axis(ctx, axis, len(shape)) - 1))
    return param


def _zero_point(inputs, index: int):
    return inputs[index] if len(inputs) > index else None


@converter("QuantizeLinear", since=10)
@converter("QuantizeLinear", since=1, domain=MS_DOMAIN)
def _quantize_linear(ctx, inputs):
    x, scale, zp = inputs[0], inputs[1], _zero_point(inputs, 2)
    out_dtype = "uint8"
    attr_dtype = int(ctx.attr("output_dtype", 0))
    if attr_dtype:
        out_dtype = onnx_dtype(attr_dtype, ctx.where)
    if zp is not None:
        if attr_dtype and ctx.dtype(zp) != out_dtype:
            raise ctx.error(f"output_dtype {out_dtype} disagrees with the zero point's "
                            f"{ctx.dtype(zp)}")
        out_dtype = ctx.dtype(zp)
    if ctx.attr("precision") is not None:
        raise ctx.error("the precision attribute is not supported")
    return quantize(ctx, x, scale, zp, out_dtype, int(ctx.attr("axis", 1)),
                    int(ctx.attr("block_size", 0)))


@converter("DequantizeLinear", since=10)
@converter("DequantizeLinear", since=1, domain=MS_DOMAIN)
def _dequantize_linear(ctx, inputs):
    x, scale, zp = inputs[0], inputs[1], _zero_point(inputs, 2)
    out_dtype = ctx.dtype(scale)
    if int(ctx.attr("output_dtype", 0)):
        out_dtype = onnx_dtype(int(ctx.attr("output_dtype")), ctx.where)
    return dequantize(ctx, x, scale, zp, out_dtype, int(ctx.attr("axis", 1)),
                      int(ctx.attr("block_size", 0)))


def _whole(x, reduce: str, ctx: NodeContext):
    """max / min of every element, over the rows first: the rows reduce in parallel, one
    vector reduction each, where one reduction over all axes was a single serial loop
    (exact: max and min do not round)."""
    if len(ctx.shape(x)) < 2:
        return op(reduce, x, axis=None, keepdims=False, exclude=False)
    rows = op(reduce, x, axis=[-1], keepdims=False, exclude=False)
    return op(reduce, rows, axis=None, keepdims=False, exclude=False)


@converter("DynamicQuantizeLinear", since=11)
def _dynamic_quantize_linear(ctx, inputs):
    """uint8 quantization with scale and zero point from the data's range (including 0); the
    data is quantized by qnn.quantize with those run-time parameters."""
    x = inputs[0]
    dtype = ctx.dtype(x)
    zero = const(0.0, dtype)
    hi = op("maximum", _whole(x, "max", ctx), zero)
    lo = op("minimum", _whole(x, "min", ctx), zero)
    span = op("subtract", hi, lo)
    span = op("where", op("equal", span, zero), const(1.0, dtype), span)
    scale = op("divide", span, const(255.0, dtype))
    initial = op("subtract", zero, op("divide", lo, scale))
    zp = op("cast", op("round", op("clip", initial, a_min=0.0, a_max=255.0)), dtype="int32")
    y = qnn.quantize(x, cast(scale, ctx, "float32"), zp, out_dtype="uint8")
    return y, scale, op("cast", zp, dtype="uint8")
