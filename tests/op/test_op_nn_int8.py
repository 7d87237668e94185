"""The packed int8 contractions (compiler.op.nn_int8), the rewrite of qnn.dense and qnn.conv2d
with a constant weight into them and qnn.batch_matmul's int8 kernel (compiler.op.strategy.int8):
packing references, and relay.build's results against numpy's integer math exactly, with and
without zero points (per tensor and per channel), int8 and uint8 operands, strides, padding
and dilation, a requantisation and activation fused after, on targets with and without
VNNI."""
from __future__ import annotations

import json

import numpy as np
import pytest

import runtime
from compiler import relay, transform
from compiler.driver.build import build_target, lower_module, optimize
from compiler.ir.module import IRModule
from compiler.op import nn_int8, qnn_math
from compiler.op.registry import get_def
from compiler.target import Target
from runtime import graph_executor
from runtime.target import host_info, resolve_cpu_target

from tests.op._opcheck import infer

# compiled through relay.build and compared with numpy below
OPS_TESTED = {"nn.contrib_dense_int8_weight_pack", "nn.contrib_dense_int8",
              "nn.contrib_conv2d_int8_weight_pack", "nn.contrib_conv2d_int8"}

RNG = np.random.default_rng(7)
# targets: the host (VNNI on this machine kind), AVX-512 and AVX2 without VNNI, AVX-VNNI
TARGETS = ["llvm", "llvm -mcpu=x86-64-v4", "llvm -mcpu=x86-64-v3",
           "llvm -mcpu=x86-64-v3 -mattr=+avxvnni"]


def _runnable(target: str) -> str:
    parts = dict(p.split("=", 1) for p in target.split()[1:])
    cpu = resolve_cpu_target(parts.get("-mcpu", ""), parts.get("-mattr", "").split(",")
                             if "-mattr" in parts else ())
    missing = set(cpu.enabled_features()) - set(host_info().enabled_features())
    if missing:
        pytest.skip(f"the host lacks {sorted(missing)}")
    return target


def _ints(dtype: str, shape) -> np.ndarray:
    lo, hi = qnn_math.dtype_range(dtype)
    return RNG.integers(lo, hi + 1, shape).astype(dtype)


def _build(func, target="llvm", opt_level=3):
    with transform.PassContext(opt_level=opt_level):
        lib = relay.build(IRModule.from_expr(func), target=target)
    return lib, graph_executor.GraphModule(lib["default"](runtime.cpu(0)))


@pytest.mark.parametrize("n,k,block", [(10, 33, 16), (64, 300, 48), (70, 5, 32)])
def test_dense_weight_pack_roundtrip_and_compute_rule(n, k, block):
    w = _ints("int8", (n, k))
    call = nn_int8.contrib_dense_int8_weight_pack(relay.const(w), block=block)
    wp = get_def("nn.contrib_dense_int8_weight_pack").reference([w], call.attrs)
    assert infer(call).shape == wp.shape == (-(-n // block), -(-k // 4), block, 4)
    np.testing.assert_array_equal(wp[0, 0, 2, :min(k, 4)], w[2, :4])  # four K values a lane
    np.testing.assert_array_equal(nn_int8.unpack_dense_int8_weight(wp, n, k), w)
    x = relay.var("w", shape=(n, k), dtype="int8")
    _, gm = _build(relay.Function([x], nn_int8.contrib_dense_int8_weight_pack(x, block=block)))
    gm.run(w=w)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), wp)  # what FoldConstant runs


def test_packed_dense_type_relation_refuses_misfits():
    d = relay.var("d", shape=(2, 30), dtype="uint8")
    with pytest.raises(Exception, match="does not fit"):
        infer(nn_int8.contrib_dense_int8(d, relay.var("w", shape=(1, 7, 48, 4), dtype="int8"),
                                         units=40))  # 30 values need 8 groups of four
    with pytest.raises(Exception, match="does not fit"):
        infer(nn_int8.contrib_dense_int8(relay.var("f", shape=(2, 32)),
                                         relay.var("w", shape=(1, 8, 48, 4), dtype="int8"),
                                         units=40))  # float data


