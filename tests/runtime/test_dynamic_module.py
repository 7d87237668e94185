"""Dynamic artefacts (runtime.dynamic_module) are untrusted files too: each field is checked on
load, a model that points outside the file is refused, a CPU the host lacks is refused."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
import runtime
from compiler.errors import CompilerError
from compiler.tools.session import load_model
from runtime import export, serving
from runtime.dynamic_module import DynamicModule
from runtime.target import host_info

from .test_untrusted_module import _sections, _write


def _model(external: bool = False):
    """y[batch, 4] = x[batch, 4] + c."""
    c = numpy_helper.from_array(np.arange(4, dtype="float32"), "c")
    if external:
        c.ClearField("raw_data")
        c.data_location = TensorProto.EXTERNAL
        c.external_data.add(key="location", value="/etc/hostname")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def artefact(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("dynamic") / "add.rjit")
    DynamicModule(_model().SerializeToString(), "onnx", 3, "llvm", host_info()) \
        .export_library(path)
    return path


def test_round_trip_and_run(artefact, tmp_path):
    module = runtime.load_module(artefact)
    assert isinstance(module, DynamicModule)
    assert (module.source_kind, module.opt_level, module.target, module.shape) == \
        ("onnx", 3, "llvm", {})
    sess = compiler.load(artefact)
    for batch in (1, 3):
        out = sess.run(None, {"x": np.ones((batch, 4), "float32")})[0]
        np.testing.assert_array_equal(out, 1 + np.arange(4, dtype="float32")[None]
                                      .repeat(batch, 0))
    pinned = str(tmp_path / "pinned.rjit")
    DynamicModule(module.source, "onnx", 1, "llvm", host_info(), {"x": (2, 4)}) \
        .export_library(pinned)
    assert compiler.load(pinned).get_inputs()[0].shape == (2, 4)
    assert compiler.load(pinned, shape={"x": (5, 4)}).get_inputs()[0].shape == (5, 4)
    with pytest.raises(ValueError, match="dynamic axes, compiled per input shape.*"
                                         "compiler.load"):
        runtime.specialised.load_model(artefact)


@pytest.mark.parametrize("field, value, message", [
    ("source", "tflite", "'source' is 'tflite', expected one of"),
    ("opt_level", 7, "'opt_level' is 7, expected 0 to 3"),
    ("opt_level", True, "'opt_level' is True"),
    ("target", 5, "'target' is 5, expected a target string"),
    ("target", "x" * 2000, "'target' is 'xxx"),
    ("shape", {"x": [-1, 4]}, "'shape' is .* expected {input name: \\[dims >= 0\\]}"),
    ("shape", [1, 2], "'shape' is \\[1, 2\\]"),
    ("shape", None, "'shape' is None"),
])
def test_each_metadata_field_is_checked(artefact, tmp_path, field, value, message):
    sections = _sections(artefact)
    meta = json.loads(sections[3])
    meta[field] = value
    sections[3] = json.dumps(meta).encode()
    edited = str(tmp_path / "edited.rjit")
    _write(edited, sections)
    with pytest.raises(ValueError, match=f"not a loadable relayjit module: metadata field "
                                         f"{message}"):
        runtime.load_module(edited)


def test_sections_a_dynamic_module_cannot_have_are_refused(artefact, tmp_path):
    for index, content, message in [(2, b"\x01\x00\x00\x00" + b"\x00" * 8, "no object code"),
                                    (1, b"params", "no params"),
                                    (0, b"", "model section is empty")]:
        sections = _sections(artefact)
        sections[index] = content
        edited = str(tmp_path / f"edited{index}.rjit")
        _write(edited, sections)
        with pytest.raises(ValueError, match=message):
            runtime.load_module(edited)
    sections = _sections(artefact)
    meta = json.loads(sections[3])
    del meta["target"]
    sections[3] = json.dumps(meta).encode()
    _write(str(tmp_path / "no_target.rjit"), sections)
    with pytest.raises(ValueError, match="metadata field 'target' is missing"):
        runtime.load_module(str(tmp_path / "no_target.rjit"))


def test_a_model_that_reads_other_files_or_is_not_onnx_is_refused(tmp_path):
    external = str(tmp_path / "external.rjit")
    DynamicModule(_model(external=True).SerializeToString(), "onnx", 3, "llvm",
                  host_info()).export_library(external)
    with pytest.raises(CompilerError, match="tensor 'c' of its model is stored outside the "
                                            "file"):
        compiler.load(external)
    garbage = str(tmp_path / "garbage.rjit")
    DynamicModule(b"\xff\xfe not protobuf", "onnx", 3, "llvm", host_info()) \
        .export_library(garbage)
    with pytest.raises(CompilerError, match="its model does not decode as ONNX"):
        compiler.load(garbage)


def test_a_cpu_the_host_lacks_is_refused_before_anything_is_built(artefact, tmp_path):
    sections = _sections(artefact)
    meta = json.loads(sections[3])
    absent = next(f[1:] for f in host_info().features.split(",") if f.startswith("-"))
    meta["features"] += ",+" + absent
    sections[3] = json.dumps(meta).encode()
    edited = str(tmp_path / "needs_more.rjit")
    _write(edited, sections)
    with pytest.raises(export.UnsupportedCPUError, match=f"lacks: {absent}"):
        compiler.load(edited)


def test_served_requests_of_any_batch(artefact):
    service = serving.ModelService(artefact, loader=load_model)
    assert service.batch_size == 1
    assert service.metadata()["inputs"] == {"x": {"shape": ["batch", 4], "dtype": "float32"}}
    for batch in (1, 3, 1):
        arrays = service.decode(json.dumps({"x": [[1.0] * 4] * batch}).encode(),
                                serving.JSON_TYPE)
        service.check(arrays)
        (out,) = service.run(arrays)
        assert out.shape == (batch, 4) and out[0, 3] == 4.0
    with pytest.raises(serving.RequestError, match=r"expected shape \(batch, 4\).*got shape "
                                                   r"\(2, 5\).*dimension 1 must be 4"):
        service.check(service.decode(json.dumps({"x": [[1.0] * 5] * 2}).encode(),
                                     serving.JSON_TYPE))
    assert service.model.builds == 2
    with pytest.raises(ValueError, match="dynamic axes"):
        serving.ModelService(artefact)
