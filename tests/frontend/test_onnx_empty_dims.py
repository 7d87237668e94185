"""Size-0 dimensions through the shape-changing converters, against onnxruntime.

The frontend's reshapes must read a 0 as an empty dimension, never as TVM's "copy the input
dimension" (the fuzzer found wrong shapes for Unsqueeze and batched MatMul this way).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import relay
from compiler.frontend import from_onnx
from compiler.frontend.onnx_ops.common import FrontendError
from runtime import cpu, graph_executor

ort = pytest.importorskip("onnxruntime")


def _model(op_type, x_shape, opset, consts=(), y_shape=None, **attrs):
    """One node reading x (and y when y_shape is given) plus constant inputs."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    names = ["x"]
    if y_shape is not None:
        inputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape)))
        names.append("y")
    inits = [numpy_helper.from_array(np.asarray(v), f"c{i}") for i, v in enumerate(consts)]
    names += [t.name for t in inits]
    node = helper.make_node(op_type, names, ["out"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(
        "out", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run(model, feeds):
    mod, params = from_onnx(model)
    lib = relay.build(mod, "llvm", params=params)
    gmod = graph_executor.GraphModule(lib["default"](cpu()))
    gmod.run(**feeds)
    return gmod.get_output(0).numpy()


CASES = [  # (op, x shape, opset, constant inputs, y shape, attrs)
    ("Unsqueeze", (0, 3), 21, [np.array([-4, -3])], None, {}),
    ("Unsqueeze", (5, 0, 0, 2), 21, [np.array([-1, -6])], None, {}),
    ("Unsqueeze", (2, 0), 11, [], None, {"axes": [0]}),
    ("Squeeze", (1, 2, 4, 0), 13, [np.array([-4])], None, {}),
    ("Flatten", (4, 3, 1, 0), 13, [], None, {"axis": 4}),
    ("Flatten", (0, 3, 2), 13, [], None, {"axis": 1}),
    ("Reshape", (4, 0, 3), 14, [np.array([0, 3, 4])], None, {"allowzero": 1}),
    ("Reshape", (4, 0, 3), 14, [np.array([2, 0, 6])], None, {}),
    ("Softmax", (0,), 11, [], None, {"axis": -1}),
    ("LogSoftmax", (3, 0, 2), 11, [], None, {"axis": 1}),
    ("Hardmax", (0, 4), 11, [], None, {}),
    ("MatMul", (0,), 13, [np.zeros((0, 1), np.float32)], None, {}),
    ("MatMul", (0, 0, 1, 6), 13, [np.ones(6, np.float32)], None, {}),
    ("MatMul", (3, 1, 6, 0), 13, [np.ones((0, 8), np.float32)], None, {}),
    ("MatMul", (2, 0, 3), 13, [], (2, 3, 4), {}),
    ("MatMul", (2, 3, 0), 13, [], (1, 0, 4), {}),
    ("Tile", (11, 5, 5, 1), 13, [np.array([3, 1, 0, 2])], None, {}),
    ("Tile", (2, 0), 13, [np.array([2, 3])], None, {}),
    ("Pad", (4, 3, 0), 13, [np.array([2, 2, 0, 3, 1, 0])], None, {"mode": "reflect"}),
    ("Pad", (4, 0, 2), 13, [np.array([1, 0, 0, 0, 0, 1])], None, {"mode": "edge"}),
    ("Pad", (4, 0, 2), 13, [np.array([0, 1, 0, 0, 2, 0])], None, {"mode": "constant"}),
]


@pytest.mark.parametrize("op_type, x_shape, opset, consts, y_shape, attrs", CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_empty_dims_match_the_reference(op_type, x_shape, opset, consts, y_shape, attrs):
    model = _model(op_type, x_shape, opset, consts, y_shape, **attrs)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    if y_shape is not None:
        feeds["y"] = rng.standard_normal(y_shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = _run(model, feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x_shape", [(0, 4, 3), (2, 4, 0)])
def test_group_normalization_of_an_empty_tensor(x_shape):
    """onnxruntime and onnx.reference both fail here (their -1 reshape of an empty tensor)."""
    model = _model("GroupNormalization", x_shape, 21, [np.ones(4, np.float32),
                                                      np.zeros(4, np.float32)], num_groups=2)
    assert _run(model, {"x": np.zeros(x_shape, np.float32)}).shape == x_shape


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_pad_copying_from_an_empty_axis_is_an_error(mode):
    """onnxruntime refuses to pad an empty axis in reflect/edge mode: nothing to copy."""
    model = _model("Pad", (4, 0, 2), 13, [np.array([0, 1, 0, 0, 0, 0])], mode=mode)
    with pytest.raises(FrontendError, match=f"{mode} padding .* axis 1 .* the axis is empty"):
        from_onnx(model)


def test_tile_negative_repeat_is_an_error():
    model = _model("Tile", (2, 3), 13, [np.array([1, -1])])
    with pytest.raises(FrontendError, match=r"reps must be non-negative, got \(1, -1\)"):
        from_onnx(model)
