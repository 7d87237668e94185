"""ONNX models with dynamic axes: dim_param dims import as relay.Any, shape computations on
them stay static where the symbols allow, and shape inputs known only at run time give dyn.*
ops; every output checked against onnxruntime through the debug interpreter."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import relay
from compiler.frontend import from_onnx
from compiler.op.interpreter import evaluate

ort = pytest.importorskip("onnxruntime")


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(model, feeds, rtol=1e-5, atol=1e-5, **kwargs):
    mod, params = from_onnx(model, **kwargs)
    args = [feeds[p.name_hint] if p.name_hint in feeds else params[p.name_hint].numpy()
            for p in mod["main"].params]
    got = evaluate(mod, args)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, _ort(model, feeds)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return mod


def bert_layer(hidden=32, heads=4):
    """One attention block as torch.onnx.export writes it with dynamic batch and sequence:
    the head split and merge reshape to Concat(Shape(x)[i], ...)."""
    d = hidden // heads
    rng = np.random.default_rng(0)
    w = {n: rng.standard_normal((hidden, hidden)).astype("float32") * 0.2
         for n in ("wq", "wk", "wv", "wo")}
    inits = [_init(n, v) for n, v in w.items()] + [
        _init("c0", np.array(0)), _init("c1", np.array(1)), _init("ax0", np.array([0])),
        _init("heads_d", np.array([heads, d])), _init("hid", np.array([hidden])),
        _init("scale", np.array(1 / np.sqrt(d), "float32"))]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "c0"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "c1"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "heads_d"], ["split_shape"], axis=0),
        helper.make_node("Concat", ["b1", "s1", "hid"], ["merge_shape"], axis=0),
    ]
    for n in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", ["x", f"w{n}"], [f"{n}0"]),
                  helper.make_node("Reshape", [f"{n}0", "split_shape"], [f"{n}1"]),
                  helper.make_node("Transpose", [f"{n}1"], [f"{n}2"],
                                   perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3])]
    nodes += [
        helper.make_node("MatMul", ["q2", "k2"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["qk_s"]),
        helper.make_node("Softmax", ["qk_s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v2"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["merged"]),
        helper.make_node("MatMul", ["merged", "wo"], ["o"]),
        helper.make_node("Add", ["o", "x"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])
    return _model(nodes, [x], [y], inits)


def _typed(mod):
    return relay.transform.InferType()(mod)


def test_dim_params_import_as_shared_any_dims():
    model = bert_layer()
    mod = _typed(from_onnx(model)[0])
    main = mod["main"]
    x = main.params[0]
    assert str(x.type_annotation) == "Tensor[(?, ?, 32), float32]"
    assert str(main.ret_type) == "Tensor[(?, ?, 32), float32]"
    # the head split and merge stay static reshapes (0 copies a dim): no dyn.* op, no shape_of
    text = str(mod)
    assert "dyn." not in text and "shape_of" not in text, text
    assert "newshape=[0, 0, 4, 8]" in text and "newshape=[0, 0, 32]" in text


@pytest.mark.parametrize("batch, seq", [(1, 5), (3, 17)])
def test_bert_layer_matches_onnxruntime_at_any_shape(batch, seq):
    x = np.random.default_rng(batch * seq).standard_normal((batch, seq, 32)).astype("float32")
    _check(bert_layer(), {"x": x})


def test_shape_pins_dims_and_none_leaves_them_dynamic():
    model = bert_layer()
    mod = _typed(from_onnx(model, shape={"x": (2, 9, 32)})[0])
    assert str(mod["main"].ret_type) == "Tensor[(2, 9, 32), float32]"
    mod = _typed(from_onnx(model, shape={"x": (None, 9, 32)})[0])
    assert str(mod["main"].ret_type) == "Tensor[(?, 9, 32), float32]"


def test_flatten_of_a_dynamic_batch_cnn():
    w = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Shape", ["g"], ["gs"]),
             helper.make_node("Gather", ["gs", "c0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "m1"], ["flat"], axis=0),
             helper.make_node("Reshape", ["g", "flat"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         ["N", 3, "H", "W"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
                   [_init("w", w), _init("c0", np.array(0)), _init("ax0", np.array([0])),
                    _init("m1", np.array([-1]))])
    for shape in [(1, 3, 8, 8), (4, 3, 5, 7)]:
        mod = _check(model, {"x": np.random.default_rng(2).standard_normal(shape)
                             .astype("float32")})
    assert "dyn." not in str(mod)
    assert str(_typed(mod)["main"].ret_type) == "Tensor[(?, 4), float32]"


def _shape_input_model(op_type, data_shape, shape_input, extra_inputs=(), attrs=None,
                       out_dtype=TensorProto.FLOAT):
    """op_type(x, s, ...) with s a graph input: the shape arrives at run time."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, data_shape),
              helper.make_tensor_value_info("s", TensorProto.INT64, [shape_input])]
    names = ["x", "s", *[n for n, _ in extra_inputs]]
    node = helper.make_node(op_type, names, ["y"], **(attrs or {}))
    return _model([node], inputs, [helper.make_tensor_value_info("y", out_dtype, None)],
                  [_init(n, v) for n, v in extra_inputs])


