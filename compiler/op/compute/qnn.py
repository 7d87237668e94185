"""Compute rules of the QNN ops with their own lowering: quantize, dequantize, requantize,
simulated quantize/dequantize and the contractions (the generic path: int32 accumulation
through the nn rules on centered operands). They compute qnn_math's semantics bit for bit;
scales and zero points are read from their tensors at run time (per tensor, along the axis,
or broadcast), so a kernel does not depend on their values.

The decomposed QNN ops (add, concatenate, the activations, avg_pool2d: compiler/op/
qnn_composite.py) have no rule: the lowering expands their canonical form.
"""
from __future__ import annotations

import numpy as np

from codegen.tir.dtype import bits, is_float, is_integer, max_value, min_value
from codegen.tir.expr import Cast, FloatImm, IntImm, Load
from codegen.tir.stmt import ConstantBuffer
from compiler.op.qnn import resolved
from compiler.op.qnn_contract import kernel_channel_axis
from compiler.op.qnn_math import dtype_range
from compiler.op.registry import get_def
from .common import Expr, bcast, rule, te, tir

INT64, F64, F32 = "int64", "float64", "float32"


def param_at(param: te.Tensor, out_shape: tuple, axis: int, idx: tuple) -> Expr:
    """A scale or zero point read at output position idx: scalar, along axis, or broadcast."""
    if param.ndim == 0 or param.shape == (1,):
        return param[(0,) * param.ndim]
    if param.ndim == 1 and len(out_shape) > 0:
        return param[(idx[axis],)]
    return bcast(param, out_shape, idx)


def _axis(attrs, ndim: int) -> int:
    return attrs.axis % ndim if ndim else 0


def known(value: Expr) -> int | float | None:
    """The value of a scale or zero point compiled into the kernel (an immediate, or a load of
    a constant buffer holding one value), else None."""
    if type(value) in (IntImm, FloatImm):
        return value.value
    if type(value) is not Load or not isinstance(value.buffer, ConstantBuffer):
        return None
    data = np.unique(np.frombuffer(value.buffer.data, dtype=value.buffer.dtype))
    return data[0].item() if data.size == 1 else None


def value_range(value: Expr) -> tuple[int, int] | None:
    """Bounds of an integer zero point: its value when known, its source type's range when it
    is a cast of a narrower integer (a zero point fed as uint8, as ONNX's are), else None."""
    z = known(value)
    if z is not None:
        return int(z), int(z)
    if type(value) is Cast and is_integer(value.value.dtype) and bits(value.value.dtype) <= 16:
        return min_value(value.value.dtype), max_value(value.value.dtype)
    return None


def _small(bounds: tuple[int, int] | None, *ends: int, limit: int = 1 << 24) -> bool:
    """Whether every end minus every bound is below limit in magnitude."""
    return bounds is not None and all(abs(e - b) < limit for e in ends for b in bounds)


def difference(x: Expr, zero_point: Expr) -> Expr:
    """x - zero_point exactly, integers in: in int32 when the zero point's range keeps it in
    range, in float64 when both have at most 32 bits (exact; float64 vectors convert on
    every x86 target, int64 ones not on AVX2), else in int64."""
    z, bounds = known(zero_point), value_range(zero_point)
    if is_integer(x.dtype) and bits(x.dtype) <= 16 and _small(bounds, 0, limit=1 << 20):
        return tir.cast(x, "int32") - (tir.const(int(z), "int32") if z is not None
                                       else tir.cast(zero_point, "int32"))
    if bits(x.dtype) <= 32 and bits(zero_point.dtype) <= 32:
        if z == 0:
            return x
        return tir.cast(x, F64) - tir.cast(zero_point, F64)
    return tir.cast(x, INT64) - tir.cast(zero_point, INT64)


