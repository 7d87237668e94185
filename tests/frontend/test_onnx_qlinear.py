"""ONNX's integer contractions and com.microsoft's QOperator ops against onnxruntime: integer
results bit for bit on random data with exact ties and saturation (float-internal ops within
one step), through relay.build; each imports as QNN ops, not float math."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import from_onnx
from compiler.ir.traversal import post_order

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(17)
ELEM = {"float32": TensorProto.FLOAT, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8,
        "int32": TensorProto.INT32}


def _ints(shape, dtype, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, info.max if hi is None else hi, shape,
                        dtype=dtype, endpoint=True)


def _run(nodes, feeds: dict, consts: dict, outputs: dict, opset: int = 21,
         oracle: str = "onnxruntime"):
    """(the oracle's outputs, relayjit's outputs, the QNN ops in the imported program); the
    oracle is onnxruntime, or ONNX's reference for zero-point layouts onnxruntime refuses."""
    from compiler import relay
    from runtime import cpu, graph_executor
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, ELEM[v.dtype.name], v.shape)
                     for k, v in feeds.items()],
        [helper.make_tensor_value_info(k, ELEM[dtype], shape)
         for k, (dtype, shape) in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    if oracle == "reference":
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(model).run(None, feeds)
    else:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
    mod, params = from_onnx(model)
    ops = {n.op.name for n in post_order(mod["main"].body)
           if hasattr(n, "op") and hasattr(n.op, "name")}
    module = graph_executor.GraphModule(relay.build(mod, target="llvm", params=params)
                                        ["default"](cpu(0)))
    module.run(**feeds)
    got = [module.get_output(i).numpy() for i in range(len(want))]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
    return want, got, ops


def _exact(want, got):
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def _within_one_step(want, got, share: float = 0.02):
    for w, g in zip(want, got):
        diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
        assert diff.max() <= 1 and (diff > 0).mean() <= share, (diff.max(), (diff > 0).mean())


def _f32(v):
    return np.asarray(v, np.float32)


@pytest.mark.parametrize("dtypes", [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")])
def test_qlinear_conv_ties_saturation_per_channel(dtypes):
    """Scales whose multiplier is a power of two make exact halves common; a small output
    scale saturates many values."""
    xd, wd = dtypes
    for y_scale in (4.0, 0.05):
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz",
                                                "b"], ["y"], pads=[1, 1, 1, 1], strides=[1, 2])
        yd = "uint8" if xd == "uint8" else "int8"
        consts = {"xs": _f32(0.5), "xz": np.array(120 if xd == "uint8" else -3, xd),
                  "w": _ints((8, 6, 3, 3), wd), "ws": _f32([0.25, 0.125] * 4),
                  "wz": np.zeros(8, wd) + (128 if wd == "uint8" else 0),
                  "ys": _f32(y_scale), "yz": np.array(100 if yd == "uint8" else 5, yd),
                  "b": _ints((8,), "int32", -4000, 4000)}
        want, got, ops = _run([node], {"x": _ints((2, 6, 9, 9), xd)}, consts,
                              {"y": (yd, (2, 8, 9, 5))})
        _exact(want, got)
        assert {"qnn.conv2d", "qnn.requantize"} <= ops


def test_qlinear_conv_1d_and_grouped():
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                            ["y"], group=2, pads=[2, 0], dilations=[2])
    consts = {"xs": _f32(0.02), "xz": np.array(128, "uint8"), "w": _ints((4, 3, 3), "int8"),
              "ws": _f32(0.01), "wz": np.array(0, "int8"), "ys": _f32(0.1),
              "yz": np.array(7, "uint8")}
    want, got, _ = _run([node], {"x": _ints((1, 6, 11), "uint8")}, consts,
                        {"y": ("uint8", (1, 4, 9))})
    _exact(want, got)


@pytest.mark.parametrize("a_shape, b_shape", [((3, 20), (20, 7)), ((2, 3, 20), (20, 7)),
                                              ((2, 3, 20), (2, 20, 7)), ((20,), (20, 7))])