def _qnn_dense(xdt, wdt, lead, n, k, zx, zw, per_channel, epilogue):
    x = _ints(xdt, (*lead, k))
    w = _ints(wdt, (n, k))
    zw_value = np.asarray(zw, "int32") if not per_channel else \
        RNG.integers(-4, 5, n).astype("int32") + (128 if wdt == "uint8" else 0)
    xv = relay.var("x", shape=x.shape, dtype=xdt)
    scale_w = relay.const(np.full(n, 0.02, "float32") if per_channel else np.float32(0.02))
    y = relay.qnn.op.dense(xv, relay.const(w), relay.const(zx, "int32"), relay.const(zw_value),
                           relay.const(0.05, "float32"), scale_w, units=n)
    centered = (x.astype(np.int64) - zx) @ (w.astype(np.int64) - zw_value.reshape(-1, 1)
                                             if per_channel else w.astype(np.int64) - zw).T
    want = centered.astype(np.int32)
    if epilogue == "requantize_relu":
        y = relay.qnn.op.requantize(y, relay.const(0.001), relay.const(0), relay.const(0.05),
                                    relay.const(5), out_dtype="uint8",
                                    rounding="TONEAREST_EVEN")
        y = relay.clip(y, 5, 255)  # a fused ReLU at the output zero point
        want = np.maximum(qnn_math.requantize(want, 0.001, 0, 0.05, 5, -1, "TONEAREST_EVEN",
                                              "float32", "uint8"), 5)
    elif epilogue == "dequantize":
        y = relay.multiply(relay.cast(y, "float32"), relay.const(0.001, "float32"))
        want = want.astype("float32") * np.float32(0.001)
    return relay.Function([xv], y), x, want


CASES = [  # data, weight, lead dims, N, K, data zero point, weight zero point, per channel
    ("uint8", "int8", (16,), 64, 32, 3, 0, False),
    ("uint8", "int8", (1, 7), 50, 33, 200, 0, False),
    ("int8", "int8", (7,), 50, 33, -5, 0, False),
    ("uint8", "uint8", (2, 5), 20, 64, 5, 128, False),
    ("uint8", "int8", (9,), 20, 35, 0, 3, False),
    ("int8", "uint8", (9,), 20, 35, 7, 0, True),
    ("uint8", "int8", (4,), 3, 4, 255, 0, False),
]


@pytest.mark.parametrize("xdt,wdt,lead,n,k,zx,zw,per_channel", CASES)
@pytest.mark.parametrize("target", TARGETS)
def test_qnn_dense_runs_the_int8_kernel_exactly(xdt, wdt, lead, n, k, zx, zw, per_channel,
                                                target):
    func, x, want = _qnn_dense(xdt, wdt, lead, n, k, zx, zw, per_channel, None)
    lib, gm = _build(func, _runnable(target))
    assert "nn_contrib_dense_int8" in lib.get_graph_json()
    gm.run(x=x)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


@pytest.mark.parametrize("epilogue", ["requantize_relu", "dequantize"])
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64-v3"])
def test_qnn_dense_epilogue_is_one_kernel(epilogue, target):
    """The int32 accumulator never reaches memory: the kernel writes uint8 (or float32)."""
    func, x, want = _qnn_dense("uint8", "int8", (13,), 64, 64, 9, 0, False, epilogue)
    lib, gm = _build(func, _runnable(target))
    graph = json.loads(lib.get_graph_json())
    kernels = [node["attrs"]["func_name"] for node in graph["nodes"] if node["op"] == "tvm_op"]
    assert len(kernels) == 1 and "nn_contrib_dense_int8" in kernels[0]
    gm.run(x=x)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


def test_run_time_data_zero_point():
    """A zero point computed at run time (DynamicQuantizeLinear's): its column term is
    computed per run, in the kernel's epilogue."""
    x = _ints("uint8", (5, 40))
    w = _ints("int8", (24, 40))
    xv, zv = relay.var("x", shape=x.shape, dtype="uint8"), relay.var("z", shape=(),
                                                                     dtype="int32")
    y = relay.qnn.op.dense(xv, relay.const(w), zv, relay.const(0), relay.const(1.0),
                           relay.const(1.0), units=24)
    lib, gm = _build(relay.Function([xv, zv], y))
    assert "nn_contrib_dense_int8" in lib.get_graph_json()
    for z in (0, 77, 255):
        gm.run(x=x, z=np.array(z, "int32"))
        np.testing.assert_array_equal(gm.get_output(0).numpy(),
                                      ((x.astype(np.int64) - z) @ w.T.astype(np.int64))
                                      .astype(np.int32))


def test_opt_level_2_packs_too_and_variable_weights_stay_generic():
    func, x, want = _qnn_dense("uint8", "int8", (6,), 30, 20, 4, 0, False, None)
    lib, gm = _build(func, opt_level=2)
    assert "nn_contrib_dense_int8" in lib.get_graph_json()
    gm.run(x=x)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)
    xv = relay.var("x", shape=(6, 20), dtype="uint8")
    wv = relay.var("w", shape=(30, 20), dtype="int8")
    y = relay.qnn.op.dense(xv, wv, relay.const(4), relay.const(0), relay.const(1.0),
                           relay.const(1.0), units=30)
    lib, gm = _build(relay.Function([xv, wv], y))
    assert "nn_contrib_dense_int8" not in lib.get_graph_json()