def saturate(r: Expr, zero_point: Expr, dtype: str) -> Expr:
    """clamp(r + zero_point) into dtype: r is int64 or an integer-valued float (NaN gives
    qmin); the clamp happens before the addition, in a type where nothing overflows or
    rounds: float32 when the zero point's range keeps the bounds small (known bounds fold to
    constants), else float64 (a float r) or int64."""
    lo, hi = dtype_range(dtype)
    z = known(zero_point)
    if r.dtype == F32 and bits(dtype) <= 32 and _small(value_range(zero_point), lo, hi):
        zf = tir.const(float(z), F32) if z is not None else tir.cast(zero_point, F32)
        low, high = tir.const(float(lo), F32) - zf, tir.const(float(hi), F32) - zf
        clamped = tir.select(tir.gt(r, high), high, tir.select(tir.lt(r, low), low, r))
        clamped = tir.select(tir.isnan(r), low, clamped)
        zi = tir.const(int(z), "int32") if z is not None else tir.cast(zero_point, "int32")
        return tir.cast(tir.cast(clamped, "int32") + zi, dtype)
    if is_float(r.dtype) and bits(dtype) <= 32:
        zp = tir.cast(zero_point, F64)
        low, high = tir.const(float(lo), F64) - zp, tir.const(float(hi), F64) - zp
        r = tir.cast(r, F64)
        clamped = tir.select(tir.gt(r, high), high, tir.select(tir.lt(r, low), low, r))
        clamped = tir.select(tir.isnan(r), low, clamped)
        return tir.cast(tir.cast(clamped + zp, "int32"), dtype)
    zp = tir.cast(zero_point, INT64)
    work = F64 if r.dtype.startswith("float") else INT64
    low = tir.cast(tir.const(lo, INT64) - zp, work)
    high = tir.cast(tir.const(hi, INT64) - zp, work)
    r = tir.cast(r, work)
    clamped = tir.select(tir.gt(r, high), high, tir.select(tir.lt(r, low), low, r))
    if work == F64:
        clamped = tir.select(tir.isnan(r), low, clamped)
    return tir.cast(tir.cast(clamped, INT64) + zp, dtype)


def round_ties(v: Expr, rounding: str) -> Expr:
    """v rounded to an integer value in its float type, ties as `rounding` says (exact)."""
    if rounding == "TONEAREST_EVEN":
        return tir.round(v)
    one, half = tir.const(1.0, v.dtype), tir.const(0.5, v.dtype)
    magnitude = tir.fabs(v) if rounding == "TONEAREST" else v
    down = tir.floor(magnitude)
    rounded = tir.select(tir.ge(magnitude - down, half), down + one, down)
    return tir.select(tir.lt(v, tir.const(0.0, v.dtype)), -rounded, rounded) \
        if rounding == "TONEAREST" else rounded


def quantize_value(x: Expr, scale: Expr, zero_point: Expr, dtype: str) -> Expr:
    work = F64 if x.dtype == F64 else "float32"
    return saturate(tir.round(tir.cast(x, work) / tir.cast(scale, work)), zero_point, dtype)


def dequantize_value(q: Expr, scale: Expr, zero_point: Expr, dtype: str) -> Expr:
    d = tir.cast(difference(q, zero_point), F32)  # the exact difference, rounded once
    return tir.cast(d * tir.cast(scale, F32), dtype)


def _fixed_point(d: Expr, in_scale: Expr, out_scale: Expr, rounding: str) -> Expr:
    """TVM's fixed-point requantisation of the int64 d (qnn_math._fixed_point), with the
    multiplier and shift taken from the double ratio's bits in the kernel."""
    ratio = tir.cast(in_scale, F64) / tir.cast(out_scale, F64)
    bits = tir.reinterpret(ratio, INT64)
    exponent_field = tir.bitwise_and(tir.shift_right(bits, 52), 0x7FF)
    significand = tir.bitwise_or(tir.bitwise_and(bits, (1 << 52) - 1), 1 << 52)
    fixed = tir.shift_right(significand + (1 << 21), 22)  # round(frac * 2^31), half away
    exponent = exponent_field - 1022
    carry = tir.eq(fixed, 1 << 31)
    fixed = tir.select(carry, tir.const(1 << 30, INT64), fixed)
    exponent = tir.select(carry, exponent + 1, exponent)
    usable = tir.logical_and(tir.ne(exponent_field, 0), tir.ne(exponent_field, 0x7FF))
    fixed = tir.select(usable, tir.select(tir.lt(bits, 0), -fixed, fixed), tir.const(0, INT64))
    shift = tir.select(usable, exponent, tir.const(0, INT64))
    zero = tir.const(0, INT64)
    total = 31 + tir.max(zero - shift, zero)
    prod = tir.shift_left(d, tir.max(shift, zero)) * fixed
    half = tir.shift_left(tir.const(1, INT64), total - 1)
    if rounding == "UPWARD":
        return tir.shift_right(prod + half, total)
    if rounding == "TONEAREST":
        neg = tir.select(tir.lt(prod, zero), tir.const(1, INT64), zero)
        return tir.shift_right(prod + half - neg, total)
    down = tir.shift_right(prod, total)
    rem = prod - tir.shift_left(down, total)
    odd = tir.eq(tir.bitwise_and(down, 1), tir.const(1, INT64))
    up = tir.logical_or(tir.gt(rem, half), tir.logical_and(tir.eq(rem, half), odd))
    return down + tir.select(up, tir.const(1, INT64), zero)


