"""ONNX vision/indexing converters end to end (from_onnx -> relay.build -> graph executor)
against onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler import relay
from compiler.errors import CompilerError
from compiler.frontend import from_onnx
from runtime import cpu, graph_executor

RNG = np.random.default_rng(11)


def _model(node, inputs: dict, outputs: dict, opset: int, inits: dict | None = None):
    def info(name, value_or_shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, value_or_shape)
    graph = helper.make_graph(
        [node], "g", [info(k, v.shape, helper.np_dtype_to_tensor_dtype(v.dtype))
                      for k, v in inputs.items()],
        [info(k, None, e) for k, e in outputs.items()],
        initializer=[helper.make_tensor(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape,
                                        v.reshape(-1).tolist()) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _compare(node, inputs, outputs, opset, inits=None):
    model = _model(node, inputs, outputs, opset, inits)
    expected = ReferenceEvaluator(model).run(None, inputs)
    mod, params = from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    module = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](cpu(0)))
    module.run(**inputs)
    for i, want in enumerate(expected):
        got = module.get_output(i).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv3d_and_pools_route_5d_inputs():
    x = RNG.standard_normal((1, 2, 5, 6, 4)).astype("float32")
    w = RNG.standard_normal((3, 2, 2, 3, 2)).astype("float32")
    _compare(helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 0, 1, 0, 1, 0],
                              strides=[2, 1, 1]), {"x": x, "w": w}, {"y": TensorProto.FLOAT}, 17)
    for kind in ("MaxPool", "AveragePool"):
        _compare(helper.make_node(kind, ["x"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2, 2],
                                  ceil_mode=1), {"x": x}, {"y": TensorProto.FLOAT}, 19)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample(mode):
    x = RNG.standard_normal((1, 2, 4, 5)).astype("float32")
    grid = RNG.uniform(-1.2, 1.2, (1, 3, 3, 2)).astype("float32")
    _compare(helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                              padding_mode="reflection"), {"x": x, "grid": grid},
             {"y": TensorProto.FLOAT}, 20)


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(align):
    theta = RNG.standard_normal((2, 2, 3)).astype("float32")
    size = np.array([2, 1, 3, 4], np.int64)
    _compare(helper.make_node("AffineGrid", ["theta", "size"], ["y"], align_corners=align),
             {"theta": theta}, {"y": TensorProto.FLOAT}, 20, inits={"size": size})


def test_reverse_sequence_and_tensor_scatter():
    x = RNG.standard_normal((4, 3, 2)).astype("float32")
    lens = np.array([4, 1, 3], np.int64)
    _compare(helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=0,
                              batch_axis=1), {"x": x, "lens": lens}, {"y": TensorProto.FLOAT}, 10)
    past = RNG.standard_normal((2, 3, 5, 2)).astype("float32")
    upd = RNG.standard_normal((2, 3, 2, 2)).astype("float32")
    writes = np.array([1, 4], np.int64)
    _compare(helper.make_node("TensorScatter", ["past", "upd", "w"], ["y"], mode="circular"),
             {"past": past, "upd": upd, "w": writes}, {"y": TensorProto.FLOAT}, 24)


def test_max_pool_indices_then_max_unpool():
    x = RNG.standard_normal((2, 2, 5, 4)).astype("float32")
    _compare(helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2],
                              strides=[2, 2], pads=[1, 0, 1, 0], storage_order=1),
             {"x": x}, {"y": TensorProto.FLOAT, "i": TensorProto.INT64}, 12)
    vals = RNG.standard_normal((1, 1, 2, 2)).astype("float32")
    idx = np.array([[[[0, 3], [9, 14]]]], np.int64)
    _compare(helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2],
                              strides=[2, 2]), {"x": vals, "i": idx}, {"y": TensorProto.FLOAT}, 11)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_det(n):
    x = RNG.standard_normal((2, n, n)).astype("float32")
    _compare(helper.make_node("Det", ["x"], ["y"]), {"x": x}, {"y": TensorProto.FLOAT}, 11)


def test_det_too_large_is_a_clear_error():
    model = _model(helper.make_node("Det", ["x"], ["y"]), {"x": np.zeros((5, 5), "f4")},
                   {"y": TensorProto.FLOAT}, 11)
    with pytest.raises(CompilerError, match="Det.*5x5"):
        from_onnx(model, shape={"x": (5, 5)})


def test_roi_align_and_gather_nd_batch_dims():
    x = RNG.standard_normal((2, 2, 6, 6)).astype("float32")
    rois = np.array([[0.5, 0.5, 4.0, 5.0], [1, 2, 3, 3]], "float32")
    batch = np.array([1, 0], np.int64)
    _compare(helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=2,
                              output_width=3, sampling_ratio=2, spatial_scale=0.5),
             {"x": x, "rois": rois, "b": batch}, {"y": TensorProto.FLOAT}, 16)
    data = RNG.standard_normal((2, 3, 4)).astype("float32")
    ind = np.array([[[1, 2], [0, 3]], [[2, 0], [2, 2]]], np.int64)
    _compare(helper.make_node("GatherND", ["d", "i"], ["y"], batch_dims=1),
             {"d": data, "i": ind}, {"y": TensorProto.FLOAT}, 13)