# ---- conv2d ----------------------------------------------------------------------------------


@pytest.mark.parametrize("k,c,block", [(20, 5, 16), (64, 64, 64), (3, 9, 32)])
def test_conv2d_weight_pack_roundtrip_and_compute_rule(k, c, block):
    w = _ints("int8", (k, c, 3, 2))
    call = nn_int8.contrib_conv2d_int8_weight_pack(relay.const(w), block=block)
    wp = get_def("nn.contrib_conv2d_int8_weight_pack").reference([w], call.attrs)
    assert infer(call).shape == wp.shape == (-(-k // block), -(-c // 4), 3, 2, block, 4)
    np.testing.assert_array_equal(wp[0, 0, 1, 1, 2, :min(c, 4)], w[2, :4, 1, 1])
    np.testing.assert_array_equal(nn_int8.unpack_conv2d_int8_weight(wp, k, c), w)
    x = relay.var("w", shape=w.shape, dtype="int8")
    _, gm = _build(relay.Function([x], nn_int8.contrib_conv2d_int8_weight_pack(x, block=block)))
    gm.run(w=w)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), wp)


def test_packed_conv2d_type_relation_refuses_misfits():
    d = relay.var("d", shape=(1, 5, 8, 8), dtype="uint8")
    pad = relay.const(0, "int32")
    with pytest.raises(Exception, match="does not fit"):  # 5 channels need 2 groups of four
        infer(nn_int8.contrib_conv2d_int8(d, relay.var("w", shape=(1, 1, 3, 3, 16, 4),
                                                       dtype="int8"), pad, channels=16))
    with pytest.raises(Exception, match="does not fit"):  # a float pad value
        infer(nn_int8.contrib_conv2d_int8(d, relay.var("w", shape=(1, 2, 3, 3, 16, 4),
                                                       dtype="int8"),
                                          relay.const(0.0), channels=16))


def _qnn_conv(xdt, wdt, xs, ws, zx, zw, strides, padding, dilation, epilogue):
    x, w = _ints(xdt, xs), _ints(wdt, ws)
    k = ws[0]
    xv = relay.var("x", shape=xs, dtype=xdt)
    y = relay.qnn.op.conv2d(xv, relay.const(w), relay.const(zx, "int32"),
                            relay.const(zw, "int32"), relay.const(0.05, "float32"),
                            relay.const(np.full(k, 0.02, "float32")), kernel_size=ws[2:],
                            channels=k, strides=strides, padding=padding, dilation=dilation)
    want = get_def("qnn.conv2d").reference(
        [x, w, np.int32(zx), np.int32(zw), np.float32(0.05), np.full(k, 0.02, "f4")], y.attrs)
    if epilogue:
        bias = RNG.integers(-2000, 2000, k).astype("int32")
        y = relay.nn.bias_add(y, relay.const(bias))
        y = relay.qnn.op.requantize(y, relay.const(np.full(k, 0.001, "float32")),
                                    relay.const(np.zeros(k, "int32")), relay.const(0.05),
                                    relay.const(5), axis=1, out_dtype="uint8",
                                    rounding="TONEAREST_EVEN")
        y = relay.clip(y, 5, 255)
        want = np.maximum(qnn_math.requantize(
            want + bias.reshape(-1, 1, 1), np.full(k, 0.001, "f4"), np.zeros(k, "i4"), 0.05, 5,
            1, "TONEAREST_EVEN", "float32", "uint8"), 5)
    return relay.Function([xv], y), x, want


