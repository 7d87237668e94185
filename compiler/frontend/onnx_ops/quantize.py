"""Quantization ONNX ops, composed from cast/round/clip/arithmetic: no quantized Relay ops needed.

Scales and zero points may be runtime inputs; per-axis ones are reshaped to broadcast along the
axis and blocked ones are repeated `block_size` times along it. Rounding is half to even
(relay `round`), saturation is a clip in floating point before the final cast.
"""
from __future__ import annotations

import numpy as np

from codegen.tir.dtype import SMALL_FLOATS

from .common import (NodeContext, cast, const, converter, find_converter, norm_axis, onnx_dtype,
                     op)
from .elementwise import cast_to

# integer quantized types and their saturation ranges; the small floats (float8, float4)
# quantize by a cast, as ONNX's reference: x / scale saturated to the format (float8's zero
# point is not added; float4's is)
_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
           "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1), "int4": (-8, 7),
           "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}


def _qtype(ctx: NodeContext, dtype: str, what: str) -> tuple[int, int] | None:
    """The saturation range of an integer quantized type (None for a small float)."""
    if dtype in SMALL_FLOATS:
        return None
    if dtype not in _RANGES:
        raise ctx.error(f"{what} has type {dtype}; only {sorted(_RANGES)} and "
                        f"{sorted(SMALL_FLOATS)} are supported")
    return _RANGES[dtype]


