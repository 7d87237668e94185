"""Op templates for quantized graphs: QuantizeLinear / DequantizeLinear (per tensor and per
axis), the integer contractions (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger) on
exact 8-bit values, and QDQ regions (dequantize -> Conv/MatMul/Add/pooling -> quantize) that
relay.build's FakeQuantizationToInteger turns into integer ops.

Integer math is exact (err 0) and compared exactly against onnxruntime's requantisation (the
patched reference, tests/fuzz/reference.py). A quantize of an inexact float may land one step
(or err / scale steps) away from the reference: its err counts in units of the integer, and
the oracle allows that many steps. Scales are powers of two half the time, so exact ties are
common, and small output scales make saturation common.
"""
from __future__ import annotations

import math

import numpy as np

from .graph import GraphBuilder, Value, spec

QTYPES = ("uint8", "int8")
SCALES = (0.5, 0.25, 0.125, 0.0625, 0.1, 0.05, 0.3, 0.02)


def _range(dtype: str) -> tuple:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _int_input(b: GraphBuilder, shape: tuple, dtype: str) -> Value:
    v = b.fresh_input(shape, "float32")  # registered as an input, then made an int8 one
    v.dtype, v.mag, v.err, v.lo = dtype, 255.0, 0.0, None
    lo, hi = _range(dtype)
    b.feeds[v.name] = b.rng.integers(lo, hi, shape, dtype=dtype, endpoint=True)
    return v


def _quantized(b: GraphBuilder, pred=lambda v: True, shape=None) -> Value | None:
    """An exact 8-bit value (an existing one, or a fresh full-range input)."""
    def make():
        return _int_input(b, shape or (int(b.choice([1, 2])), int(b.choice([3, 4, 8])),
                                       int(b.choice([5, 6, 7]))), b.choice(QTYPES))
    return b.pick(lambda v: v.dtype in QTYPES and v.exact and pred(v), make, p_fresh=0.4)


