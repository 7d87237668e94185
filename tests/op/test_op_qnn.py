"""QNN ops: the numpy semantics (TVM's requantize goldens, ONNX's rounding and saturation),
type relations and constructors."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.errors import CompilerError, TypeInferenceError
from compiler.op import qnn_math
from tests.op._opcheck import check, infer

RNG = np.random.default_rng(23)
ROUNDINGS = ("UPWARD", "TONEAREST")


def _requant(data, in_scale, out_scale, in_zp=0, out_zp=0, axis=-1, rounding="UPWARD",
             compute="int64", out_dtype="int8"):
    return qnn_math.requantize(np.asarray(data, "int32"), np.asarray(in_scale, "float32"),
                               np.asarray(in_zp, "int32"), np.asarray(out_scale, "float32"),
                               np.asarray(out_zp, "int32"), axis, rounding, compute, out_dtype)


@pytest.mark.parametrize("compute", qnn_math.COMPUTE_DTYPES)
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_requantize_downscale_goldens_from_tvm(compute, rounding):
    """tests/python/relay/test_op_qnn_requantize.py::test_downscale / test_zero_point."""
    up = rounding == "UPWARD"
    assert (_requant(np.arange(32), 1, 16, rounding=rounding, compute=compute)
            == np.repeat([0, 1, 2], [8, 16, 8])).all()
    assert (_requant(np.arange(0, -32, -1), 1, 16, rounding=rounding, compute=compute)
            == np.repeat([0, -1, -2], [9, 16, 7] if up else [8, 16, 8])).all()
    assert (_requant(np.arange(0, -32, -1), 1, 4, rounding=rounding, compute=compute)
            == np.repeat(np.arange(0, -9, -1), [3, 4, 4, 4, 4, 4, 4, 4, 1] if up
                         else [2, 4, 4, 4, 4, 4, 4, 4, 2])).all()
    assert (_requant(np.arange(-32, -64, -1), 1, 16, out_zp=1, rounding=rounding,
                     compute=compute)
            == np.repeat([-2, -3, -4], [9, 16, 7] if up else [8, 16, 8]) + 1).all()
    assert (_requant(np.arange(32, 64), 1, 16, in_zp=16, rounding=rounding, compute=compute,
                     out_dtype="int16") == np.repeat([2, 3, 4], [8, 16, 8]) - 1).all()


@pytest.mark.parametrize("compute", qnn_math.COMPUTE_DTYPES)
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_requantize_per_channel_and_saturation_goldens_from_tvm(compute, rounding):
    data = np.arange(-5, 5).reshape(5, 2)
    assert (_requant(data, [0.5, 0.25], 0.5, axis=1, rounding=rounding, compute=compute)
            == np.array([-5, -2, -3, -1, -1, 0, 1, 1, 3, 2]).reshape(5, 2)).all()
    assert (_requant(data, [1.0, 0.25], 0.5, axis=1, rounding=rounding, compute=compute)
            == np.array([-10, -2, -6, -1, -2, 0, 2, 1, 6, 2]).reshape(5, 2)).all()
    data = np.arange(-20, 20, 2).reshape(2, 2, 5)
    assert (_requant(data, [0.5, 0.25], 0.5, axis=1, rounding=rounding, compute=compute)
            == np.array([-20, -18, -16, -14, -12, -5, -4, -3, -2, -1, 0, 2, 4, 6, 8, 5, 6, 7,
                         8, 9]).reshape(2, 2, 5)).all()
    assert (_requant(120 + np.arange(16), 0.5, 0.5, rounding=rounding, compute=compute)
            == np.minimum(120 + np.arange(16), 127)).all()
    assert (_requant(-32760 - np.arange(16), 0.5, 0.5, rounding=rounding, compute=compute,
                     out_dtype="int16") == np.maximum(-32760 - np.arange(16), -32768)).all()


@pytest.mark.parametrize("compute", qnn_math.COMPUTE_DTYPES)
def test_requantize_ties_to_even(compute):
    """TONEAREST_EVEN (ONNX, onnxruntime) rounds exact halves to the even neighbour."""
    out = _requant(np.arange(-8, 9), 1, 4, rounding="TONEAREST_EVEN", compute=compute)
    assert (out == np.rint(np.arange(-8, 9) / 4)).all()
    # the output zero point is added after rounding: 2.5 -> 2, then + 1
    assert _requant([10], 1, 4, out_zp=1, rounding="TONEAREST_EVEN", compute=compute)[0] == 3


def test_float32_requantize_is_onnxruntime_formula():
    """round_half_even(float32(acc) * float32(in_scale / out_scale)) + zp, saturated."""
    acc = RNG.integers(-2 ** 31, 2 ** 31 - 1, 5000).astype("int32")
    acc[:4] = [2 ** 31 - 1, -2 ** 31, 0, 7]
    in_scale, out_scale = np.float32(0.00123), np.float32(0.0517)
    want = np.clip(np.rint(acc.astype("float32") * (in_scale / out_scale)).astype("int64")
                   + 9, 0, 255)
    got = _requant(acc, in_scale, out_scale, out_zp=9, rounding="TONEAREST_EVEN",
                   compute="float32", out_dtype="uint8")
    np.testing.assert_array_equal(got, want)


def test_fixed_point_multiplier_matches_tvm():
    assert qnn_math.fixed_point_multiplier_shift(1 / 16) == (1 << 30, -3)
    assert qnn_math.fixed_point_multiplier_shift(1 / 3) == (1431655765, -1)
    assert qnn_math.fixed_point_multiplier_shift(0.0) == (0, 0)
    # a significand that rounds up to 2^31 carries into the exponent
    fixed, shift = qnn_math.fixed_point_multiplier_shift(1 - 2.0 ** -40)
    assert (fixed, shift) == (1 << 30, 1)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "int32"])
def test_quantize_rounds_half_to_even_and_saturates(dtype):
    x = np.array([-1e10, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1e10, np.inf, -np.inf, np.nan],
                 "float32")
    lo, hi = qnn_math.dtype_range(dtype)
    got = qnn_math.quantize(x, np.float32(1.0), np.int32(3), -1, dtype)
    want = [lo, 1, 1, 3, 3, 5, 5, hi, hi, lo, lo]
    np.testing.assert_array_equal(got, np.array(want, dtype))


def test_dequantize_per_axis_and_blocked_params():
    q = RNG.integers(-128, 127, (2, 3, 4)).astype("int8")
    scale, zp = np.array([0.5, 0.25, 2.0], "float32"), np.array([1, -2, 3], "int32")
    got = qnn_math.dequantize(q, scale, zp, 1)
    want = (q.astype("float32") - zp.reshape(3, 1)) * scale.reshape(3, 1)
    np.testing.assert_array_equal(got, want)
    blocked = RNG.random((2, 1, 4)).astype("float32")  # rank-3 params broadcast
    np.testing.assert_array_equal(qnn_math.dequantize(q, blocked, np.int32(0), 1),
                                  q.astype("float32") * blocked)


def _v(name, shape, dtype):
    return relay.var(name, shape=shape, dtype=dtype)


def test_type_relations():
    x = _v("x", (2, 3), "float32")
    q = relay.qnn.op.quantize(x, relay.const(0.5), relay.const(0), axis=1, out_dtype="uint8")
    assert infer(q) == relay.TensorType((2, 3), "uint8")
    d = relay.qnn.op.dequantize(_v("q", (2, 3), "int8"), relay.const(np.ones(3, "f4")),
                                relay.const(np.zeros(3, "i4")), axis=1)
    assert infer(d) == relay.TensorType((2, 3), "float32")
    conv = relay.qnn.op.conv2d(_v("d", (1, 4, 8, 8), "uint8"), _v("w", (6, 4, 3, 3), "int8"),
                               relay.const(1), relay.const(np.zeros(6, "i4")),
                               relay.const(0.1), relay.const(np.ones(6, "f4")), (3, 3), 6,
                               padding=(1, 1))
    assert infer(conv) == relay.TensorType((1, 6, 8, 8), "int32")
    dense = relay.qnn.op.dense(_v("a", (3, 16), "int8"), _v("b", (5, 16), "int8"),
                               relay.const(0), relay.const(0), relay.const(1.0),
                               relay.const(1.0), units=5)
    assert infer(dense) == relay.TensorType((3, 5), "int32")
    cat = relay.qnn.op.concatenate([_v("c0", (2, 3), "uint8"), _v("c1", (4, 3), "uint8")],
                                   [relay.const(0.1), relay.const(0.2)],
                                   [relay.const(0), relay.const(1)], relay.const(0.3),
                                   relay.const(2), axis=0)
    assert infer(cat) == relay.TensorType((6, 3), "uint8")


@pytest.mark.parametrize("make, message", [
    (lambda: relay.qnn.op.quantize(_v("x", (2, 3), "float32"), relay.const(np.ones(2, "f4")),
                                   relay.const(0), axis=1),
     r"output_scale has 2 values but axis 1 of the data \(2, 3\) has 3"),
    (lambda: relay.qnn.op.quantize(_v("x", (2, 3), "float32"), relay.const(1),
                                   relay.const(0)), "output_scale must be float32, got int32"),
    (lambda: relay.qnn.op.dequantize(_v("x", (2, 3), "float32"), relay.const(1.0),
                                     relay.const(0)), "data must have one of the dtypes"),
    (lambda: relay.qnn.op.conv2d(_v("d", (1, 4, 8, 8), "uint8"), _v("w", (6, 4, 3, 3), "int8"),
                                 relay.const(np.zeros(4, "i4")), relay.const(0),
                                 relay.const(0.1), relay.const(1.0), (3, 3), 6),
     "input_zero_point must be a scalar"),
    (lambda: relay.qnn.op.requantize(_v("a", (4,), "int32"), relay.const(1.0), relay.const(0),
                                     relay.const(1.0), relay.const(0), out_dtype="float32"),
     "out_dtype must be one of"),
])
def test_type_relation_errors_name_the_argument(make, message):
    with pytest.raises(TypeInferenceError, match=message):
        infer(make())


def test_requantize_config_fills_unset_attributes():
    a = _v("a", (4,), "int32")
    args = (a, relay.const(1.0), relay.const(0), relay.const(16.0), relay.const(0))
    assert relay.qnn.op.requantize(*args).attrs.rounding == "UPWARD"
    with relay.qnn.op.requantize_config(rounding="TONEAREST", compute_dtype="int64"):
        call = relay.qnn.op.requantize(*args)
        assert relay.qnn.op.current_requantize_config().rounding == "TONEAREST"
    assert (call.attrs.rounding, call.attrs.compute_dtype) == ("TONEAREST", "int64")
    assert relay.qnn.op.requantize(*args, rounding="TONEAREST_EVEN").attrs.rounding == \
        "TONEAREST_EVEN"
    with pytest.raises(CompilerError, match="rounding must be one of"):
        relay.qnn.op.requantize_config(rounding="DOWN")


def test_composite_references_follow_their_definitions():
    """qnn.add is quantize(dequantize(lhs) + dequantize(rhs)); qnn.avg_pool2d the int32 window
    sum scaled once by in_scale / (out_scale * taps)."""
    lhs = RNG.integers(0, 255, (3, 4)).astype("uint8")
    rhs = RNG.integers(0, 255, (4,)).astype("uint8")
    call = relay.qnn.op.add(_v("l", (3, 4), "uint8"), _v("r", (4,), "uint8"),
                            relay.const(0.1), relay.const(3), relay.const(0.05),
                            relay.const(100), relay.const(0.2), relay.const(7))
    ls, rs, os = np.float32(0.1), np.float32(0.05), np.float32(0.2)
    want = qnn_math.quantize((lhs.astype("f4") - 3) * ls + (rhs.astype("f4") - 100) * rs,
                             os, np.int32(7), -1, "uint8")
    got = check(call, lhs, rhs, *[c.data.numpy() for c in call.args[2:]])
    np.testing.assert_array_equal(got, want)
    x = RNG.integers(0, 255, (1, 2, 4, 4)).astype("uint8")
    pool = relay.qnn.op.avg_pool2d(_v("x", x.shape, "uint8"), relay.const(0.1),
                                   relay.const(10), relay.const(0.3), relay.const(4), (4, 4),
                                   (1, 1), (0, 0), (1, 1))
    got = check(pool, x, *[c.data.numpy() for c in pool.args[1:]])
    sums = (x.astype("int64") - 10).sum(axis=(2, 3), keepdims=True).astype("float32")
    m = np.float32(0.1) / (np.float32(0.3) * np.float32(16))
    want = np.clip(np.rint(sums * m) + 4, 0, 255).astype("uint8")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make, message", [
    (lambda: relay.qnn.op.quantize(_v("x", (3,), "float32"), relay.const(0.0), relay.const(0)),
     "qnn.quantize: the scale must be finite and non-zero, got \\[0.0\\]"),
    (lambda: relay.qnn.op.quantize(_v("x", (3,), "float32"), relay.const(1.0),
                                   relay.const(300), out_dtype="uint8"),
     r"qnn.quantize: the zero point \[300\] is outside the range \[0, 255\] of uint8"),
    (lambda: relay.qnn.op.requantize(_v("a", (3,), "int32"), relay.const(np.array(
        [1.0, np.nan, 2.0], "f4")), relay.const(0), relay.const(1.0), relay.const(0)),
     r"qnn.requantize: the scale must be finite and non-zero, got \[nan\]"),
])
def test_constant_parameters_are_checked_at_construction(make, message):
    with pytest.raises(CompilerError, match=message):
        make()