CONV_CASES = [  # data, weight, data shape, weight shape, zx, zw, strides, padding, dilation
    ("uint8", "int8", (1, 8, 10, 10), (16, 8, 3, 3), 7, 0, (1, 1), (1, 1), (1, 1)),
    ("uint8", "int8", (2, 5, 9, 7), (20, 5, 3, 3), 200, 0, (2, 2), (1, 0, 2, 1), (1, 1)),
    ("int8", "int8", (1, 3, 17, 17), (24, 3, 7, 7), -3, 0, (2, 2), (3, 3), (1, 1)),
    ("uint8", "uint8", (1, 16, 12, 12), (70, 16, 1, 1), 0, 128, (1, 1), (0, 0), (1, 1)),
    ("uint8", "int8", (1, 16, 12, 12), (24, 16, 3, 3), 9, 0, (1, 1), (2, 2), (2, 2)),
    ("uint8", "int8", (1, 4, 5, 5), (3, 4, 5, 5), 255, 0, (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("xdt,wdt,xs,ws,zx,zw,strides,padding,dilation", CONV_CASES)
@pytest.mark.parametrize("target", TARGETS)
def test_qnn_conv2d_runs_the_int8_kernel_exactly(xdt, wdt, xs, ws, zx, zw, strides, padding,
                                                 dilation, target):
    func, x, want = _qnn_conv(xdt, wdt, xs, ws, zx, zw, strides, padding, dilation, False)
    lib, gm = _build(func, _runnable(target))
    assert "nn_contrib_conv2d_int8" in lib.get_graph_json()
    gm.run(x=x)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64-v3"])
def test_qnn_conv2d_requantize_and_relu_are_one_kernel(target):
    func, x, want = _qnn_conv("uint8", "int8", (1, 64, 9, 11), (96, 64, 3, 3), 3, 0, (1, 1),
                              (1, 1), (1, 1), True)
    lib, gm = _build(func, _runnable(target))
    graph = json.loads(lib.get_graph_json())
    kernels = [node["attrs"]["func_name"] for node in graph["nodes"] if node["op"] == "tvm_op"]
    assert len(kernels) == 1 and "nn_contrib_conv2d_int8" in kernels[0]
    gm.run(x=x)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


def test_a_weight_zero_point_keeps_the_generic_conv():
    """A nonzero weight zero point's term needs the windows' sums of x: the conv stays
    qnn.conv2d (its generic int32 reduction), still exact."""
    func, x, want = _qnn_conv("uint8", "int8", (1, 8, 6, 6), (8, 8, 3, 3), 4, 3, (1, 1),
                              (1, 1), (1, 1), False)
    lib, gm = _build(func)
    assert "nn_contrib_conv2d_int8" not in lib.get_graph_json()
    gm.run(x=x)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


# ---- batch_matmul (run-time operands) --------------------------------------------------------


BMM_CASES = [  # x, y dtypes and shapes, zero points, transpose_b
    ("uint8", "int8", (2, 16, 32), (2, 48, 32), 3, 0, True),
    ("int8", "int8", (3, 7, 33), (3, 50, 33), -5, 7, True),
    ("uint8", "uint8", (1, 7, 33), (4, 33, 50), 200, 128, False),
    ("int8", "uint8", (4, 9, 20), (1, 11, 20), 0, 3, True),
]


@pytest.mark.parametrize("xdt,ydt,xs,ys,zx,zy,transpose_b", BMM_CASES)
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64-v3"])
def test_qnn_batch_matmul_runs_the_int8_kernel_exactly(xdt, ydt, xs, ys, zx, zy, transpose_b,
                                                       target):
    x, y = _ints(xdt, xs), _ints(ydt, ys)
    xv, yv = relay.var("x", shape=xs, dtype=xdt), relay.var("y", shape=ys, dtype=ydt)
    call = relay.qnn.op.batch_matmul(xv, yv, relay.const(zx), relay.const(zy),
                                     relay.const(0.5), relay.const(0.25),
                                     transpose_b=transpose_b)
    func = relay.Function([xv, yv], call)
    _runnable(target)
    with transform.PassContext(opt_level=3), build_target(Target(target)) as options:
        _, funcs = lower_module(optimize(IRModule.from_expr(func))["main"], options=options)
    assert "relayjit.ukr.dot8" in "".join(str(f) for f in funcs)
    _, gm = _build(func, target)
    gm.run(x=x, y=y)
    want = get_def("qnn.batch_matmul").reference(
        [x, y, np.int32(zx), np.int32(zy), np.float32(0.5), np.float32(0.25)], call.attrs)
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


def test_a_run_time_conv_zero_point_of_unknown_range_keeps_the_generic_conv():
    """The int8 conv pads with the data zero point's byte: a zero point fed at run time as an
    int32 may lie outside uint8, so the conv stays generic; one cast from uint8 (ONNX's) is
    in range and takes the int8 kernel. Both exact."""
    x, w = _ints("uint8", (1, 8, 6, 6)), _ints("int8", (8, 8, 3, 3))
    for zdtype, fast in (("int32", False), ("uint8", True)):
        xv, zv = relay.var("x", shape=x.shape, dtype="uint8"), relay.var("z", shape=(),
                                                                         dtype=zdtype)
        y = relay.qnn.op.conv2d(xv, relay.const(w), relay.cast(zv, "int32"), relay.const(0),
                                relay.const(0.05), relay.const(0.02), kernel_size=(3, 3),
                                channels=8, padding=(1, 1))
        lib, gm = _build(relay.Function([xv, zv], y))
        assert ("nn_contrib_conv2d_int8" in lib.get_graph_json()) == fast
        for z in (0, 200):
            gm.run(x=x, z=np.array(z, zdtype))
            want = get_def("qnn.conv2d").reference([x, w, np.int32(z), np.int32(0),
                                                    np.float32(0.05), np.float32(0.02)],
                                                   y.attrs)
            np.testing.assert_array_equal(gm.get_output(0).numpy(), want)