def _params(b: GraphBuilder, dtype: str, channels: int = 0) -> tuple:
    """(scale, zero point) initializers: per tensor, or per channel when channels > 0."""
    lo, hi = _range(dtype)
    n = channels or 1
    scale = np.array([b.choice(SCALES) for _ in range(n)], np.float32)
    zp = b.rng.integers(lo // 2, hi // 2 + 1, n).astype(dtype)
    if not channels:
        scale, zp = scale.reshape(()), zp.reshape(())
    return b.constant(scale), b.constant(zp)


def _steps(err: float, scale: float) -> float:
    """How many integer steps away from the reference a quantize of a value off by err can
    land (0 for an exact value)."""
    return 0.0 if err == 0 else float(math.ceil(err / scale + 1e-9))


def t_quantize(b: GraphBuilder) -> bool:
    x = b.pick(lambda v: v.dtype == "float32" and not v.nonfinite and v.rank >= 1,
               lambda: b.fresh_input((3, 4), "float32"))
    if x is None or x.dtype != "float32" or x.nonfinite:
        return False
    dtype = b.choice(QTYPES)
    per_axis = b.opset >= 13 and x.rank >= 1 and x.shape[-1] > 0 and b.chance(0.3)
    axis = int(b.rng.integers(0, x.rank)) if per_axis else 1
    scale, zp = _params(b, dtype, x.shape[axis] if per_axis else 0)
    steps = _steps(x.err, min(float(v) for v in np.ravel(_value(b, scale))))
    b.node("QuantizeLinear", [x, scale, zp],
           [spec(x.shape, dtype, 255.0, steps)], axis=axis if per_axis else None)
    return True


def _value(b: GraphBuilder, constant: Value) -> np.ndarray:
    from onnx import numpy_helper
    return next(numpy_helper.to_array(t) for t in b.initializers if t.name == constant.name)


def t_dequantize(b: GraphBuilder) -> bool:
    q = b.pick(lambda v: v.dtype in QTYPES, lambda: _int_input(b, (2, 5), b.choice(QTYPES)))
    if q is None or q.dtype not in QTYPES:
        return False
    scale, zp = _params(b, q.dtype)
    zp = b.constant(np.asarray(_value(b, zp)).astype(q.dtype))
    s = float(_value(b, scale))
    b.node("DequantizeLinear", [q, scale, zp],
           [spec(q.shape, "float32", 256 * s, q.err * s)])
    return True


def t_qlinear_matmul(b: GraphBuilder) -> bool:
    a = _quantized(b, lambda v: v.rank in (2, 3) and v.shape[-1] > 0)
    if a is None or a.rank not in (2, 3) or b.opset < 10:
        return False
    k, n = a.shape[-1], int(b.choice([1, 3, 8, 16]))
    w_dtype = "int8" if a.dtype == "int8" else b.choice(QTYPES)
    lo, hi = _range(w_dtype)
    w = b.constant(b.rng.integers(lo, hi, (k, n), dtype=w_dtype, endpoint=True))
    a_s, a_z = _params(b, a.dtype)
    w_s, w_z = _params(b, w_dtype)
    out = (*a.shape[:-1], n)
    if b.chance(0.5):
        b.node("MatMulInteger", [a, w, a_z, w_z], [spec(out, "int32", 65025.0 * k)])
        return True
    y_s, y_z = _params(b, a.dtype)
    b.node("QLinearMatMul", [a, a_s, a_z, w, w_s, w_z, y_s, y_z], [spec(out, a.dtype, 255.0)])
    return True


def t_qlinear_conv(b: GraphBuilder) -> bool:
    x = _quantized(b, lambda v: v.rank == 4 and 0 not in v.shape,
                   shape=(1, int(b.choice([2, 3, 4])), 6, 6))
    if x is None or x.rank != 4 or b.opset < 10:
        return False
    c, m, k = x.shape[1], int(b.choice([2, 4, 8])), int(b.choice([1, 3]))
    if k > min(x.shape[2:]):
        return False
    w_dtype = "int8" if x.dtype == "int8" else b.choice(QTYPES)
    lo, hi = _range(w_dtype)
    w = b.constant(b.rng.integers(lo, hi, (m, c, k, k), dtype=w_dtype, endpoint=True))
    pad = k // 2 if b.chance(0.5) else 0
    stride = int(b.choice([1, 1, 2]))
    out = (x.shape[0], m, *[(d + 2 * pad - k) // stride + 1 for d in x.shape[2:]])
    attrs = {"pads": [pad] * 4, "strides": [stride] * 2}
    x_s, x_z = _params(b, x.dtype)
    if b.chance(0.4):
        w_z = b.constant(np.zeros((), w_dtype) if w_dtype == "int8" else
                         np.array(128, w_dtype))
        b.node("ConvInteger", [x, w, x_z, w_z], [spec(out, "int32", 65025.0 * c * k * k)],
               **attrs)
        return True
    per_channel = b.chance(0.5)
    w_s = b.constant(np.array([b.choice(SCALES) for _ in range(m)], np.float32)
                     if per_channel else np.float32(b.choice(SCALES)))
    w_z = b.constant(np.zeros((), w_dtype) if w_dtype == "int8" else np.array(128, w_dtype))
    y_s, y_z = _params(b, x.dtype)
    ins = [x, x_s, x_z, w, w_s, w_z, y_s, y_z]
    if b.chance(0.5):
        ins.append(b.constant(b.rng.integers(-3000, 3000, m).astype(np.int32)))
    b.node("QLinearConv", ins, [spec(out, x.dtype, 255.0)], **attrs)
    return True


def t_qdq_region(b: GraphBuilder) -> bool:
    """dequantize -> a float op -> quantize: FakeQuantizationToInteger's input (up to
    four nodes: the weights' dequantize too)."""
    if not b.room(4):
        return False
    q = _quantized(b, lambda v: v.rank == 4 and 0 not in v.shape and v.shape[1] <= 8,
                   shape=(1, int(b.choice([2, 4])), 5, 5))
    if q is None or q.rank != 4:
        return False
    s, z = _params(b, q.dtype)
    scale = float(_value(b, s))
    (x,) = b.node("DequantizeLinear", [q, s, z], [spec(q.shape, "float32", 256 * scale)])
    kind = b.choice(["Conv", "Add", "MaxPool", "AveragePool", "Relu"])
    c = q.shape[1]
    if kind == "Conv":
        lo, hi = _range("int8")
        wq = b.constant(b.rng.integers(lo, hi, (c, c, 3, 3), dtype="int8", endpoint=True))
        ws, wz = b.constant(np.float32(0.01)), b.constant(np.zeros((), "int8"))
        (w,) = b.node("DequantizeLinear", [wq, ws, wz], [spec(wq.shape, "float32", 1.28)])
        mag = 256 * scale * 1.28 * 9 * c
        (y,) = b.node("Conv", [x, w], [spec(q.shape, "float32", mag, mag * 1e-6)],
                      pads=[1, 1, 1, 1])
    elif kind == "Add":
        (y,) = b.node("Add", [x, x], [spec(q.shape, "float32", 512 * scale)])
    elif kind == "MaxPool":
        (y,) = b.node("MaxPool", [x], [spec((1, c, 4, 4), "float32", 256 * scale)],
                      kernel_shape=[2, 2])
    elif kind == "AveragePool":
        (y,) = b.node("AveragePool", [x], [spec((1, c, 4, 4), "float32", 256 * scale,
                                                256 * scale * 1e-6)], kernel_shape=[2, 2])
    else:
        (y,) = b.node("Relu", [x], [spec(q.shape, "float32", 256 * scale)])
    out_s, out_z = _params(b, q.dtype)
    b.node("QuantizeLinear", [y, out_s, out_z],
           [spec(y.shape, q.dtype, 255.0, _steps(y.err, float(_value(b, out_s))))])
    return True


TEMPLATES = {t_quantize: 1.0, t_dequantize: 1.0, t_qlinear_matmul: 0.8, t_qlinear_conv: 0.8,
             t_qdq_region: 1.0}
