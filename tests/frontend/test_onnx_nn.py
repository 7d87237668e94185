"""Pooling converters (onnx_ops/nn.py) end to end against onnxruntime: the ceil-mode and padding
corners the ONNX node tests do not cover."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler import relay
from compiler.frontend import from_onnx
from runtime import cpu, graph_executor

ort = pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(5)


def _compare_with_ort(op_type, shape, opset=19, **attrs):
    node = helper.make_node(op_type, ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    x = RNG.standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    mod, params = from_onnx(model)
    module = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](cpu()))
    module.run(x=x)
    got = module.get_output(0).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return got


@pytest.mark.parametrize("shape,attrs", [
    ((1, 1, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((1, 2, 6, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[3, 2], pads=[1, 0, 0, 1])),
    ((2, 3, 9), dict(kernel_shape=[4], strides=[3], pads=[2, 1])),
    ((1, 1, 9, 9), dict(kernel_shape=[5, 5], strides=[3, 3], pads=[1, 1, 1, 1])),
    ((1, 1, 10, 10), dict(kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2],
                          pads=[1, 1, 1, 1])),
    ((1, 1, 5, 6, 4), dict(kernel_shape=[2, 3, 2], strides=[2, 2, 3], pads=[1, 0, 0, 0, 1, 1])),
])
def test_average_pool_ceil_mode_count_include_pad(shape, attrs):
    """The last partial window divides by the taps it covers inside input + pads."""
    _compare_with_ort("AveragePool", shape, ceil_mode=1, count_include_pad=1, **attrs)


@pytest.mark.parametrize("shape,attrs", [
    ((1, 1, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((1, 1, 6, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 1, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 7), dict(kernel_shape=[2], strides=[2])),
    ((1, 1, 5, 6, 4), dict(kernel_shape=[2, 3, 2], strides=[2, 2, 3])),
])
def test_lp_pool_ceil_mode_sums_the_window(shape, attrs):
    """LpPool is the p-norm of the window's input taps; a partial ceil-mode window is not
    scaled by the full kernel, and a window starting in the end padding is dropped."""
    _compare_with_ort("LpPool", shape, opset=18, ceil_mode=1, **attrs)


@pytest.mark.parametrize("shape,attrs", [
    ((1, 1, 2, 2), dict(kernel_shape=[2, 2], dilations=[3, 3], pads=[1, 1, 1, 1])),
    ((1, 1, 2, 5), dict(kernel_shape=[2, 2], dilations=[3, 1], pads=[1, 1, 1, 1])),
    ((1, 1, 2, 9), dict(kernel_shape=[2, 9], dilations=[3, 1], pads=[1, 4, 1, 4])),
    ((1, 1, 2, 2, 2), dict(kernel_shape=[2, 2, 2], dilations=[3, 3, 3], pads=[1] * 6)),
])
def test_max_pool_window_over_padding_only_is_the_lowest_float(shape, attrs):
    got = _compare_with_ort("MaxPool", shape, **attrs)
    assert np.isfinite(got).all() and (got == np.finfo(np.float32).min).any()


@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((2, 2, 5, 4), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 0],
                        storage_order=1)),
    ((1, 2, 6, 7), dict(kernel_shape=[2, 3], dilations=[2, 1], ceil_mode=1)),
    ((2, 3, 3, 3, 8), dict(kernel_shape=[2, 2, 3], strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 0])),
    ((1, 2, 4, 5, 3), dict(kernel_shape=[2, 2, 2], storage_order=1)),
], ids=["1d", "2d-column-major", "2d-dilated-ceil", "3d-padded", "3d-column-major"])
def test_max_pool_indices(shape, attrs):
    """MaxPool's Indices output for 1-D, 2-D and 3-D pools (the fuzzer found 3-D refused)."""
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 9
    x = RNG.permutation(int(np.prod(shape))).astype(np.float32).reshape(shape)  # no ties
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    mod, params = from_onnx(model)
    module = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](cpu()))
    module.run(x=x)
    np.testing.assert_array_equal(module.get_output(0).numpy(), want[0])
    np.testing.assert_array_equal(module.get_output(1).numpy(), want[1])
