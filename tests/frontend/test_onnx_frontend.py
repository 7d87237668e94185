"""from_onnx behaviours: params vs inputs, shape overrides, errors, folding, opset versions."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import relay
from compiler.errors import CompilerError, OpNotImplemented
from compiler.frontend import from_onnx
from compiler.op.interpreter import evaluate
from compiler.ir import assert_structural_equal
from compiler.ir.expr import Call, Constant, Var
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _run(mod, params, *inputs):
    main = mod["main"]
    args = list(inputs) + [params[p.name_hint].numpy() for p in main.params[len(inputs):]]
    return evaluate(mod, args)


def _ops(mod) -> list:
    return [n.op.name for n in post_order(mod["main"].body) if isinstance(n, Call)]


def _add_weight_model(opset=17):
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    node = helper.make_node("Add", ["x", "w"], ["y"])
    return _model([node], [_tensor("x", [2, 3])], [_tensor("y", [2, 3])], [w])


def test_initializers_become_params_after_inputs():
    mod, params = from_onnx(_add_weight_model())
    names = [p.name_hint for p in mod["main"].params]
    assert names == ["x", "w"]
    assert list(params) == ["w"]
    assert params["w"].dtype == "float32" and params["w"].shape == (2, 3)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(_run(mod, params, x), x + np.arange(6).reshape(2, 3))


def test_graph_input_that_is_an_initializer_is_a_param():
    model = _add_weight_model()
    model.graph.input.append(_tensor("w", [2, 3]))
    mod, params = from_onnx(model)
    assert [p.name_hint for p in mod["main"].params] == ["x", "w"]
    assert list(params) == ["w"]


def test_freeze_params_makes_constants():
    mod, params = from_onnx(_add_weight_model(), freeze_params=True)
    assert params == {}
    assert [p.name_hint for p in mod["main"].params] == ["x"]
    consts = [n for n in post_order(mod["main"].body) if isinstance(n, Constant)]
    assert len(consts) == 1 and consts[0].data.shape == (2, 3)


def test_shape_override_and_unknown_name_error():
    node = helper.make_node("Relu", ["x"], ["y"])
    model = _model([node], [_tensor("x", ["batch", 4])], [_tensor("y", ["batch", 4])])
    mod, _ = from_onnx(model, shape={"x": (3, 4)})
    assert mod["main"].params[0].type_annotation == TensorType((3, 4), "float32")
    with pytest.raises(CompilerError, match="'nope'.*not a graph input"):
        from_onnx(model, shape={"nope": (1,)})


def test_unknown_dim_imports_as_any_and_shape_pins_it():
    node = helper.make_node("Relu", ["x"], ["y"])
    model = _model([node], [_tensor("x", ["batch", 4])], [_tensor("y", ["batch", 4])])
    mod, _ = from_onnx(model)
    assert str(mod["main"].params[0].type_annotation) == "Tensor[(?, 4), float32]"
    mod, _ = from_onnx(model, shape={"x": (2, 4)})
    assert str(mod["main"].params[0].type_annotation) == "Tensor[(2, 4), float32]"


def test_all_missing_ops_reported_at_once():
    nodes = [helper.make_node("FancyOp", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("OtherOp", ["b"], ["c"]),
             helper.make_node("FancyOp", ["c"], ["y"])]
    model = _model(nodes, [_tensor("x", [2])], [_tensor("y", [2])])
    with pytest.raises(OpNotImplemented) as info:
        from_onnx(model)
    message = str(info.value)
    assert "FancyOp" in message and "OtherOp" in message and "Relu" not in message
    assert message.count("FancyOp") == 1


def test_shape_chain_folds_to_static_reshape():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        helper.make_node("Concat", ["d0u", "minus1"], ["newshape"], axis=0),
        helper.make_node("Reshape", ["x", "newshape"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    model = _model(nodes, [_tensor("x", [2, 3, 4])], [_tensor("y", [2, 12])], inits)
    mod, params = from_onnx(model, freeze_params=True)
    assert _ops(mod) == ["reshape"]
    assert mod["main"].body.attrs.newshape == (2, 12)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(_run(mod, params, x), x.reshape(2, 12))


def test_shape_chain_over_params_is_static_without_freezing():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array([4, -1], np.int64), "shape")]
    model = _model(nodes, [_tensor("x", [2, 6])], [_tensor("y", [4, 3])], inits)
    mod, params = from_onnx(model)
    assert mod["main"].body.attrs.newshape == (4, 3)
    assert [p.name_hint for p in mod["main"].params] == ["x"]  # the unused shape param is dropped


def test_a_shape_input_known_at_run_time_imports_as_a_dyn_op_the_graph_executor_refuses():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    model = _model(nodes, [_tensor("x", [2, 6]), _tensor("s", [2], TensorProto.INT64)],
                   [_tensor("y", [4, 3])])
    mod, params = from_onnx(model)
    assert "dyn.reshape(%x, %s)" in str(mod)
    with pytest.raises(CompilerError, match="dynamic shapes.*VM"):
        relay.build(mod, params=params)


def test_int64_constants_stay_int64():
    nodes = [helper.make_node("Add", ["x", "c"], ["y"])]
    inits = [numpy_helper.from_array(np.array([1, 2], np.int64), "c")]
    model = _model(nodes, [_tensor("x", [2], TensorProto.INT64)],
                   [_tensor("y", [2], TensorProto.INT64)], inits)
    mod, _ = from_onnx(model, freeze_params=True)
    const = [n for n in post_order(mod["main"].body) if isinstance(n, Constant)][0]
    assert const.data.dtype == "int64"
    out = _run(mod, {}, np.array([10, 20], np.int64))
    assert out.dtype == np.int64 and out.tolist() == [11, 22]


def _squeeze_model(opset):
    x = _tensor("x", [1, 3, 1])
    y = _tensor("y", [3])
    if opset < 13:
        node = helper.make_node("Squeeze", ["x"], ["y"], axes=[0, 2])
        return _model([node], [x], [y], opset=opset)
    node = helper.make_node("Squeeze", ["x", "axes"], ["y"])
    axes = numpy_helper.from_array(np.array([0, -1], np.int64), "axes")
    return _model([node], [x], [y], [axes], opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_axes_attribute_then_input(opset):
    mod, params = from_onnx(_squeeze_model(opset))
    x = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
    np.testing.assert_array_equal(_run(mod, params, x), x.reshape(3))


@pytest.mark.parametrize("opset,expected_axis", [(11, None), (13, 2)])
def test_softmax_flattening_before_opset13(opset, expected_axis):
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    model = _model([node], [_tensor("x", [2, 3, 4])], [_tensor("y", [2, 3, 4])], opset=opset)
    mod, params = from_onnx(model)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    if expected_axis is None:  # opset < 13: softmax over the flattened trailing dims
        flat = x.reshape(2, 12)
        want = (np.exp(flat) / np.exp(flat).sum(1, keepdims=True)).reshape(2, 3, 4)
    else:
        want = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    np.testing.assert_allclose(_run(mod, params, x), want, rtol=1e-5)


def test_opset_argument_overrides_model_opset():
    node = helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0])
    model = _model([node], [_tensor("x", [3])], [_tensor("y", [1, 3])], opset=11)
    mod, params = from_onnx(model)
    assert _run(mod, params, np.ones(3, np.float32)).shape == (1, 3)
    with pytest.raises(CompilerError, match="Unsqueeze.*axes are required"):
        from_onnx(model, opset=13)  # opset 13 reads axes from an input


def test_clip_min_max_attribute_vs_input():
    x = np.array([-2, 0.5, 3], np.float32)
    old = _model([helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=1.0)],
                 [_tensor("x", [3])], [_tensor("y", [3])], opset=6)
    inits = [numpy_helper.from_array(np.array(-1, np.float32), "lo"),
             numpy_helper.from_array(np.array(1, np.float32), "hi")]
    new = _model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [_tensor("x", [3])],
                 [_tensor("y", [3])], inits, opset=13)
    for model in (old, new):
        mod, params = from_onnx(model)
        np.testing.assert_array_equal(_run(mod, params, x), [-1, 0.5, 1])


def test_dropout_unused_mask_output_dropped_and_multiple_outputs_tuple():
    nodes = [helper.make_node("Dropout", ["x"], ["d", ""]),
             helper.make_node("Neg", ["d"], ["y"])]
    model = _model(nodes, [_tensor("x", [2])], [_tensor("y", [2]), _tensor("d", [2])])
    mod, params = from_onnx(model)
    out = _run(mod, params, np.array([1, 2], np.float32))
    assert isinstance(out, tuple) and out[0].tolist() == [-1, -2] and out[1].tolist() == [1, 2]


def test_all_constant_nodes_fold():
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
        np.array([1.0, 4.0], np.float32))), helper.make_node("Sqrt", ["c"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["y"])]
    model = _model(nodes, [_tensor("x", [2])], [_tensor("y", [2])])
    mod, params = from_onnx(model)
    assert _ops(mod) == ["multiply"]
    np.testing.assert_array_equal(_run(mod, params, np.ones(2, np.float32)), [1, 2])


@pytest.mark.parametrize("model", [42, None, ["model.onnx"]])
def test_bad_model_argument(model):
    from compiler.frontend.onnx_ops.common import FrontendError
    with pytest.raises(FrontendError, match=r"expects an onnx.ModelProto, its serialized bytes "
                                            r"or a model file path, got " + type(model).__name__):
        from_onnx(model)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_serialized_model_bytes(wrap):
    """from_onnx(model.SerializeToString()) converts the same as the ModelProto."""
    model = _add_weight_model()
    mod, params = from_onnx(wrap(model.SerializeToString()))
    want, want_params = from_onnx(model)
    assert_structural_equal(mod["main"], want["main"])
    assert params.keys() == want_params.keys()


def test_undecodable_bytes_are_a_frontend_error():
    from compiler.frontend.onnx_ops.common import FrontendError
    data = _add_weight_model().SerializeToString()
    for blob in (data[: len(data) // 2], np.random.default_rng(0).bytes(300)):
        with pytest.raises(FrontendError, match=rf"the {len(blob)} bytes given: not an ONNX "
                                                r"model \(its contents do not decode"):
            from_onnx(blob)


def test_model_files_that_are_not_onnx_are_frontend_errors(tmp_path):
    """Truncated or random bytes: the frontend's error naming the file, not protobuf's."""
    from compiler.frontend.onnx_ops.common import FrontendError
    data = _add_weight_model().SerializeToString()
    cases = {"truncated.onnx": data[: len(data) // 2], "random.onnx":
             np.random.default_rng(0).bytes(300), "head.onnx": data[:2]}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(FrontendError) as info:
            from_onnx(str(path))
        message = str(info.value)
        assert ("not an ONNX model" in message and str(path) in message) or \
            "no outputs" in message, message
    with pytest.raises(FrontendError, match="no outputs"):
        from_onnx(onnx.ModelProto())
    with pytest.raises(FrontendError, match="is a directory; expected an ONNX model file"):
        from_onnx(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="absent.onnx: no such file"):
        from_onnx(str(tmp_path / "absent.onnx"))
    good = tmp_path / "good.onnx"
    good.write_bytes(data)
    mod, _ = from_onnx(good)  # a pathlib.Path is a path too
    assert [p.name_hint for p in mod["main"].params] == ["x", "w"]


@pytest.mark.parametrize("node,inputs,match", [
    (helper.make_node("Softmax", ["x"], ["y"], name="sm", axis="last"), {"x": [2, 3]},
     r"node 'sm' \(Softmax\): attribute 'axis' must be an int, got a string 'last'"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[2.0, 2.0]),
     {"x": [1, 1, 5, 5], "w": [1, 1, 3, 3]},
     r"node 'conv' \(Conv\): attribute 'strides' must be a list of ints, got a list of "
     r"floats \[2.0, 2.0\]"),
    (helper.make_node("Transpose", ["x"], ["y"], name="tr", perm="10"), {"x": [2, 3]},
     r"node 'tr' \(Transpose\): attribute 'perm' must be a list of ints, got a string"),
    (helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=[0.1]), {"x": [2, 3]},
     r"node 'lr' \(LeakyRelu\): attribute 'alpha' must be a float, got a list of floats"),
    (helper.make_node("Transpose", ["x"], ["y"], name="tr2", perm=[0, 0]), {"x": [2, 3]},
     r"node 'tr2' \(Transpose\): .*not a permutation"),
    (helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
     {"x": [2, 3, 4, 5], "w": [4, 5, 6]},
     r"node 'mm' \(MatMul\): A's batch dimensions \(2, 3\) and B's batch dimensions "
     r"\(4,\) do not broadcast"),
], ids=["softmax-axis-string", "conv-strides-floats", "transpose-perm-string",
        "leakyrelu-alpha-list", "transpose-perm-repeated", "matmul-batch-mismatch"])
def test_bad_attributes_and_shapes_name_the_node(node, inputs, match):
    from compiler.frontend.onnx_ops.common import FrontendError
    model = _model([node], [_tensor(k, v) for k, v in inputs.items()], [_tensor("y", None)])
    with pytest.raises(FrontendError, match=match):
        from_onnx(model)


def test_expand_that_does_not_broadcast_names_the_node():
    from compiler.frontend.onnx_ops.common import FrontendError
    shape = numpy_helper.from_array(np.array([4, 5], np.int64), "s")
    node = helper.make_node("Expand", ["x", "s"], ["y"], name="ex")
    model = _model([node], [_tensor("x", [2, 3])], [_tensor("y", None)], [shape])
    with pytest.raises(FrontendError, match=r"node 'ex' \(Expand\): input shape \(2, 3\) "
                                            r"and shape \(4, 5\) do not broadcast"):
        from_onnx(model)
    bad = numpy_helper.from_array(np.array([-1, 3], np.int64), "s")
    model = _model([node], [_tensor("x", [2, 3])], [_tensor("y", None)], [bad])
    with pytest.raises(FrontendError, match=r"node 'ex' \(Expand\): .*negative"):
        from_onnx(model)


def test_a_converters_raw_error_is_reported_at_its_node():
    """A converter corner that raises ValueError/IndexError still names the node."""
    from compiler.frontend.onnx_ops.common import CONVERTERS, FrontendError, converter

    def broken(ctx, inputs):
        return inputs[5]  # IndexError

    converter("Broken", domain="test.scratch")(broken)
    try:
        node = helper.make_node("Broken", ["x"], ["y"], name="b", domain="test.scratch")
        graph = helper.make_graph([node], "g", [_tensor("x", [2])], [_tensor("y", [2])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("test.scratch", 1)])
        with pytest.raises(FrontendError, match=r"node 'b' \(Broken\): cannot convert: "
                                                r"IndexError"):
            from_onnx(model)
    finally:
        del CONVERTERS[("test.scratch", "Broken")]


def test_input_vars_keep_model_dtype():
    node = helper.make_node("Identity", ["x"], ["y"])
    model = _model([node], [_tensor("x", [2], TensorProto.INT32)],
                   [_tensor("y", [2], TensorProto.INT32)])
    mod, _ = from_onnx(model)
    param = mod["main"].params[0]
    assert isinstance(param, Var) and param.type_annotation.dtype == "int32"
    assert onnx.checker.check_model(model) is None


def test_frontend_infer_type_errors_name_the_op_and_types():
    from compiler.frontend.onnx_ops.common import FrontendError, infer_type, op
    from compiler.ir.expr import var
    x, y = var("x", shape=(2, 3)), var("y", shape=(3, 2))
    memo: dict = {}
    with pytest.raises(FrontendError, match=r"add rejects argument types \(Tensor\[\(2, 3\), "
                                            r"float32\], Tensor\[\(3, 2\), float32\]\)"):
        infer_type(op("add", x, y), memo)
    with pytest.raises(FrontendError, match="variable %z has no type annotation"):
        infer_type(op("negative", var("z")), memo)
    total = op("add", x, x)
    assert infer_type(total, memo) == memo[total]
    assert infer_type(op("negative", total), memo).shape == (2, 3)  # reuses memo[total]


def test_shape_override_errors():
    """shape= may not name an initializer, and an input without shape info must be given one."""
    with pytest.raises(CompilerError, match="'w'.*not a graph input.*\\['x'\\]"):
        from_onnx(_add_weight_model(), shape={"w": (2, 3)})
    node = helper.make_node("Relu", ["x"], ["y"])
    shapeless = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    model = _model([node], [shapeless], [_tensor("y", [3])])
    with pytest.raises(CompilerError, match=r"'x' has no shape.*shape=\{'x'"):
        from_onnx(model)
    mod, _ = from_onnx(model, shape={"x": (3,)})
    assert mod["main"].params[0].type_annotation == TensorType((3,), "float32")


def test_converters_are_chosen_by_opset_and_registered_once():
    from compiler.frontend.onnx_ops.common import CONVERTERS, converter, find_converter
    versions = dict(CONVERTERS["Squeeze"])
    assert find_converter("Squeeze", 12) is versions[1]
    assert find_converter("Squeeze", 13) is versions[13]
    assert find_converter("Squeeze", 21) is versions[13]
    assert find_converter("NoSuchOp", 21) is None
    assert find_converter("Trilu", 13) is None  # Trilu exists from opset 14
    with pytest.raises(ValueError, match="Einsum .since opset 12. is already registered"):
        converter("Einsum", since=12)(lambda ctx, inputs: None)
    assert len(CONVERTERS["Einsum"]) == 1


def test_unused_optional_outputs_are_dropped():
    """TopK's indices output left empty: only the values are computed and returned."""
    k = numpy_helper.from_array(np.array([2], np.int64), "k")
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", ""])]
    model = _model(nodes, [_tensor("x", [4])], [_tensor("v", [2])], [k])
    mod, params = from_onnx(model, freeze_params=True)
    out = _run(mod, params, np.array([3, 1, 4, 2], np.float32))
    assert not isinstance(out, tuple) and out.tolist() == [4, 3]