def _along_axis(ctx: NodeContext, param, x_shape: tuple, axis: int, block_size: int):
    """A scale/zero point made broadcastable to x: scalar, per-axis vector or blocked tensor."""
    shape = ctx.shape(param)
    size = int(np.prod(shape)) if shape else 1
    if not shape or size == 1:
        return ctx.reshape(param, []) if shape else param
    axis = norm_axis(ctx, axis, len(x_shape))
    if block_size <= 0:
        if len(shape) != 1 or shape[0] != x_shape[axis]:
            raise ctx.error(f"a per-axis scale/zero point must have shape ({x_shape[axis]},) "
                            f"for axis {axis} of {x_shape}, got {shape}")
        return ctx.reshape(param, [shape[0]] + [1] * (len(x_shape) - axis - 1))
    expected = tuple(-(-d // block_size) if i == axis else d for i, d in enumerate(x_shape))
    if tuple(shape) != expected:
        raise ctx.error(f"blocked quantization with block_size {block_size} on axis {axis} of "
                        f"{x_shape} needs a scale/zero point of shape {expected}, got {shape}")
    out = op("repeat", param, repeats=block_size, axis=axis)
    if shape[axis] * block_size != x_shape[axis]:
        out = op("strided_slice", out, begin=[0], end=[x_shape[axis]], strides=[1],
                 axes=[axis], slice_mode="end")
    return out


def quantize(ctx: NodeContext, x, scale, zero_point, out_dtype: str, axis: int = 1,
             block_size: int = 0):
    """saturate(round(x / scale) + zero_point) in out_dtype (a small float: module comment)."""
    limits = _qtype(ctx, out_dtype, "the quantized output")
    dtype = ctx.dtype(x)
    shape = ctx.shape(x)
    scaled = op("divide", x, cast(_along_axis(ctx, scale, shape, axis, block_size), ctx, dtype))
    if limits is None:
        if zero_point is not None and SMALL_FLOATS[out_dtype].bits < 8:
            scaled = op("add", scaled, op("cast", _along_axis(ctx, zero_point, shape, axis,
                                                              block_size), dtype=dtype))
        return cast_to(ctx, scaled, out_dtype)
    qmin, qmax = limits
    work = "float64" if out_dtype == "int32" else "float32"
    y = cast(op("round", scaled), ctx, work)
    if zero_point is not None:
        y = op("add", y, op("cast", _along_axis(ctx, zero_point, shape, axis, block_size),
                            dtype=work))
    return op("cast", op("clip", y, a_min=float(qmin), a_max=float(qmax)), dtype=out_dtype)


def dequantize(ctx: NodeContext, x, scale, zero_point, out_dtype: str, axis: int = 1,
               block_size: int = 0):
    """(x - zero_point) * scale in out_dtype (computed in float32, as the ONNX reference)."""
    _qtype(ctx, ctx.dtype(x), "the quantized input")
    shape = ctx.shape(x)
    dx = op("cast", x, dtype="float32")
    if zero_point is not None:
        if ctx.dtype(zero_point) != ctx.dtype(x):
            raise ctx.error(f"x is {ctx.dtype(x)} but its zero point is {ctx.dtype(zero_point)}")
        zp = op("cast", _along_axis(ctx, zero_point, shape, axis, block_size), dtype="float32")
        dx = op("subtract", dx, zp)
    s = cast(_along_axis(ctx, scale, shape, axis, block_size), ctx, "float32")
    return cast(op("multiply", dx, s), ctx, out_dtype)


def _zero_point(inputs, index: int):
    return inputs[index] if len(inputs) > index else None


@converter("QuantizeLinear", since=10)
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
def _dequantize_linear(ctx, inputs):
    x, scale, zp = inputs[0], inputs[1], _zero_point(inputs, 2)
    out_dtype = ctx.dtype(scale)
    if int(ctx.attr("output_dtype", 0)):
        out_dtype = onnx_dtype(int(ctx.attr("output_dtype")), ctx.where)
    return dequantize(ctx, x, scale, zp, out_dtype, int(ctx.attr("axis", 1)),
                      int(ctx.attr("block_size", 0)))


@converter("DynamicQuantizeLinear", since=11)
def _dynamic_quantize_linear(ctx, inputs):
    """uint8 quantization with scale and zero point from the data's range (including 0)."""
    x = inputs[0]
    dtype = ctx.dtype(x)
    zero = const(0.0, dtype)
    hi = op("maximum", op("max", x, axis=None, keepdims=False, exclude=False), zero)
    lo = op("minimum", op("min", x, axis=None, keepdims=False, exclude=False), zero)
    span = op("subtract", hi, lo)
    span = op("where", op("equal", span, zero), const(1.0, dtype), span)
    scale = op("divide", span, const(255.0, dtype))
    initial = op("subtract", zero, op("divide", lo, scale))
    zp_float = op("round", op("clip", initial, a_min=0.0, a_max=255.0))
    y = op("add", op("round", op("divide", x, scale)), zp_float)
    y = op("cast", op("clip", y, a_min=0.0, a_max=255.0), dtype="uint8")
    return y, scale, op("cast", zp_float, dtype="uint8")


def _centered(ctx: NodeContext, q, zero_point, axis: int | None = None):
    """q - zero_point in int32 (per-axis zero points broadcast along `axis`)."""
    q32 = op("cast", q, dtype="int32")
    if zero_point is None:
        return q32
    zp = zero_point
    shape = ctx.shape(zp)
    if shape and int(np.prod(shape)) != 1 and axis is not None:
        zp = _along_axis(ctx, zp, ctx.shape(q), axis, 0)
    elif shape:
        zp = ctx.reshape(zp, [])
    return op("subtract", q32, op("cast", zp, dtype="int32"))


def _matmul(ctx: NodeContext, a, b):
    return find_converter("MatMul", ctx.opset)(ctx, [a, b])


def _conv(ctx: NodeContext, x, w):
    return find_converter("Conv", ctx.opset)(ctx, [x, w])


@converter("MatMulInteger", since=10)
def _matmul_integer(ctx, inputs):
    a, b = inputs[0], inputs[1]
    a_zp, b_zp = _zero_point(inputs, 2), _zero_point(inputs, 3)
    rank_a, rank_b = ctx.rank(a), ctx.rank(b)
    # a's zero point is per row (axis -2), b's per column (axis -1)
    return _matmul(ctx, _centered(ctx, a, a_zp, max(rank_a - 2, 0)),
                   _centered(ctx, b, b_zp, rank_b - 1))


@converter("ConvInteger", since=10)
def _conv_integer(ctx, inputs):
    x, w = inputs[0], inputs[1]
    x_zp, w_zp = _zero_point(inputs, 2), _zero_point(inputs, 3)
    return _conv(ctx, _centered(ctx, x, x_zp), _centered(ctx, w, w_zp, 0))


def _requantize(ctx: NodeContext, acc, multiplier, y_zp, y_dtype: str):
    """round(acc * multiplier) + y_zero_point, saturated to y's type (float64 as the reference)."""
    qmin, qmax = _qtype(ctx, y_dtype, "the quantized output")
    y = op("round", op("multiply", op("cast", acc, dtype="float64"),
                       op("cast", multiplier, dtype="float64")))
    if y_zp is not None:
        y = op("add", y, op("cast", y_zp, dtype="float64"))
    return op("cast", op("clip", y, a_min=float(qmin), a_max=float(qmax)), dtype=y_dtype)


@converter("QLinearMatMul", since=10)
def _qlinear_matmul(ctx, inputs):
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = inputs
    rank_a, rank_b = ctx.rank(a), ctx.rank(b)
    acc = _matmul(ctx, _centered(ctx, a, a_zp, max(rank_a - 2, 0)),
                  _centered(ctx, b, b_zp, rank_b - 1))
    a_s = _scalar_or(ctx, a_scale, max(rank_a - 2, 0), ctx.shape(a))
    b_s = _scalar_or(ctx, b_scale, rank_b - 1, ctx.shape(b))
    multiplier = op("divide", op("multiply", a_s, b_s), _scalar_or(ctx, y_scale, 0, ()))
    y_dtype = ctx.dtype(y_zp) if y_zp is not None else ctx.dtype(a)
    y_zp = None if y_zp is None else _scalar_or(ctx, y_zp, 0, ())
    return _requantize(ctx, acc, multiplier, y_zp, y_dtype)


def _scalar_or(ctx: NodeContext, param, axis: int, shape: tuple):
    """A one-element parameter as a scalar; a vector broadcast along `axis` of a `shape` x."""
    pshape = ctx.shape(param)
    if not pshape or int(np.prod(pshape)) == 1:
        return ctx.reshape(param, []) if pshape else param
    return _along_axis(ctx, param, shape, axis, 0)


@converter("QLinearConv", since=10)
def _qlinear_conv(ctx, inputs):
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = inputs[:8]
    bias = inputs[8] if len(inputs) > 8 else None
    acc = _conv(ctx, _centered(ctx, x, x_zp), _centered(ctx, w, w_zp, 0))
    rank = ctx.rank(acc)
    if bias is not None:
        acc = op("add", acc, ctx.reshape(op("cast", bias, dtype="int32"),
                                     [-1] + [1] * (rank - 2)))
    w_s = _scalar_or(ctx, w_scale, 1, ctx.shape(acc))  # per output channel
    multiplier = op("divide", op("multiply", _scalar_or(ctx, x_scale, 0, ()), w_s),
                    _scalar_or(ctx, y_scale, 0, ()))
    y_dtype = ctx.dtype(y_zp) if y_zp is not None else ctx.dtype(x)
    y_zp = None if y_zp is None else _scalar_or(ctx, y_zp, 0, ())
    return _requantize(ctx, acc, multiplier, y_zp, y_dtype)

