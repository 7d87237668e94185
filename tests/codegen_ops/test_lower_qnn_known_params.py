"""QNN ops whose scales and zero points are constants: relay.build copies scalar ones into the
kernel (InlineQuantizationScalars), and the compute rules then saturate in float32 with known
bounds and subtract known zero points in int32 (compiler/op/compute/qnn.py `known`). Each is
compared bit for bit with qnn_math, at the edges: ties, NaN and infinities, values far out of
range, zero points at the ends of their types, wide outputs (float64 still); a zero point fed
as uint8 has a known range (float32 too)."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from compiler import relay, transform
from compiler.ir.module import IRModule
from compiler.driver.build import build_target, lower_module, optimize
from compiler.ir import structural_equal
from compiler.ir.traversal import post_order
from compiler.op import qnn_math
from compiler.target import Target
from runtime import graph_executor

RNG = np.random.default_rng(17)


def _run(func, x: np.ndarray) -> np.ndarray:
    with transform.PassContext(opt_level=3):
        lib = relay.build(IRModule.from_expr(func), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.run(x=x)
    return gm.get_output(0).numpy()


def _floats(shape) -> np.ndarray:
    x = (RNG.standard_normal(shape) * 300).astype("float32")
    x.flat[:9] = [0.5, 1.5, -2.5, np.nan, np.inf, -np.inf, 3e9, -3e9, 2.5e9]
    return x


@pytest.mark.parametrize("out_dtype,zp", [("uint8", 0), ("uint8", 255), ("int8", -128),
                                          ("int8", 127), ("int16", 32767), ("int32", 0),
                                          ("int32", -2 ** 31 + 5), ("uint16", 40000)])
def test_quantize_with_known_parameters(out_dtype, zp):
    x = _floats((5, 7))
    xv = relay.var("x", shape=x.shape)
    y = relay.qnn.op.quantize(xv, relay.const(0.5), relay.const(zp), out_dtype=out_dtype)
    got = _run(relay.Function([xv], y), x)
    np.testing.assert_array_equal(got, qnn_math.quantize(x, 0.5, zp, -1, out_dtype))


@pytest.mark.parametrize("dtype,zp", [("uint8", 0), ("uint8", 200), ("int8", -128),
                                      ("int16", -32768), ("int32", 2 ** 31 - 1)])
def test_dequantize_with_known_zero_point(dtype, zp):
    info = np.iinfo(dtype)
    q = RNG.integers(info.min, info.max, (4, 9), dtype=dtype, endpoint=True)
    q.flat[:2] = [info.min, info.max]
    xv = relay.var("x", shape=q.shape, dtype=dtype)
    y = relay.qnn.op.dequantize(xv, relay.const(0.0037), relay.const(zp))
    got = _run(relay.Function([xv], y), q)
    np.testing.assert_array_equal(got, qnn_math.dequantize(q, 0.0037, zp, -1))


@pytest.mark.parametrize("out_dtype,out_zp", [("uint8", 7), ("int8", -3), ("int16", 100),
                                              ("int32", 12345)])
@pytest.mark.parametrize("in_zp", [0, -17])
def test_requantize_with_known_zero_points(out_dtype, out_zp, in_zp):
    acc = RNG.integers(-200000, 200000, (6, 8)).astype("int32")
    acc[0] = np.arange(-4, 4) * 8 + 4  # exact halves for a ratio of 1/8
    acc[1, :4] = [2 ** 31 - 1, -2 ** 31, 2 ** 30, -2 ** 30]
    scales = np.array([1, 0.5, 0.25, 0.003, 1e-4, 7.0, 1e-6, 3.0], "float32")
    xv = relay.var("x", shape=acc.shape, dtype="int32")
    y = relay.qnn.op.requantize(xv, relay.const(scales), relay.const(in_zp), relay.const(8.0),
                                relay.const(out_zp), axis=1, rounding="TONEAREST_EVEN",
                                compute_dtype="float32", out_dtype=out_dtype)
    got = _run(relay.Function([xv], y), acc)
    want = qnn_math.requantize(acc, scales, in_zp, 8.0, out_zp, 1, "TONEAREST_EVEN",
                               "float32", out_dtype)
    np.testing.assert_array_equal(got, want)


def _kernels(func) -> str:
    """The text of the PrimFuncs relay.build lowers func to."""
    mod = IRModule.from_expr(func)
    with transform.PassContext(opt_level=3), build_target(Target("llvm")) as options:
        main = optimize(mod)["main"]
        _, funcs = lower_module(main, options=options)
    return "\n".join(str(f) for f in funcs)


def test_known_parameters_keep_the_kernel_in_float32():
    """Constant scalars: the quantize's saturation is float32; a zero point fed at run time
    keeps it float64 (exact for any int32 zero point)."""
    xv = relay.var("x", shape=(2, 16))
    known = relay.qnn.op.quantize(xv, relay.const(0.5), relay.const(3), out_dtype="uint8")
    assert "float64" not in _kernels(relay.Function([xv], known))
    zv = relay.var("z", shape=(), dtype="int32")
    fed = relay.qnn.op.quantize(xv, relay.const(0.5), zv, out_dtype="uint8")
    assert "float64" in _kernels(relay.Function([xv, zv], fed))


def test_scalar_constants_stay_parameters_outside_qnn_functions():
    """InlineQuantizationScalars leaves FuseOps' (TVM's) parameters of other functions, and
    copies them into a function with a QNN op."""
    xv = relay.var("x", shape=(2, 16))
    c = relay.const(2.0)
    plain = relay.add(relay.exp(relay.multiply(xv, c)), relay.nn.relu(relay.add(xv, c)))
    fuse = transform.Sequential([relay.transform.InferType(), relay.transform.FuseOps(),
                                 relay.transform.InferType()])
    with transform.PassContext(opt_level=3):
        fused = fuse(IRModule.from_expr(relay.Function([xv], plain)))
        assert structural_equal(relay.transform.InlineQuantizationScalars()(fused), fused)
        zp = relay.const(3)  # read by two fused functions: a parameter of each
        q = relay.qnn.op.quantize(relay.multiply(xv, c), c, zp, out_dtype="uint8")
        total = relay.sum(relay.qnn.op.dequantize(q, c, zp), axis=1, keepdims=True)
        q = relay.qnn.op.quantize(total, c, zp, out_dtype="uint8")
        fused = fuse(IRModule.from_expr(relay.Function([xv], q)))
        inlined = relay.transform.InlineQuantizationScalars()(fused)
    assert not structural_equal(inlined, fused)
    calls = [n for n in post_order(inlined["main"].body)
             if isinstance(n, relay.Call) and isinstance(n.op, relay.Function)]
    assert len(calls) == 2 and all(len(call.args) == 1 for call in calls)  # only data passed


def test_a_zero_point_fed_as_uint8_keeps_float32():
    """A zero point fed at run time through a cast from uint8 (ONNX's zero points) has a known
    range: the saturation is float32 too, and exact at the range's ends."""
    x = _floats((5, 7))
    xv, zv = relay.var("x", shape=x.shape), relay.var("z", shape=(), dtype="uint8")
    y = relay.qnn.op.quantize(xv, relay.const(0.5), relay.cast(zv, "int32"),
                              out_dtype="uint8")
    func = relay.Function([xv, zv], y)
    assert "float64" not in _kernels(func)
    with transform.PassContext(opt_level=3):
        lib = relay.build(IRModule.from_expr(func), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    for zp in (0, 128, 255):
        gm.run(x=x, z=np.array(zp, "uint8"))
        np.testing.assert_array_equal(gm.get_output(0).numpy(),
                                      qnn_math.quantize(x, 0.5, zp, -1, "uint8"))