@pytest.mark.parametrize("op_type, data, value, extra", [
    ("Reshape", (4, 6), [2, -1, 3], ()),
    ("Reshape", (4, 6), [0, 3, 2], ()),
    ("Expand", (3, 1), [2, 3, 4], ()),
    ("Expand", (3, 1), [1, 5], ()),
    ("Tile", (2, 3), [2, 2], ()),
    ("Slice", (5, 6), [1, 2], [("e", np.array([4, 6])), ("a", np.array([0, 1]))]),
])
def test_shape_inputs_at_run_time_give_dyn_ops(op_type, data, value, extra):
    model = _shape_input_model(op_type, list(data), len(value), extra)
    x = np.random.default_rng(3).standard_normal(data).astype("float32")
    mod = _check(model, {"x": x, "s": np.array(value, "int64")})
    assert "dyn." in str(mod)


def test_constant_of_shape_range_and_topk_at_run_time():
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["z"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])),
             helper.make_node("Range", ["lo", "hi", "step"], ["r"]),
             helper.make_node("TopK", ["x", "k"], ["tv", "ti"])]
    inputs = [helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
              helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("hi", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("step", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [1])]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in
               (("z", TensorProto.FLOAT), ("r", TensorProto.FLOAT), ("tv", TensorProto.FLOAT),
                ("ti", TensorProto.INT64))]
    model = _model(nodes, inputs, outputs)
    feeds = {"s": np.array([2, 3], "int64"), "lo": np.array(1.0, "float32"),
             "hi": np.array(4.0, "float32"), "step": np.array(0.5, "float32"),
             "x": np.random.default_rng(4).standard_normal((3, 8)).astype("float32"),
             "k": np.array([3], "int64")}
    mod = _check(model, feeds)
    text = str(mod)
    assert "dyn.full" in text and "dyn.topk" in text and "arange(" in text


def test_a_dynamic_model_through_relay_build_says_to_use_the_vm():
    mod, params = from_onnx(bert_layer())
    with pytest.raises(Exception, match=r"dynamic shapes.*'x' Tensor\[\(\?, \?, 32\)"):
        relay.build(mod, params=params)


def test_a_static_model_imports_exactly_as_before():
    # the same model with static dims: shape math folds to constants, no shape_of, no Any
    model = bert_layer()
    for dim in model.graph.input[0].type.tensor_type.shape.dim[:2]:
        dim.dim_value = 7
    mod, _ = from_onnx(model)
    text = str(mod)
    assert "?" not in text and "shape_of" not in text and "newshape=[7, 7, 4, 8]" in text
