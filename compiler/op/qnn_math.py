"""The integer semantics of the QNN ops in numpy: the definition the compute rules reproduce
bit for bit and the references (debug interpreter, FoldConstant checks, tests) evaluate.

Quantize (TVM's qnn.quantize; ONNX QuantizeLinear):
    q = clamp(round_half_even(x / scale) + zero_point, qmin, qmax)
    x / scale in float32 (float64 for float64 x); NaN quantizes to qmin (as onnxruntime).
Dequantize: (x - zero_point) * scale, the difference exact (int64), converted once, in float32.
Requantize (TVM's qnn.requantize), d = x - input_zero_point (exact):
    compute_dtype "float32"/"float64" (onnxruntime's requantisation, MlasRequantizeOutput):
        m = input_scale / output_scale and v = d * m, each rounded once in that type;
        q = clamp(round(v) + output_zero_point, qmin, qmax), round() exact in the type.
    compute_dtype "int64" (TVM's fixed point): (multiplier, shift) from
        frexp(double(input_scale) / double(output_scale)) with a 31-bit significand
        (GetFixedPointMultiplierShift); d << max(shift, 0), times the multiplier, rounded
        right shift by 31 + max(-shift, 0); then the output zero point and the clamp.
    rounding at ties: "UPWARD" (towards +inf, TVM's default), "TONEAREST" (away from zero),
    "TONEAREST_EVEN" (half to even: ONNX, onnxruntime; relayjit's addition).
    The output zero point is added after rounding in every mode (TVM's int64 path and
    onnxruntime do so; TVM's float path adds it before, which differs at exact ties).

Parameters (scales, zero points) are scalars, vectors along `axis`, or (relayjit's addition,
for ONNX's blocked quantization) tensors of the data's rank that broadcast to it.
"""
from __future__ import annotations

import math

import numpy as np

QUANT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
                "uint16": (0, 65535), "int32": (-2 ** 31, 2 ** 31 - 1), "int4": (-8, 7),
                "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}
ROUNDINGS = ("UPWARD", "TONEAREST", "TONEAREST_EVEN")
COMPUTE_DTYPES = ("int64", "float32", "float64")


def dtype_range(dtype: str) -> tuple[int, int]:
    """(qmin, qmax) of a quantized dtype."""
    return QUANT_RANGES[str(dtype)]


def expand_param(param: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast against data of rank `ndim`: a scalar (or
    one-element tensor) stays a scalar, a vector lies along `axis`, a rank-`ndim` tensor is
    kept (blocked parameters)."""
    param = np.asarray(param)
    if param.size == 1 and param.ndim <= 1:
        return param.reshape(())
    if param.ndim == 1:
        return param.reshape((-1,) + (1,) * (ndim - axis - 1))
    return param


def round_ties(v: np.ndarray, rounding: str) -> np.ndarray:
    """Round to an integer value in v's float type, ties as `rounding` says (exact)."""
    if rounding == "TONEAREST_EVEN":
        return np.rint(v)
    magnitude = np.abs(v) if rounding == "TONEAREST" else v
    down = np.floor(magnitude)
    up = (magnitude - down >= 0.5).astype(v.dtype)
    rounded = down + up
    return np.copysign(rounded, v) if rounding == "TONEAREST" else rounded


def _clamp_to_int(r: np.ndarray, zero_point: np.ndarray, dtype: str) -> np.ndarray:
    """clamp(r + zero_point) in dtype; r is an int64 or integer-valued float array (NaN
    gives qmin, as onnxruntime; the clamp comes before the addition: nothing overflows)."""
    lo, hi = dtype_range(dtype)
    zp = zero_point.astype(np.int64)
    if r.dtype.kind == "f":
        r = np.where(np.isnan(r), -np.inf, r).astype(np.float64)  # exact; NaN saturates low
    return (np.clip(r, lo - zp, hi - zp).astype(np.int64) + zp).astype(dtype)


def quantize(x: np.ndarray, scale, zero_point, axis: int, out_dtype: str) -> np.ndarray:
    work = np.float64 if x.dtype == np.float64 else np.float32
    s = expand_param(np.asarray(scale), x.ndim, axis).astype(work)
    zp = expand_param(np.asarray(zero_point), x.ndim, axis)
    with np.errstate(all="ignore"):
        r = np.rint(x.astype(work) / s)
    return _clamp_to_int(r, zp, out_dtype)


def dequantize(x: np.ndarray, scale, zero_point, axis: int, out_dtype: str = "float32"
               ) -> np.ndarray:
    s = expand_param(np.asarray(scale), x.ndim, axis).astype(np.float32)
    zp = expand_param(np.asarray(zero_point), x.ndim, axis).astype(np.int64)
    d = (x.astype(np.int64) - zp).astype(np.float32)
    with np.errstate(all="ignore"):
        return (d * s).astype(out_dtype)


def fixed_point_multiplier_shift(multiplier: float) -> tuple[int, int]:
    """TVM's GetFixedPointMultiplierShift: multiplier = fixed * 2^(shift - 31), with fixed a
    31-bit significand rounded half away from zero; (0, 0) for 0 and non-finite values."""
    if multiplier == 0.0 or not math.isfinite(multiplier):
        return 0, 0
    significand, exponent = math.frexp(multiplier)
    fixed = int(math.copysign(math.floor(abs(significand) * 2.0 ** 31 + 0.5), significand))
    if abs(fixed) == 1 << 31:
        fixed //= 2
        exponent += 1
    return fixed, exponent


def _fixed_point(d: np.ndarray, fixed: np.ndarray, shift: np.ndarray, rounding: str
                 ) -> np.ndarray:
    """round(d * fixed * 2^(shift - 31)) in int64 (wrapping as the generated code does)."""
    left = np.maximum(shift, 0)
    total = 31 + np.maximum(-shift, 0)
    with np.errstate(over="ignore"):
        prod = np.left_shift(d, left) * fixed
        half = np.left_shift(np.int64(1), total - 1)
        if rounding == "UPWARD":
            return np.right_shift(prod + half, total)
        if rounding == "TONEAREST":
            return np.right_shift(prod + half - (prod < 0), total)
        down = np.right_shift(prod, total)
        rem = prod - np.left_shift(down, total)
        return down + ((rem > half) | ((rem == half) & (down & 1 == 1)))


def requantize(x: np.ndarray, input_scale, input_zero_point, output_scale, output_zero_point,
               axis: int, rounding: str, compute_dtype: str, out_dtype: str) -> np.ndarray:
    nd = x.ndim
    param = [expand_param(np.asarray(p), nd, axis) for p in
             (input_scale, input_zero_point, output_scale, output_zero_point)]
    in_scale, in_zp, out_scale, out_zp = param
    d = x.astype(np.int64) - in_zp.astype(np.int64)
    if compute_dtype == "int64":
        ratio = np.asarray(in_scale.astype(np.float64) / out_scale.astype(np.float64))
        pairs = np.vectorize(fixed_point_multiplier_shift, otypes=[np.int64, np.int64])(ratio)
        return _clamp_to_int(_fixed_point(d, *pairs, rounding), out_zp, out_dtype)
    work = np.dtype(compute_dtype)
    with np.errstate(all="ignore"):
        m = in_scale.astype(work) / out_scale.astype(work)
        r = round_ties(d.astype(work) * m, rounding)
    return _clamp_to_int(r, out_zp, out_dtype)