def test_qlinear_matmul_shapes(a_shape, b_shape):
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    consts = {"as": _f32(0.5), "az": np.array(130, "uint8"), "b": _ints(b_shape, "int8"),
              "bs": _f32(0.125), "bz": np.array(0, "int8"), "ys": _f32(2.0),
              "yz": np.array(128, "uint8")}
    out_shape = np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape
    want, got, ops = _run([node], {"a": _ints(a_shape, "uint8")}, consts,
                          {"y": ("uint8", out_shape)})
    _exact(want, got)
    assert "qnn.requantize" in ops and ops & {"qnn.dense", "qnn.batch_matmul"}


def test_matmul_integer_zero_points_per_row_and_column():
    """ONNX allows A's zero point per row; onnxruntime and ONNX's reference refuse it, so
    numpy is the oracle."""
    from compiler import relay
    from runtime import cpu, graph_executor
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    a, b = _ints((4, 9), "uint8"), _ints((9, 5), "int8")
    az, bz = np.array([1, 200, 3, 9], "uint8"), np.array([1, -2, 3, 0, 5], "int8")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", 2, (4, 9))],
                              [helper.make_tensor_value_info("y", 6, (4, 5))],
                              [numpy_helper.from_array(v, k) for k, v in
                               (("b", b), ("az", az), ("bz", bz))])
    mod, params = from_onnx(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 10)]))
    module = graph_executor.GraphModule(relay.build(mod, params=params)["default"](cpu(0)))
    module.run(a=a)
    want = (a.astype(np.int32) - az[:, None]) @ (b.astype(np.int32) - bz)
    np.testing.assert_array_equal(module.get_output(0).numpy(), want)


def test_matmul_integer_batched_with_per_column_zero_point():
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    feeds = {"a": _ints((2, 3, 9), "uint8"), "b": _ints((2, 9, 5), "uint8")}
    consts = {"az": np.array(7, "uint8"), "bz": np.array([1, 2, 3, 4, 250], "uint8")}
    want, got, ops = _run([node], feeds, consts, {"y": ("int32", (2, 3, 5))}, opset=10,
                          oracle="reference")
    _exact(want, got)
    assert "qnn.batch_matmul" in ops


def test_conv_integer_per_channel_weight_zero_point():
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[0, 1, 2, 1])
    feeds = {"x": _ints((1, 3, 7, 7), "uint8")}
    consts = {"w": _ints((4, 3, 2, 2), "uint8"), "xz": np.array(9, "uint8"),
              "wz": np.array([0, 5, 200, 255], "uint8")}
    want, got, ops = _run([node], feeds, consts, {"y": ("int32", (1, 4, 8, 8))}, opset=10,
                          oracle="reference")
    _exact(want, got)
    assert "qnn.conv2d" in ops


@pytest.mark.parametrize("quantized_output", [True, False])
def test_qgemm(quantized_output):
    inputs = ["a", "as", "az", "b", "bs", "bz", "c"] + (["ys", "yz"] if quantized_output else [])
    node = helper.make_node("QGemm", inputs, ["y"], domain="com.microsoft", transB=1,
                            alpha=0.5)
    consts = {"as": _f32(0.03), "az": np.array(120, "uint8"), "b": _ints((6, 16), "int8"),
              "bs": _f32(np.linspace(0.01, 0.02, 6)), "bz": np.zeros(6, "int8"),
              "c": _ints((6,), "int32", -500, 500)}
    if quantized_output:
        consts.update(ys=_f32(0.07), yz=np.array(100, "uint8"))
    want, got, ops = _run([node], {"a": _ints((3, 16), "uint8")}, consts,
                          {"y": ("uint8" if quantized_output else "float32", (3, 6))})
    if quantized_output:
        _exact(want, got)
    else:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert "qnn.dense" in ops


