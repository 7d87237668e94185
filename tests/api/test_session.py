"""compiler.load / InferenceSession: onnxruntime's calling convention over a relayjit build."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler.errors import CompilerError
from compiler.tools.session import InferenceSession, TensorInfo


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    """a[2,3] @ W[3,4] + b -> y, and relu(a) -> r (two outputs)."""
    rng = np.random.default_rng(0)
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3])]
    inits = [numpy_helper.from_array(rng.standard_normal((3, 4)).astype("float32"), "W"),
             numpy_helper.from_array(rng.standard_normal(4).astype("float32"), "b")]
    nodes = [helper.make_node("MatMul", ["a", "W"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"]),
             helper.make_node("Relu", ["a"], ["r"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [a], outs, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("session") / "model.onnx"
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def session(model_path) -> InferenceSession:
    return compiler.load(model_path)


def _expected(model_path, data):
    model = onnx.load(model_path)
    w, b = (numpy_helper.to_array(i) for i in model.graph.initializer)
    return data @ w + b, np.maximum(data, 0)


def test_metadata(session):
    assert session.get_inputs() == [TensorInfo("a", (2, 3), "float32")]
    assert session.get_outputs() == [TensorInfo("y", (2, 4), "float32"),
                                     TensorInfo("r", (2, 3), "float32")]


def test_run_in_both_forms(session, model_path):
    data = np.random.default_rng(1).standard_normal((2, 3)).astype("float32")
    y, r = _expected(model_path, data)
    got_y, got_r = session.run(None, {"a": data})
    np.testing.assert_allclose(got_y, y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_r, r)
    (only_r,) = session.run(["r"], {"a": data})
    np.testing.assert_array_equal(only_r, r)
    by_name = session.run({"a": data})
    assert list(by_name) == ["y", "r"]
    np.testing.assert_allclose(by_name["y"], y, rtol=1e-5, atol=1e-6)
    assert compiler.InferenceSession is InferenceSession


def test_exported_module_loads_with_generic_output_names(session, model_path, tmp_path):
    path = tmp_path / "model.rjit"
    session.factory.export_library(str(path))
    loaded = compiler.load(path)
    assert [o.name for o in loaded.get_outputs()] == ["output_0", "output_1"]
    data = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(loaded.run({"a": data})["output_1"], session.run(
        ["r"], {"a": data})[0])


def test_bad_feeds_and_names_are_named(session):
    data = np.ones((2, 3), "float32")
    with pytest.raises(KeyError, match=r"unknown input\(s\) \['b'\].*inputs are \['a'\]"):
        session.run(None, {"a": data, "b": data})
    with pytest.raises(ValueError, match=r"missing input\(s\) \['a'\]"):
        session.run(None, {})
    with pytest.raises(KeyError, match=r"unknown output\(s\) \['z'\].*\['y', 'r'\]"):
        session.run(["z"], {"a": data})
    with pytest.raises(ValueError, match=r"input 'a': expected shape \(2, 3\) dtype float32"):
        session.run(None, {"a": np.ones((3, 2), "float32")})
    with pytest.raises(TypeError, match="dict of name -> array"):
        session.run(None, [data])


def test_bad_paths_are_named(tmp_path):
    with pytest.raises(CompilerError, match="is a directory"):
        compiler.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such model file"):
        compiler.load(tmp_path / "none.onnx")
    text = tmp_path / "notes.onnx"
    text.write_text("hello")
    with pytest.raises(CompilerError, match="notes.onnx is not an ONNX model"):
        compiler.load(text)
