"""compiler.load of ONNX models with dynamic axes: any valid shape on each call, a static
module per input-shape signature (bounded, least recently used dropped), a shape that breaks
the model's signature refused before any compile, control flow through the VM."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from runtime.factory import GraphExecutorFactoryModule
from runtime.specialised import TensorSpec
from runtime.vm import Executable

ort = pytest.importorskip("onnxruntime")


def _save(model, tmp_path, name="model.onnx") -> str:
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def dynamic_path(tmp_path_factory) -> str:
    """x[batch, seq, 8] and m[batch, seq]: y = relu(x @ W + b) * m[..., None], and
    z = Reshape(y, Concat(Shape(x)[0:1], [-1])), the batch read from Shape as exporters do."""
    rng = np.random.default_rng(0)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8]),
              helper.make_tensor_value_info("m", TensorProto.FLOAT, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4]),
               helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", None])]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 4)).astype("float32"), "W"),
             numpy_helper.from_array(rng.standard_normal(4).astype("float32"), "b"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([-1], np.int64), "rest"),
             numpy_helper.from_array(np.array([2], np.int64), "last")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["xwb"]),
             helper.make_node("Relu", ["xwb"], ["r"]),
             helper.make_node("Unsqueeze", ["m", "last"], ["m3"]),
             helper.make_node("Mul", ["r", "m3"], ["y"]),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero", "one"], ["batch"]),
             helper.make_node("Concat", ["batch", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["y", "target"], ["z"])]
    graph = helper.make_graph(nodes, "dynamic", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return _save(model, tmp_path_factory.mktemp("dynamic"))


def _feeds(batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, seq, 8)).astype("float32"),
            "m": (rng.random((batch, seq)) > 0.3).astype("float32")}


def _reference(path: str, feeds) -> list[np.ndarray]:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_any_shape_matches_onnxruntime_one_static_build_per_signature(dynamic_path):
    sess = compiler.load(dynamic_path)
    assert sess.get_inputs() == [TensorSpec("x", ("batch", "seq", 8), "float32"),
                                 TensorSpec("m", ("batch", "seq"), "float32")]
    assert sess.get_outputs()[1] == TensorSpec("z", ("batch", None), "float32")
    assert sess.model.builds == 0  # nothing is compiled before a shape is seen
    for batch, seq in [(1, 3), (2, 5), (3, 1), (1, 3), (2, 5)]:
        feeds = _feeds(batch, seq, seed=batch * 10 + seq)
        got = sess.run(None, feeds)
        for g, want in zip(got, _reference(dynamic_path, feeds)):
            assert g.shape == want.shape
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    assert (sess.model.builds, sess.model.hits) == (3, 2)
    assert all(isinstance(m, GraphExecutorFactoryModule) for m in sess.model.modules())
    assert sess.run({"x": _feeds(2, 5)["x"], "m": _feeds(2, 5)["m"]})["y"].shape == (2, 5, 4)


def test_specialisations_are_bounded_least_recently_used_first(dynamic_path):
    sess = compiler.load(dynamic_path, max_specializations=2)
    for seq in (1, 2, 3):
        sess.run(None, _feeds(1, seq))
    kept = [s["x"] for s in sess.model.specializations()]
    assert kept == [(1, 2, 8), (1, 3, 8)] and sess.model.evictions == 1
    sess.run(None, _feeds(1, 2))  # a hit moves it to the back
    sess.run(None, _feeds(1, 1))  # built again: it was dropped; (1, 3) goes now
    assert [s["x"] for s in sess.model.specializations()] == [(1, 2, 8), (1, 1, 8)]
    assert (sess.model.builds, sess.model.evictions) == (4, 2)
    with pytest.raises(ValueError, match="max_specializations must be an int >= 1"):
        compiler.load(dynamic_path, max_specializations=0)


def test_shapes_that_break_the_signature_are_refused_before_compiling(dynamic_path):
    sess = compiler.load(dynamic_path)
    bad_hidden = {"x": np.zeros((2, 5, 7), "float32"), "m": np.zeros((2, 5), "float32")}
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(batch, seq, 8\) dtype "
                                         r"float32, got shape \(2, 5, 7\) dtype float32: "
                                         r"dimension 2 must be 8"):
        sess.run(None, bad_hidden)
    two_seqs = {"x": np.zeros((2, 5, 8), "float32"), "m": np.zeros((2, 6), "float32")}
    with pytest.raises(ValueError, match=r"input 'm': expected shape \(batch, seq\).*got shape "
                                         r"\(2, 6\).*dimension 1 is 'seq', which input 'x' "
                                         r"gives as 5"):
        sess.run(None, two_seqs)
    with pytest.raises(ValueError, match=r"input 'm'.*rank 1, the model takes rank 2"):
        sess.run(None, {"x": np.zeros((2, 5, 8), "float32"), "m": np.zeros(5, "float32")})
    with pytest.raises(ValueError, match=r"input 'x'.*dtype float64.*must be float32"):
        sess.run(None, {"x": np.zeros((2, 5, 8)), "m": np.zeros((2, 5), "float32")})
    with pytest.raises(KeyError, match=r"unknown input\(s\) \['q'\]"):
        sess.run(None, {**_feeds(1, 1), "q": np.zeros(1)})
    with pytest.raises(ValueError, match=r"missing input\(s\) \['m'\].*m \(batch, seq\) float32"):
        sess.run(None, {"x": np.zeros((1, 1, 8), "float32")})
    assert sess.model.builds == 0


def test_shape_pins_make_a_static_session(dynamic_path):
    sess = compiler.load(dynamic_path, shape={"x": (2, 3, 8), "m": (2, 3)})
    assert sess.get_inputs()[0].shape == (2, 3, 8) and sess.model.builds == 0
    assert sess.get_outputs()[1].shape == (2, 12)  # from the built module
    assert isinstance(sess.factory, GraphExecutorFactoryModule)
    with pytest.raises(ValueError, match=r"dimension 1 must be 3"):
        sess.run(None, _feeds(2, 4))
    with pytest.raises(compiler.errors.CompilerError, match="not a graph input"):
        compiler.load(dynamic_path, shape={"nope": (1,)})
    with pytest.raises(ValueError, match="dynamic must be one of"):
        compiler.load(dynamic_path, dynamic="guess")


def test_run_time_if_runs_on_the_vm_per_shape(tmp_path):
    def branch(op, out):
        return helper.make_graph([helper.make_node(op, ["x", "x"], [out])], op, [],
                                 [helper.make_tensor_value_info(out, TensorProto.FLOAT,
                                                                ["batch", 4])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch("Add", "t"),
                          else_branch=branch("Mul", "e"))], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                 tmp_path)
    sess = compiler.load(path)
    for batch in (1, 3):
        for cond in (True, False):
            feeds = {"c": np.array(cond), "x": np.arange(4.0 * batch, dtype="float32")
                     .reshape(batch, 4)}
            np.testing.assert_array_equal(sess.run(None, feeds)[0],
                                          _reference(path, feeds)[0])
    assert [type(m) for m in sess.model.modules()] == [Executable, Executable]