@pytest.mark.parametrize("op_type, qnn_op", [("QLinearAdd", "qnn.add"),
                                             ("QLinearMul", "qnn.mul")])
def test_qlinear_binary(op_type, qnn_op):
    node = helper.make_node(op_type, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"],
                            domain="com.microsoft")
    consts = {"as": _f32(0.02), "az": np.array(120, "uint8"), "bs": _f32(0.03),
              "bz": np.array(130, "uint8"), "cs": _f32(0.05 if op_type == "QLinearAdd" else 0.3),
              "cz": np.array(128, "uint8")}
    feeds = {"a": _ints((2, 5, 16), "uint8"), "b": _ints((5, 16), "uint8")}
    want, got, ops = _run([node], feeds, consts, {"c": ("uint8", (2, 5, 16))})
    _within_one_step(want, got)
    assert qnn_op in ops


def test_qlinear_concat():
    node = helper.make_node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"],
                            ["y"], domain="com.microsoft", axis=1)
    consts = {"ys": _f32(0.05), "yz": np.array(128, "uint8"), "as": _f32(0.02),
              "az": np.array(120, "uint8"), "bs": _f32(0.05), "bz": np.array(128, "uint8")}
    feeds = {"a": _ints((2, 3, 4), "uint8"), "b": _ints((2, 5, 4), "uint8")}
    want, got, ops = _run([node], feeds, consts, {"y": ("uint8", (2, 8, 4))})
    _exact(want, got)
    assert "qnn.concatenate" in ops


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(channels_last):
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", channels_last=channels_last)
    shape = (2, 7, 7, 16) if channels_last else (2, 16, 7, 7)
    out = (2, 1, 1, 16) if channels_last else (2, 16, 1, 1)
    consts = {"xs": _f32(0.05), "xz": np.array(128, "uint8"), "ys": _f32(0.02),
              "yz": np.array(100, "uint8")}
    want, got, ops = _run([node], {"x": _ints(shape, "uint8")}, consts, {"y": ("uint8", out)})
    _exact(want, got)
    assert "qnn.avg_pool2d" in ops


def test_qlinear_average_pool():
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], count_include_pad=0)
    consts = {"xs": _f32(0.05), "xz": np.array(128, "uint8"), "ys": _f32(0.04),
              "yz": np.array(100, "uint8")}
    want, got, _ = _run([node], {"x": _ints((1, 4, 9, 9), "uint8")}, consts,
                        {"y": ("uint8", (1, 4, 5, 5))})
    _within_one_step(want, got, share=0.05)


@pytest.mark.parametrize("op_type, attrs", [("QLinearSigmoid", {}),
                                            ("QLinearLeakyRelu", {"alpha": 0.1}),
                                            ("QLinearSoftmax", {"axis": -1, "opset": 13})])
def test_qlinear_activations(op_type, attrs):
    node = helper.make_node(op_type, ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", **attrs)
    out_scale = 1 / 256 if op_type != "QLinearLeakyRelu" else 0.05
    consts = {"xs": _f32(0.05), "xz": np.array(128, "uint8"), "ys": _f32(out_scale),
              "yz": np.array(0 if op_type != "QLinearLeakyRelu" else 64, "uint8")}
    x = np.arange(256, dtype=np.int64).astype("uint8").reshape(8, 32)
    want, got, _ = _run([node], {"x": x}, consts, {"y": ("uint8", (8, 32))})
    _within_one_step(want, got, share=0.05)


def test_contrib_quantize_and_dequantize_linear():
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain="com.microsoft")
    d = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain="com.microsoft")
    x = RNG.standard_normal((4, 8)).astype(np.float32) * 3
    x[0, :4] = [0.25, 0.75, -0.25, 100.0]
    want, got, ops = _run([q, d], {"x": x}, {"s": _f32(0.5), "z": np.array(-3, "int8")},
                          {"y": ("float32", (4, 8))})
    _exact(want, got)
    assert {"qnn.quantize", "qnn.dequantize"} <= ops
