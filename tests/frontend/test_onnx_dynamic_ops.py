"""Common ONNX ops on inputs with dynamic dims (a dim_param batch, and spatial dims where
the op allows): each imports without a shape= and matches onnxruntime at two sizes."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, ValueInfoProto, helper, numpy_helper

from compiler.frontend import from_onnx
from compiler.op.interpreter import evaluate

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(7)


def _w(*shape):
    return RNG.standard_normal(shape).astype("float32")


# name -> (op_type, input dims with symbols, attrs, initializers, concrete shapes per size)
CASES = {
    "relu": ("Relu", ["N", "C"], {}, {}),
    "add_bias": ("Add", ["N", 4], {}, {"b": _w(4)}),
    "mul_self": ("Mul", ["N", "C"], {}, {}),
    "matmul": ("MatMul", ["N", "S", 8], {}, {"w": _w(8, 5)}),
    "gemm": ("Gemm", ["N", 8], {"transB": 1}, {"w": _w(5, 8), "b": _w(5)}),
    "conv": ("Conv", ["N", 3, "H", "W"], {"pads": [1, 1, 1, 1], "strides": [2, 2]},
             {"w": _w(4, 3, 3, 3), "b": _w(4)}),
    "conv_same": ("Conv", ["N", 3, "H", "W"], {"auto_pad": "SAME_UPPER"},
                  {"w": _w(4, 3, 3, 3)}),
    "maxpool": ("MaxPool", ["N", 3, "H", "W"], {"kernel_shape": [2, 2], "strides": [2, 2]},
                {}),
    "avgpool": ("AveragePool", ["N", 3, "H", "W"], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
                {}),
    "global_avg": ("GlobalAveragePool", ["N", 3, "H", "W"], {}, {}),
    "batchnorm": ("BatchNormalization", ["N", 3, "H", "W"], {},
                  {"s": _w(3), "bb": _w(3), "m": _w(3), "v": np.abs(_w(3)) + 1}),
    "flatten": ("Flatten", ["N", 3, 4], {"axis": 1}, {}),
    "softmax": ("Softmax", ["N", "S"], {"axis": -1}, {}),
    "softmax_axis0": ("Softmax", ["N", 5], {"axis": 0}, {}),
    "layernorm": ("LayerNormalization", ["N", "S", 6], {"axis": -1}, {"g": _w(6), "bt": _w(6)}),
    "reduce_mean": ("ReduceMean", ["N", "S", 6], {"keepdims": 0}, {"ax": np.array([1])}),
    "transpose": ("Transpose", ["N", "S", 6], {"perm": [1, 0, 2]}, {}),
    "concat": ("Concat", ["N", 3], {"axis": 0}, {"z": _w(2, 3)}),
    "split": ("Split", ["N", 6], {"axis": 1, "num_outputs": 2}, {}),
    "gather_static_axis": ("Gather", ["N", 6], {"axis": 1}, {"i": np.array([4, 0, -1])}),
    "unsqueeze": ("Unsqueeze", ["N", 3], {}, {"ax": np.array([1])}),
    "squeeze": ("Squeeze", ["N", 1, 3], {}, {"ax": np.array([1])}),
    "cast": ("Cast", ["N", 3], {"to": TensorProto.INT32}, {}),
    "erf": ("Erf", ["N", 3], {}, {}),
    "pow": ("Pow", ["N", 3], {}, {"p": np.array(2.0, "float32")}),
    "resize_nearest": ("Resize", ["N", 2, "H", "W"], {"mode": "nearest"},
                       {"roi": np.array([], "float32"),
                        "sc": np.array([1, 1, 2, 2], "float32")}),
    "resize_linear": ("Resize", ["N", 2, "H", "W"],
                      {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
                      {"roi": np.array([], "float32"),
                       "sc": np.array([1, 1, 2, 3], "float32")}),
    "slice_const": ("Slice", ["N", 6], {}, {"st": np.array([1]), "en": np.array([5]),
                                              "ax": np.array([1])}),
    "pad_const": ("Pad", ["N", 3], {}, {"pads": np.array([0, 1, 0, 2])}),
    "argmax": ("ArgMax", ["N", 5], {"axis": 1}, {}),
    "topk_const": ("TopK", ["N", 5], {"axis": 1}, {"k": np.array([2])}),
    "expand_batch": ("Expand", ["N", 1], {}, {"shape": np.array([1, 4])}),
    "tile": ("Tile", ["N", 2], {}, {"reps": np.array([1, 3])}),
    "where": ("Where", ["N", 3], {}, {}),
    "instance_norm": ("InstanceNormalization", ["N", 3, "H", "W"], {},
                      {"s": _w(3), "bb": _w(3)}),
    "depth_to_space": ("DepthToSpace", ["N", 8, "H", "W"], {"blocksize": 2}, {}),
    "conv_transpose": ("ConvTranspose", ["N", 2, "H", "W"], {"strides": [2, 2]},
                       {"w": _w(2, 3, 3, 3)}),
    "clip": ("Clip", ["N", 3], {}, {"lo": np.array(-0.5, "float32"),
                                     "hi": np.array(0.5, "float32")}),
}
SIZES = {"N": (1, 3), "C": (2, 5), "S": (4, 9), "H": (6, 9), "W": (8, 7)}


def _model(op_type, dims, attrs, inits):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)]
    names = ["x"]
    if op_type == "Mul":
        names = ["x", "x"]
    elif op_type == "Where":
        inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, dims))
        names = ["c", "x", "x"]
    names += list(inits)
    if op_type == "Resize":
        names = ["x", "roi", "sc"]
    outs = ["y", "y2"] if op_type in ("Split", "TopK") else ["y"]
    node = helper.make_node(op_type, names, outs, **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [ValueInfoProto(name=o) for o in outs],
                              [numpy_helper.from_array(np.asarray(v), k)
                               for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_with_dynamic_dims_matches_onnxruntime(name):
    op_type, dims, attrs, inits = CASES[name]
    model = _model(op_type, dims, attrs, inits)
    mod, params = from_onnx(model)
    assert "?" in str(mod["main"].params[0].type_annotation)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for k in range(2):
        shape = [SIZES[d][k] if isinstance(d, str) else d for d in dims]
        feeds = {"x": RNG.standard_normal(shape).astype("float32")}
        if op_type == "Where":
            feeds["c"] = RNG.random(shape) > 0.5
        args = [feeds[p.name_hint] if p.name_hint in feeds else params[p.name_hint].numpy()
                for p in mod["main"].params]
        got = evaluate(mod, args)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, sess.run(None, feeds)):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{name} at {shape}")


def test_resize_the_dynamic_path_cannot_express_is_a_clear_error():
    op_type, dims, _, inits = CASES["resize_linear"]
    model = _model(op_type, dims, {"mode": "linear"}, inits)  # half_pixel: not upsampling's
    with pytest.raises(Exception, match=r"Resize with dynamic shapes takes .*linear "
                                        r"asymmetric/align_corners; got mode='linear', "
                                        r"coordinate_transformation_mode='half_pixel'"):
        from_onnx(model)
