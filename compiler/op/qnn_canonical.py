"""Canonical forms of the QNN ops that have their own compute rule: quantize, dequantize,
requantize and the contractions, written with nn and tensor ops (what
relay.qnn.transform.CanonicalizeOps produces). Each computes its op's qnn_math semantics
exactly; a backend without QNN kernels can run the result.

The contractions become the nn op on centered int32 operands (zero padding of the centered
data is padding with the zero point); TVM expands the zero-point terms instead, to keep int8
operands for its int8 schedules: relayjit's fast path keeps qnn.conv2d itself (the strategy
layer). requantize with compute_dtype "int64" needs constant scales (TVM's does too): the
fixed-point multipliers and shifts become constants.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import Constant, const
from .qnn import resolved
from .qnn_contract import kernel_channel_axis
from .qnn_math import dtype_range, fixed_point_multiplier_shift
from .registry import CANONICALIZE, get_def, make_call

_INT64, _F64 = "int64", "float64"


def _call(name: str, *args, **attrs):
    return make_call(name, list(args), **attrs)


def _cast(x, dtype: str):
    return _call("cast", x, dtype=dtype)


def _along(param, param_type, ndim: int, axis: int):
    """A scale/zero point reshaped to broadcast against rank-ndim data along axis."""
    shape = param_type.shape
    if len(shape) == 0 or tuple(shape) == (1,) or ndim == 0:
        return _call("reshape", param, newshape=[]) if len(shape) else param
    if len(shape) == 1:
        return _call("reshape", param, newshape=[-1] + [1] * (ndim - axis - 1))
    return param


def _axis(attrs, ndim: int) -> int:
    return attrs.axis % ndim if ndim else 0


def _clamp(r, zp, lo: int, hi: int, dtype: str, is_float: bool = True):
    """clamp(r + zp) into dtype (zp int64; r int64, or integer-valued float whose NaN gives
    qmin), clamping in int64/float64 before the addition (qnn_math's order)."""
    work = _F64 if is_float else _INT64
    low = _cast(_call("subtract", const(lo, _INT64), zp), work)
    high = _cast(_call("subtract", const(hi, _INT64), zp), work)
    r = _cast(r, work)
    clamped = _call("minimum", _call("maximum", r, low), high)
    if is_float:
        clamped = _call("where", _call("isnan", r), low, clamped)
    return _cast(_call("add", _cast(clamped, _INT64), zp), dtype)


def _quantize(attrs, args, types):
    x, scale, zp = args
    nd, axis = len(types[0].shape), _axis(attrs, len(types[0].shape))
    work = _F64 if types[0].dtype == _F64 else "float32"
    v = _call("round", _call("divide", _cast(x, work),
                             _cast(_along(scale, types[1], nd, axis), work)))
    lo, hi = dtype_range(attrs.out_dtype)
    return _clamp(v, _cast(_along(zp, types[2], nd, axis), _INT64), lo, hi, attrs.out_dtype)


def _dequantize(attrs, args, types):
    x, scale, zp = args
    nd, axis = len(types[0].shape), _axis(attrs, len(types[0].shape))
    d = _call("subtract", _cast(x, _INT64), _cast(_along(zp, types[2], nd, axis), _INT64))
    value = _call("multiply", _cast(d, "float32"), _along(scale, types[1], nd, axis))
    return value if attrs.out_dtype == "float32" else _cast(value, attrs.out_dtype)


def _round_ties(v, rounding: str, dtype: str):
    if rounding == "TONEAREST_EVEN":
        return _call("round", v)
    half, one = const(0.5, dtype), const(1.0, dtype)
    magnitude = _call("abs", v) if rounding == "TONEAREST" else v
    down = _call("floor", magnitude)
    up = _call("greater_equal", _call("subtract", magnitude, down), half)
    rounded = _call("where", up, _call("add", down, one), down)
    if rounding == "UPWARD":
        return rounded
    return _call("where", _call("less", v, const(0.0, dtype)), _call("negative", rounded),
                 rounded)


def _constant(expr, what: str) -> np.ndarray:
    if not isinstance(expr, Constant):
        raise CompilerError(f"qnn.requantize with compute_dtype 'int64' needs a constant "
                            f"{what} (its fixed-point multiplier is computed at compile time)")
    return expr.data.numpy()


def _fixed_point(d, in_scale, out_scale, rounding: str, nd: int, axis: int):
    """TVM's fixed-point multiply with constant multipliers and shifts (per channel or not)."""
    ratio = (_constant(in_scale, "input_scale").astype(np.float64)
             / _constant(out_scale, "output_scale").astype(np.float64))
    pairs = [fixed_point_multiplier_shift(float(m)) for m in np.ravel(ratio)]
    shape = np.shape(ratio)
    fixed = np.array([p[0] for p in pairs], np.int64).reshape(shape)
    shift = np.array([p[1] for p in pairs], np.int64).reshape(shape)

    def along(array):
        if array.ndim == 0 or array.size == 1 or nd == 0:
            return const(array.reshape(()), _INT64)
        if array.ndim == 1:
            return const(array.reshape((-1,) + (1,) * (nd - axis - 1)), _INT64)
        return const(array, _INT64)
    total = 31 + np.maximum(-shift, 0)
    prod = _call("multiply", _call("left_shift", d, along(np.maximum(shift, 0))), along(fixed))
    half = along(np.left_shift(np.int64(1), total - 1))
    if rounding == "UPWARD":
        return _call("right_shift", _call("add", prod, half), along(total))
    if rounding == "TONEAREST":
        neg = _cast(_call("less", prod, const(0, _INT64)), _INT64)
        return _call("right_shift", _call("subtract", _call("add", prod, half), neg),
                     along(total))
    down = _call("right_shift", prod, along(total))
    rem = _call("subtract", prod, _call("left_shift", down, along(total)))
    odd = _call("equal", _call("bitwise_and", down, const(1, _INT64)), const(1, _INT64))
    up = _call("logical_or", _call("greater", rem, half),
               _call("logical_and", _call("equal", rem, half), odd))
    return _call("add", down, _cast(up, _INT64))


def _requantize(attrs, args, types):
    x, in_scale, in_zp, out_scale, out_zp = args
    nd, axis = len(types[0].shape), _axis(attrs, len(types[0].shape))
    rounding, compute = resolved(attrs)
    d = _call("subtract", _cast(x, _INT64), _cast(_along(in_zp, types[2], nd, axis), _INT64))
    zp = _cast(_along(out_zp, types[4], nd, axis), _INT64)
    lo, hi = dtype_range(attrs.out_dtype)
    if compute == _INT64:
        r = _fixed_point(d, in_scale, out_scale, rounding, nd, axis)
        return _clamp(r, zp, lo, hi, attrs.out_dtype, is_float=False)
    m = _call("divide", _cast(_along(in_scale, types[1], nd, axis), compute),
              _cast(_along(out_scale, types[3], nd, axis), compute))
    v = _round_ties(_call("multiply", _cast(d, compute), m), rounding, compute)
    return _clamp(v, zp, lo, hi, attrs.out_dtype)


def _contraction(op: str, nn_op: str):
    def canonical(attrs, args, types):
        data, weight, data_zp, kernel_zp = args[:4]
        axis = kernel_channel_axis(op, attrs)
        x = _call("subtract", _cast(data, "int32"), _along(data_zp, types[2], 0, 0))
        w = _call("subtract", _cast(weight, "int32"),
                  _along(kernel_zp, types[3], len(types[1].shape), axis))
        return make_call(nn_op, [x, w], **dict(attrs))
    return canonical


for _name, _fn in (("qnn.quantize", _quantize), ("qnn.dequantize", _dequantize),
                   ("qnn.requantize", _requantize)):
    get_def(_name).set_attr(CANONICALIZE, _fn)
for _op, _nn in (("qnn.conv2d", "nn.conv2d"), ("qnn.conv2d_transpose", "nn.conv2d_transpose"),
                 ("qnn.dense", "nn.dense"), ("qnn.batch_matmul", "nn.batch_matmul")):
    get_def(_op).set_attr(CANONICALIZE, _contraction(_op, _nn))
