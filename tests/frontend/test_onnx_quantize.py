"""QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear against onnxruntime, through
relay.build and the graph executor; they import as QNN ops."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import from_onnx
from compiler.frontend.onnx_ops.common import FrontendError

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(11)
ELEM = {"float32": TensorProto.FLOAT, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8,
        "int16": TensorProto.INT16, "uint16": TensorProto.UINT16, "int32": TensorProto.INT32}


def _model(node, feeds: dict, consts: dict, opset: int = 21):
    inputs = [helper.make_tensor_value_info(k, ELEM[v.dtype.name], v.shape)
              for k, v in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return onnx.shape_inference.infer_shapes(model)  # output types for onnxruntime


def _compare(node, feeds: dict, consts: dict = None, opset: int = 21):
    from compiler import relay
    from runtime import cpu, graph_executor
    model = _model(node, feeds, consts or {}, opset)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    mod, params = from_onnx(model)
    module = graph_executor.GraphModule(relay.build(mod, target="llvm", params=params)
                                        ["default"](cpu(0)))
    module.run(**feeds)
    for i, w in enumerate(want):
        got = module.get_output(i).numpy()
        assert got.dtype == w.dtype and got.shape == w.shape, (i, got.dtype, w.dtype)
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6, err_msg=f"output {i}")


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16"])
def test_quantize_rounds_half_to_even_and_saturates(dtype):
    x = np.array([-1e6, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.49, 1e6, 7.0], np.float32)
    zp = np.array(3, dtype)
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])
    _compare(node, {"x": x, "s": np.array(1.0, np.float32), "zp": zp})


def test_quantize_per_axis_runtime_scale_and_zero_point():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32) * 10
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"], axis=-2)
    _compare(node, {"x": x, "s": np.array([0.1, 0.2, 0.5], np.float32),
                    "zp": np.array([-3, 0, 7], np.int8)})


def test_quantize_and_dequantize_blocked_with_remainder_block():
    x = RNG.standard_normal((3, 5)).astype(np.float32) * 5
    scale = np.abs(RNG.standard_normal((3, 3))).astype(np.float32) + 0.05
    zp = RNG.integers(-5, 5, (3, 3)).astype(np.int8)
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"], axis=1, block_size=2)
    _compare(node, {"x": x, "s": scale, "zp": zp})
    q = RNG.integers(-128, 127, (3, 5)).astype(np.int8)
    node = helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1, block_size=2)
    _compare(node, {"q": q, "s": scale, "zp": zp})


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32"])
def test_dequantize_per_axis(dtype):
    info = np.iinfo(dtype)
    q = RNG.integers(max(info.min, -1000), min(info.max, 1000), (2, 4, 3)).astype(dtype)
    zp = RNG.integers(max(info.min, -20), 20, (4,)).astype(dtype)
    zp = np.zeros(4, dtype) if dtype == "int32" else zp  # ORT requires 0 for int32
    node = helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)
    _compare(node, {"q": q, "s": np.array([0.5, 0.25, 2.0, 0.1], np.float32), "zp": zp})


@pytest.mark.parametrize("values", [[-3.0, 0.5, 2.25, 7.0], [1.0, 2.0, 3.0, 4.0],
                                    [-4.0, -1.0, -0.5, -2.0]])
def test_dynamic_quantize_linear(values):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "zp"])
    _compare(node, {"x": np.array(values, np.float32)}, opset=11)


def test_dynamic_quantize_linear_all_zero_input_follows_the_onnx_reference():
    """max == min: ONNX's reference divides 1 by 255 (onnxruntime uses a scale of 1)."""
    from onnx.reference import ReferenceEvaluator
    from compiler.op.interpreter import evaluate
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "zp"])
    x = np.zeros(4, np.float32)
    model = _model(node, {"x": x}, {}, opset=11)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    mod, _ = from_onnx(model)
    got = evaluate(mod, [x])
    for w, g in zip(want, got):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_matmul_integer_per_column_zero_point():
    a = RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 127, (4, 5)).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b", "azp", "bzp"], ["y"])
    _compare(node, {"a": a, "b": b, "azp": np.array(12, np.uint8),
                    "bzp": RNG.integers(-5, 5, (5,)).astype(np.int8)}, opset=10)


