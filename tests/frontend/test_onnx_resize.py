"""Resize of non-finite data: a tap whose weight is 0 at a position takes no part there.

Nearest mode is a copy (the fuzzer found NaN next to every infinity: the converter summed
one-hot weighted taps, 0 * inf), and antialiased linear skips the taps outside its support;
both as onnxruntime does.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import relay
from compiler.frontend import from_onnx
from runtime import cpu, graph_executor

ort = pytest.importorskip("onnxruntime")


def _resize_model(x_shape, sizes, elem, **attrs):
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", elem, list(x_shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(np.array(sizes, np.int64), "sizes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("attrs, sizes", [
    ({"mode": "nearest"}, [1, 2, 12, 5]),
    ({"mode": "nearest", "nearest_mode": "ceil", "coordinate_transformation_mode":
      "asymmetric"}, [1, 2, 4, 7]),
    ({"mode": "linear", "antialias": 1, "coordinate_transformation_mode": "half_pixel_symmetric"},
     [1, 2, 4, 2]),
], ids=["nearest", "nearest-ceil", "linear-antialias"])
def test_resize_of_infinities_matches_onnxruntime(dtype, attrs, sizes):
    x = np.arange(36, dtype=dtype).reshape(1, 2, 6, 3)
    x[0, 0, 0, 0], x[0, 1, 2, 1], x[0, 1, 5, 2] = -np.inf, np.inf, np.nan
    model = _resize_model(x.shape, sizes, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                          **attrs)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod, params = from_onnx(model)
    gmod = graph_executor.GraphModule(relay.build(mod, params=params)["default"](cpu()))
    gmod.run(x=x)
    got = gmod.get_output(0).numpy()
    assert np.isfinite(got).sum() > got.size // 2
    np.testing.assert_allclose(got, want, rtol=1e-3)


@pytest.mark.parametrize("transform", ["half_pixel", "align_corners", "asymmetric"])
def test_bilinear_resize_gathers_once_per_input_row(transform):
    """float32: the last axis is resized in a kernel of its own (its taps are gathers), then
    the rows: two kernels, the first with the gathers, and onnxruntime's values."""
    import json

    x = np.random.default_rng(2).standard_normal((1, 3, 5, 7)).astype(np.float32)
    model = _resize_model(x.shape, [1, 3, 10, 13], TensorProto.FLOAT, mode="linear",
                          coordinate_transformation_mode=transform)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod, params = from_onnx(model)
    lib = relay.build(mod, params=params)
    kernels = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
               if n["op"] == "tvm_op"]
    assert len(kernels) == 2 and "take" in kernels[0], kernels
    gmod = graph_executor.GraphModule(lib["default"](cpu()))
    gmod.run(x=x)
    np.testing.assert_allclose(gmod.get_output(0).numpy(), want, rtol=1e-5, atol=1e-6)