def requantize_value(x: Expr, in_scale: Expr, in_zp: Expr, out_scale: Expr, out_zp: Expr,
                     rounding: str, compute_dtype: str, dtype: str) -> Expr:
    """qnn_math.requantize at one element."""
    if compute_dtype == INT64:
        d = tir.cast(x, INT64) - tir.cast(in_zp, INT64)
        return saturate(_fixed_point(d, in_scale, out_scale, rounding), out_zp, dtype)
    m = tir.cast(in_scale, compute_dtype) / tir.cast(out_scale, compute_dtype)
    d = tir.cast(difference(x, in_zp), compute_dtype)  # the exact difference, rounded once
    return saturate(round_ties(d * m, rounding), out_zp, dtype)


@rule("qnn.quantize")
def _quantize(inputs, attrs, out_type):
    x, scale, zp = inputs
    shape, axis = out_type.shape, _axis(attrs, len(out_type.shape))
    return te.compute(shape, lambda *i: quantize_value(
        x[i], param_at(scale, shape, axis, i), param_at(zp, shape, axis, i), out_type.dtype),
        name="T_quantize")


@rule("qnn.dequantize")
def _dequantize(inputs, attrs, out_type):
    q, scale, zp = inputs
    shape, axis = out_type.shape, _axis(attrs, len(out_type.shape))
    return te.compute(shape, lambda *i: dequantize_value(
        q[i], param_at(scale, shape, axis, i), param_at(zp, shape, axis, i), out_type.dtype),
        name="T_dequantize")


@rule("qnn.requantize")
def _requantize(inputs, attrs, out_type):
    x, params = inputs[0], inputs[1:]
    shape, axis = out_type.shape, _axis(attrs, len(out_type.shape))
    rounding, compute_dtype = resolved(attrs)

    def f(*i):
        s_in, z_in, s_out, z_out = (param_at(p, shape, axis, i) for p in params)
        return requantize_value(x[i], s_in, z_in, s_out, z_out, rounding, compute_dtype,
                                out_type.dtype)
    return te.compute(shape, f, name="T_requantize")


def _simulated(quantizing: bool):
    """TVM's simulated (de)quantize: the dtype is a run-time code (0: pass through)."""
    def compute(inputs, attrs, out_type):
        x, code, scale, zp = inputs
        shape, axis = out_type.shape, _axis(attrs, len(out_type.shape))
        dt = out_type.dtype

        def f(*i):
            v, c = x[i], code[()]
            s = tir.cast(param_at(scale, shape, axis, i), dt)
            z = tir.cast(param_at(zp, shape, axis, i), dt)
            if not quantizing:
                return tir.select(tir.eq(c, 0), v, (v - z) * s)
            out = v
            for name, k in (("int8", 1), ("uint8", 2), ("int32", 3)):
                lo, hi = dtype_range(name)
                q = tir.round(v / s) + z
                q = tir.min(tir.max(q, tir.const(lo, dt)), tir.const(hi, dt))
                out = tir.select(tir.eq(c, k), q, out)
            return out
        return te.compute(shape, f, name="T_simulated_quantize" if quantizing
                          else "T_simulated_dequantize")
    return compute


rule("qnn.simulated_quantize")(_simulated(True))
rule("qnn.simulated_dequantize")(_simulated(False))


def _centered(t: te.Tensor, zero_point: te.Tensor, axis: int, name: str) -> te.Tensor:
    """t - zero_point in int32 (zero point per tensor or along axis)."""
    shape = t.shape
    return te.compute(shape, lambda *i: tir.cast(t[i], "int32") - tir.cast(
        param_at(zero_point, shape, axis, i), "int32"), name=name)


def _contraction(op: str, nn_op: str):
    def compute(inputs, attrs, out_type):
        data, weight, data_zp, kernel_zp = inputs[:4]
        centered = [_centered(data, data_zp, 0, "T_data_centered"),
                    _centered(weight, kernel_zp, kernel_channel_axis(op, attrs),
                              "T_weight_centered")]
        return get_def(nn_op).compute(centered, attrs, out_type)
    return compute


for _op, _nn in (("qnn.conv2d", "nn.conv2d"), ("qnn.conv2d_transpose", "nn.conv2d_transpose"),
                 ("qnn.dense", "nn.dense"), ("qnn.batch_matmul", "nn.batch_matmul")):
    rule(_op)(_contraction(_op, _nn))