def test_conv_integer_with_strides_and_group():
    x = RNG.integers(0, 255, (1, 4, 6, 6)).astype(np.uint8)
    w = RNG.integers(0, 255, (4, 2, 3, 3)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xzp", "wzp"], ["y"], strides=[2, 1],
                            pads=[1, 0, 1, 2], group=2)
    _compare(node, {"x": x, "w": w, "xzp": np.array(128, np.uint8),
                    "wzp": np.array(3, np.uint8)}, opset=10)


def test_qlinear_conv_per_channel_weight_scale_and_bias():
    x = RNG.integers(0, 255, (1, 3, 5, 5)).astype(np.uint8)
    w = RNG.integers(-60, 60, (4, 3, 3, 3)).astype(np.int8)
    node = helper.make_node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp",
                                            "bias"], ["y"], pads=[1, 1, 1, 1])
    feeds = {"x": x, "xs": np.array(0.02, np.float32), "xzp": np.array(120, np.uint8), "w": w,
             "ws": np.array([0.01, 0.02, 0.005, 0.03], np.float32),
             "wzp": np.zeros(4, np.int8), "ys": np.array(0.15, np.float32),
             "yzp": np.array(100, np.uint8), "bias": RNG.integers(-500, 500, 4).astype(np.int32)}
    _compare(node, feeds, opset=10)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_matmul_batched(dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (2, 3, 4)).astype(dtype)
    b = RNG.integers(info.min, info.max, (2, 4, 5)).astype(dtype)
    node = helper.make_node("QLinearMatMul", ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"],
                            ["y"])
    feeds = {"a": a, "as": np.array(0.05, np.float32), "azp": np.array(3, dtype), "b": b,
             "bs": np.array(0.02, np.float32), "bzp": np.array(1, dtype),
             "ys": np.array(0.7, np.float32), "yzp": np.array(5, dtype)}
    _compare(node, feeds, opset=10)


def test_unsupported_quantized_type_is_a_clear_error():
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"],
                            output_dtype=TensorProto.FLOAT8E8M0)
    model = _model(node, {"x": np.zeros(4, np.float32), "s": np.array(1.0, np.float32)}, {})
    with pytest.raises(FrontendError, match="FLOAT8E8M0 is not supported"):
        from_onnx(model)


def test_mismatched_per_axis_scale_is_a_clear_error():
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1)
    model = _model(node, {"x": np.zeros((2, 3), np.float32), "s": np.ones(2, np.float32)}, {})
    with pytest.raises(FrontendError, match=r"per-axis scale must have shape \(3,\)"):
        from_onnx(model)


def test_quantize_and_dequantize_import_as_qnn_ops():
    from compiler.ir.traversal import post_order
    q = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1)
    d = helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)
    graph = helper.make_graph([q, d], "g", [helper.make_tensor_value_info("x", 1, (2, 3))],
                              [helper.make_tensor_value_info("y", 1, (2, 3))],
                              [numpy_helper.from_array(np.array([0.1, 0.2, 0.3], "f4"), "s"),
                               numpy_helper.from_array(np.array([1, 2, 3], "i1"), "zp")])
    mod, _ = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    ops = [n.op.name for n in post_order(mod["main"].body) if hasattr(n, "op")
           and hasattr(n.op, "name")]
    assert "qnn.quantize" in ops and "qnn.dequantize" in ops
    assert not {"round", "clip", "divide"} & set(ops)


@pytest.mark.parametrize("scale, message", [
    (np.array([0.1, 0.0, 0.3], "f4"), r"scale must be finite and non-zero, got \[0.0\]"),
    (np.array([0.1, np.inf, 0.3], "f4"), r"scale must be finite and non-zero, got \[inf\]"),
])
def test_bad_static_scale_is_an_error_naming_the_node(scale, message):
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, name="quant_7")
    model = _model(node, {"x": np.zeros((2, 3), np.float32)}, {"s": scale})
    with pytest.raises(FrontendError, match="node 'quant_7' \\(QuantizeLinear\\): " + message):
        from_onnx(model)


def test_zero_point_of_another_type_is_an_error():
    node = helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="dq")
    model = _model(node, {"q": np.zeros(4, np.int8)}, {"s": np.array(0.5, np.float32),
                                                       "zp": np.array(3, np.uint8)})
    with pytest.raises(FrontendError, match="node 'dq'.*zero point is uint8 but the quantized "
                                            "data is int8"):
        from_onnx(model)
