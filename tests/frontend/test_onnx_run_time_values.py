"""ONNX inputs that ONNX allows to be computed (axes, k, splits, depth, sizes...) fed at run
time, as graph inputs: each model converts without freezing them and matches onnxruntime on
the Relay VM and in the debug interpreter, at two sets of values."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler import relay
from compiler.frontend import from_onnx
from compiler.op.interpreter import evaluate
from runtime import cpu
from runtime.vm import VirtualMachine

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(11)
_ONNX_TYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64,
               "int32": TensorProto.INT32}


def _model(op_type, feeds: dict, n_out=1, opset=18, node_inputs=None, **attrs):
    """op_type over the feeds as graph inputs (node_inputs: the node's input names, "" for
    one left out; default the feeds in order), with the shapes of the first feeds."""
    inputs = [helper.make_tensor_value_info(n, _ONNX_TYPES[v.dtype.name], v.shape)
              for n, v in feeds.items()]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op_type, node_inputs or list(feeds), outs, **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def check(op_type, *value_sets: dict, n_out=1, opset=18, node_inputs=None, atol=1e-6,
          **attrs):
    """The model built for the first value set, run at each: VM and interpreter vs ORT."""
    model = _model(op_type, value_sets[0], n_out, opset, node_inputs, **attrs)
    mod, params = from_onnx(model)
    assert not params
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), cpu(0))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in value_sets:
        want = sess.run(None, feeds)
        args = [feeds[p.name_hint] for p in mod["main"].params]
        for got in (vm.invoke("main", *args), evaluate(mod, args)):
            got = list(got) if isinstance(got, (tuple, list)) else [got]
            for g, w in zip(got, want):
                g = g.numpy() if hasattr(g, "numpy") else np.asarray(g)
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)
    return mod


def f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def i64(*values):
    return np.array(values, "int64")


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                     "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp",
                                     "ReduceSumSquare"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions_over_run_time_axes(op_type, keepdims):
    x = f32(2, 3, 4)
    mod = check(op_type, {"x": x, "axes": i64(1, -1)}, {"x": x, "axes": i64(0, 1)},
                keepdims=keepdims)
    assert "dyn." in str(mod)


def test_run_time_axes_out_of_range_is_a_clear_error():
    mod, _ = from_onnx(_model("ReduceSum", {"x": f32(2, 3), "axes": i64(0)}))
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), cpu(0))
    with pytest.raises(Exception, match=r"axes \[5\] are out of range for rank 2"):
        vm.invoke("main", f32(2, 3), i64(5))


def test_squeeze_and_unsqueeze_at_run_time_axes():
    check("Unsqueeze", {"x": f32(2, 3), "axes": i64(0, -1)}, {"x": f32(2, 3), "axes": i64(1, 3)},
          opset=13)
    check("Squeeze", {"x": f32(1, 3, 1), "axes": i64(0, -1)}, opset=13)


def test_unsqueeze_naming_one_position_twice_is_a_clear_error():
    mod, _ = from_onnx(_model("Unsqueeze", {"x": f32(3, 1), "axes": i64(0, 1)}, opset=13))
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), cpu(0))
    with pytest.raises(Exception, match="out of range"):
        vm.invoke("main", f32(3, 1), i64(0, 0))


def test_slice_with_run_time_axes_and_steps():
    x = f32(4, 5, 6)
    check("Slice", {"x": x, "s": i64(1, -1), "e": i64(3, 0), "a": i64(2, 1), "st": i64(1, -2)},
          {"x": x, "s": i64(0, 1), "e": i64(9, 4), "a": i64(-3, 1), "st": i64(2, 1)})


def test_split_with_run_time_sizes():
    x = f32(3, 7)
    check("Split", {"x": x, "split": i64(2, 5)}, {"x": x, "split": i64(7, 0)}, n_out=2, axis=1)


def test_split_sizes_that_do_not_add_up_are_a_clear_error():
    mod, _ = from_onnx(_model("Split", {"x": f32(6), "split": i64(2, 4)}, n_out=2))
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), cpu(0))
    with pytest.raises(Exception, match="out of range"):
        vm.invoke("main", f32(6), i64(2, 3))


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_with_a_run_time_k(upper):
    x = f32(2, 4, 5)
    check("Trilu", {"x": x, "k": np.array(1, "int64")}, {"x": x, "k": np.array(-2, "int64")},
          upper=upper)


def test_one_hot_with_a_run_time_depth():
    indices = np.array([[0, 3], [-1, 5]], "int64")
    check("OneHot", {"i": indices, "depth": i64(4), "v": np.array([0.0, 2.0], "float32")},
          {"i": indices, "depth": i64(6), "v": np.array([1.0, -1.0], "float32")}, axis=1)


@pytest.mark.parametrize("op_type", ["CumSum", "CumProd"])
def test_cumulative_ops_along_a_run_time_axis(op_type):
    x = f32(3, 4)
    check(op_type, {"x": x, "axis": np.array(1, "int64")}, {"x": x, "axis": np.array(-2, "int64")},
          opset=26, reverse=1)


def test_center_crop_pad_and_pad_with_run_time_sizes_and_axes():
    x = f32(5, 4, 3)
    check("CenterCropPad", {"x": x, "shape": i64(2, 7)}, {"x": x, "shape": i64(6, 1)},
          axes=[0, 1])
    check("Pad", {"x": x, "pads": i64(1, 0, 2, 1), "value": np.array(1.5, "float32"),
                  "axes": i64(-1, 0)},
          {"x": x, "pads": i64(0, 2, 1, 0), "value": np.array(0.0, "float32"),
           "axes": i64(1, 2)})


@pytest.mark.parametrize("op_type", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_of_a_run_time_size(op_type, periodic):
    check(op_type, {"size": np.array(10, "int64")}, {"size": np.array(1, "int64")},
          periodic=periodic)


def test_resize_with_run_time_scales_it_cannot_follow_is_an_error_not_a_wrong_answer():
    """Run-time scales go to dyn.nn.upsampling, whose interpolation is ONNX's for whole
    scales on H and W only: others fail at run time."""
    x = f32(1, 2, 3, 4)
    model = _model("Resize", {"x": x, "roi": np.zeros(0, "float32"),
                              "scales": np.array([1, 1, 2, 3], "float32")}, opset=13,
                   mode="linear", coordinate_transformation_mode="align_corners")
    mod, _ = from_onnx(model)
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), cpu(0))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"x": x, "roi": np.zeros(0, "float32"), "scales": np.array([1, 1, 2, 3], "float32")}
    np.testing.assert_allclose(vm.invoke("main", *feeds.values()).numpy(),
                               sess.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
    for bad in ([1, 1, 0.6, 1], [2, 1, 1, 1]):
        with pytest.raises(Exception, match="out of range"):
            vm.invoke("main", x, feeds["roi"], np.array(bad, "float32"))


@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_of_a_run_time_size(align_corners):
    theta = f32(2, 2, 3)
    check("AffineGrid", {"theta": theta, "size": i64(2, 3, 4, 5)},
          {"theta": theta, "size": i64(2, 1, 2, 3)}, opset=20, align_corners=align_corners)


def test_upsample_with_run_time_scales():
    x = f32(1, 2, 3, 4)
    check("Upsample", {"x": x, "scales": np.array([1, 1, 2, 3], "float32")},
          {"x": x, "scales": np.array([1, 1, 1, 2], "float32")}, opset=9)


def test_dft_along_a_run_time_axis():
    x = f32(2, 6, 6, 1)
    check("DFT", {"x": x, "axis": np.array(1, "int64")}, {"x": x, "axis": np.array(-2, "int64")},
          opset=20, node_inputs=["x", "", "axis"], atol=1e-5)  # onnxruntime's float32 noise
