"""QNN ops compiled (generic path) against their numpy references, bit for bit: scales and
zero points fed at run time, per tensor and per channel, with exact ties and saturation."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.op import qnn_math
from tests.codegen_ops.lowering_harness import check_op, run_op

OPS_TESTED = {"qnn.quantize", "qnn.dequantize", "qnn.requantize", "qnn.simulated_quantize",
              "qnn.simulated_dequantize", "qnn.conv2d", "qnn.conv2d_transpose", "qnn.dense",
              "qnn.batch_matmul", "qnn.add", "qnn.subtract", "qnn.mul", "qnn.concatenate",
              "qnn.avg_pool2d", "qnn.sigmoid", "qnn.tanh", "qnn.exp", "qnn.erf", "qnn.sqrt",
              "qnn.rsqrt", "qnn.log", "qnn.abs", "qnn.hardswish", "qnn.leaky_relu",
              "qnn.softmax"}
RNG = np.random.default_rng(7)


def f32(v):
    return np.asarray(v, "float32")


def i32(v):
    return np.asarray(v, "int32")


def _ints(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("out_dtype", ["uint8", "int8", "int16", "int32"])
def test_quantize_ties_saturation_nan(out_dtype):
    x = RNG.standard_normal((4, 6)).astype("float32") * 300
    x[0] = [0.5, 1.5, -2.5, np.nan, np.inf, -np.inf]
    x[1, :3] = [3e9, -3e9, 2.5e9]
    check_op("qnn.quantize", [x, f32(0.5), i32(3)], axis=1, out_dtype=out_dtype)
    check_op("qnn.quantize", [x, f32([0.5, 1, 0.25, 2, 4, 0.125]), i32([1, 2, 3, 4, 5, 6])],
             axis=1, out_dtype=out_dtype)


def test_quantize_blocked_params_and_float16_input():
    x = (RNG.standard_normal((3, 4)) * 20).astype("float16")
    check_op("qnn.quantize", [x, f32(RNG.random((3, 1)) + 0.1), i32([[1], [2], [3]])],
             axis=1, out_dtype="int8")


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32"])
def test_dequantize(dtype):
    q = _ints((3, 5), dtype) if dtype != "int32" else RNG.integers(-2 ** 30, 2 ** 30, (3, 5),
                                                                   dtype="int32")
    check_op("qnn.dequantize", [q, f32([0.5, 0.1, 3, 2, 1e-3]), i32([1, 0, -4, 7, 2])],
             axis=1)
    check_op("qnn.dequantize", [q, f32(0.02), i32(5)], axis=-1, out_dtype="float16",
             rtol=0, atol=0)


@pytest.mark.parametrize("compute", qnn_math.COMPUTE_DTYPES)
@pytest.mark.parametrize("rounding", qnn_math.ROUNDINGS)
def test_requantize_every_mode(compute, rounding):
    acc = RNG.integers(-200000, 200000, (6, 8)).astype("int32")
    acc[0] = np.arange(-4, 4) * 8 + 4  # exact halves for a ratio of 1/8 and 1/16
    acc[1, :4] = [2 ** 31 - 1, -2 ** 31, 2 ** 30, -2 ** 30]
    scales = f32([1, 0.5, 0.25, 0.003, 1e-4, 7.0, 1e-6, 3.0])
    for out_dtype in ("int8", "uint8", "int32"):
        check_op("qnn.requantize", [acc, scales, i32(3), f32(8.0), i32(-5 if out_dtype != "uint8"
                                                                     else 100)],
                 axis=1, rounding=rounding, compute_dtype=compute, out_dtype=out_dtype)
    check_op("qnn.requantize", [_ints((6, 8), "uint8"), f32(0.3), i32(128), f32(0.7), i32(0)],
             axis=-1, rounding=rounding, compute_dtype=compute, out_dtype="int8")


def test_simulated_quantize_and_dequantize_codes():
    x = RNG.standard_normal((2, 5)).astype("float32") * 50
    for code in (0, 1, 2, 3):
        check_op("qnn.simulated_quantize", [x, i32(code), f32([0.5]), i32([3])], axis=-1)
        check_op("qnn.simulated_dequantize", [x.round(), i32(code), f32([0.5] * 5),
                                              i32([3] * 5)], axis=1)


@pytest.mark.parametrize("layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
def test_conv2d_per_channel_zero_points(layout):
    data_layout, kernel_layout = layout
    x = _ints((1, 5, 7, 7), "uint8")
    w = _ints((6, 5, 3, 3), "int8")
    if data_layout == "NHWC":
        x, w = x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy()
    check_op("qnn.conv2d", [x, w, i32(131), i32(np.arange(6) - 3), f32(0.1), f32(np.ones(6))],
             strides=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 1), groups=1, channels=6,
             kernel_size=(3, 3), data_layout=data_layout, kernel_layout=kernel_layout,
             out_layout="", out_dtype="int32")


def test_grouped_conv2d_and_transpose():
    x = _ints((1, 4, 6, 6), "int8")
    check_op("qnn.conv2d", [x, _ints((4, 2, 3, 3), "int8"), i32(-3), i32(2), f32(1), f32(1)],
             strides=(1, 1), padding=(1, 1, 1, 1), dilation=(2, 2), groups=2, channels=4,
             kernel_size=(3, 3), data_layout="NCHW", kernel_layout="OIHW", out_layout="",
             out_dtype="int32")
    check_op("qnn.conv2d_transpose", [_ints((1, 3, 4, 4), "uint8"),
                                      _ints((3, 2, 3, 3), "int8"), i32(120), i32([1, -1]),
                                      f32(1), f32([1, 1])],
             channels=2, kernel_size=(3, 3), strides=(2, 2), padding=(1, 1, 0, 0),
             output_padding=(1, 1), dilation=(1, 1), groups=1, data_layout="NCHW",
             kernel_layout="IOHW", out_layout="", out_dtype="int32")


def test_dense_and_batch_matmul():
    check_op("qnn.dense", [_ints((2, 3, 40), "uint8"), _ints((7, 40), "int8"), i32(128),
                           i32(np.arange(7)), f32(0.1), f32(np.ones(7))], units=7,
             out_dtype="int32")
    for ta, tb in ((False, True), (True, False)):
        a = _ints((2, 5, 9) if not ta else (2, 9, 5), "int8")
        b = _ints((2, 6, 9) if tb else (2, 9, 6), "uint8")
        check_op("qnn.batch_matmul", [a, b, i32(-2), i32(130), f32(1), f32(1)],
                 out_dtype="int32", transpose_a=ta, transpose_b=tb)


@pytest.mark.parametrize("op", ["qnn.add", "qnn.subtract", "qnn.mul"])
def test_binary(op):
    lhs, rhs = _ints((3, 1, 5), "int8"), _ints((4, 1), "int8")
    check_op(op, [lhs, rhs, f32(0.1), i32(3), f32(0.05), i32(-10), f32(0.2), i32(7)],
             lhs_axis=-1, rhs_axis=-1)


def test_concatenate_requantizes_only_what_differs():
    parts = (_ints((2, 3), "uint8"), _ints((1, 3), "uint8"))
    check_op("qnn.concatenate", [parts, (f32(0.1), f32(0.3)), (i32(3), i32(9)), f32(0.2),
                                 i32(7)], axis=0)


@pytest.mark.parametrize("count_include_pad, ceil_mode", [(False, True), (True, False)])
def test_avg_pool2d_integer_window_sums(count_include_pad, ceil_mode):
    x = _ints((1, 3, 9, 9), "uint8")
    check_op("qnn.avg_pool2d", [x, f32(0.1), i32(128), f32(0.07), i32(100)],
             pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1), dilation=(1, 1),
             ceil_mode=ceil_mode, count_include_pad=count_include_pad, layout="NCHW",
             out_layout="")
    check_op("qnn.avg_pool2d", [x.transpose(0, 2, 3, 1).copy(), f32(0.1), i32(128), f32(0.09),
                                i32(100)],
             pool_size=(9, 9), strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
             ceil_mode=False, count_include_pad=False, layout="NHWC", out_layout="")


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "exp", "erf", "sqrt", "rsqrt", "log",
                                  "abs", "hardswish", "leaky_relu", "softmax"])
def test_activations_within_one_step(name):
    """quantize(f(dequantize(x))): the compiled f may differ from numpy's in the last bit,
    which moves a result across a rounding boundary by at most one step."""
    x = np.arange(256, dtype="int32").astype("uint8").reshape(4, 64)
    zp = i32(0 if name in ("sqrt", "rsqrt", "log") else 128)
    attrs = {"alpha": 0.1} if name == "leaky_relu" else {"axis": -1} if name == "softmax" \
        else {}
    got, want = run_op(f"qnn.{name}", [x, f32(0.03), zp, f32(0.05), i32(60)], **attrs)
    assert got[0].dtype == want[0].dtype == np.uint8
    diff = np.abs(got[0].astype(int) - want[0].astype(int))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.05, (diff.max(), (diff > 0).mean())
