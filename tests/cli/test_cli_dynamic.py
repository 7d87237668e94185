"""The relayjit commands on a model with dynamic axes: shapes from --input, stated defaults for
made-up inputs, --shape pins, compile -> a dynamic artefact that run and compiler.load take,
profile and inspect at one specialisation. In-process (cli.main), on a two-input model."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
import runtime
from compiler.tools import cli
from runtime.dynamic_module import DynamicModule

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli_dynamic")


@pytest.fixture(scope="module")
def model_path(workdir) -> str:
    """ids[batch, seq] int64 -> Gather(table[50, 8]) * mask[batch, seq, 1] -> MatMul(8x6)
    -> Softmax: the embedding-lookup front of a transformer, with dynamic axes."""
    rng = np.random.default_rng(0)
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", "seq", 6])]
    inits = [numpy_helper.from_array(rng.standard_normal((50, 8)).astype("float32"), "table"),
             numpy_helper.from_array(rng.standard_normal((8, 6)).astype("float32"), "w"),
             numpy_helper.from_array(np.array([2], np.int64), "axis")]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"]),
             helper.make_node("Unsqueeze", ["mask", "axis"], ["m"]),
             helper.make_node("Mul", ["emb", "m"], ["x"]),
             helper.make_node("MatMul", ["x", "w"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    model = helper.make_model(helper.make_graph(nodes, "dyn", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = workdir / "dyn.onnx"
    onnx.save(model, str(path))
    return str(path)


def _feeds(batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 100 + seq)
    return {"ids": rng.integers(0, 50, (batch, seq), dtype=np.int64),
            "mask": (rng.random((batch, seq)) > 0.2).astype("float32")}


def _npz(workdir, name: str, feeds) -> str:
    path = str(workdir / name)
    np.savez(path, **feeds)
    return path


def _onnxruntime(path: str, feeds) -> np.ndarray:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_run_takes_the_shapes_of_its_inputs(model_path, workdir, capsys):
    for batch, seq in [(2, 7), (1, 3)]:
        feeds = _feeds(batch, seq)
        out = str(workdir / f"out_{batch}_{seq}.npz")
        code = cli.main(["run", model_path, "--input", _npz(workdir, "f.npz", feeds),
                         "--output", out, "-q", "--json"])
        assert code == 0, capsys.readouterr().err
        report = json.loads(capsys.readouterr().out)
        assert report["invented_inputs"] == [] and report["outputs"][0]["name"] == "probs"
        with np.load(out) as got:
            np.testing.assert_allclose(got["probs"], _onnxruntime(model_path, feeds),
                                       rtol=1e-5, atol=1e-6)


def test_made_up_inputs_state_the_default_and_pins_fix_symbols(model_path, workdir, capsys):
    out = str(workdir / "made_up.npz")
    assert cli.main(["run", model_path, "--output", out]) == 0
    err = capsys.readouterr().err
    assert ("no --input for 'ids' (shape (batch, seq) int64): using arange(n)/n at (1, 1): "
            "dynamic dims batch, seq default to 1 (pin them with --shape ids=D1,D2,...)") in err
    with np.load(out) as got:
        assert got["probs"].shape == (1, 1, 6)
    # one input given: the other takes its symbols from it, and is said to
    given = str(workdir / "ids.npy")
    np.save(given, _feeds(3, 4)["ids"])
    assert cli.main(["run", model_path, "--input", f"ids={given}", "--output", out]) == 0
    err = capsys.readouterr().err
    assert "no --input for 'mask' (shape (batch, seq) float32): using arange(n)/n\n" in err
    with np.load(out) as got:
        assert got["probs"].shape == (3, 4, 6)
    # --shape pins one input, and with it the symbols the other shares
    assert cli.main(["run", model_path, "--shape", "ids=2,5", "--output", out, "-q"]) == 0
    with np.load(out) as got:
        assert got["probs"].shape == (2, 5, 6)
    capsys.readouterr()


def test_inputs_breaking_the_signature_are_one_line_errors(model_path, workdir, capsys):
    feeds = {"ids": np.zeros((2, 5), np.int64), "mask": np.ones((2, 4), "float32")}
    assert cli.main(["run", model_path, "--input", _npz(workdir, "bad.npz", feeds), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("relayjit: error: ValueError: input 'mask': expected shape "
                          "(batch, seq) dtype float32, got shape (2, 4)")
    assert "dimension 1 is 'seq', which input 'ids' gives as 5" in err


def test_compile_writes_a_dynamic_artefact_that_run_and_load_take(model_path, workdir,
                                                                  capsys):
    artefact = str(workdir / "dyn.rjit")
    assert cli.main(["compile", model_path, "-o", artefact, "--opt-level", "2"]) == 0
    assert "has dynamic axes (ids (batch, seq), mask (batch, seq))" in capsys.readouterr().out
    module = runtime.load_module(artefact)
    assert isinstance(module, DynamicModule) and module.opt_level == 2
    feeds = _feeds(3, 6)
    out = str(workdir / "from_artefact.npz")
    assert cli.main(["run", artefact, "--input", _npz(workdir, "g.npz", feeds), "--output",
                     out, "-q"]) == 0
    with np.load(out) as got:
        np.testing.assert_allclose(got["probs"], _onnxruntime(model_path, feeds), rtol=1e-5,
                                   atol=1e-6)
    sess = compiler.load(artefact)
    for batch, seq in [(1, 9), (4, 2)]:
        feeds = _feeds(batch, seq)
        np.testing.assert_allclose(sess.run(None, feeds)[0], _onnxruntime(model_path, feeds),
                                   rtol=1e-5, atol=1e-6)
    assert sess.model.builds == 2
    # pinned at compile time: a static module, as before dynamic shapes
    static = str(workdir / "static.rjit")
    assert cli.main(["compile", model_path, "-o", static, "--shape", "ids=2,3",
                     "--shape", "mask=2,3", "-q"]) == 0
    assert not isinstance(runtime.load_module(static), DynamicModule)
    capsys.readouterr()


def test_bench_profile_and_inspect_work_at_one_specialisation(model_path, workdir, capsys):
    feeds = _npz(workdir, "h.npz", _feeds(2, 8))
    assert cli.main(["bench", model_path, "--input", feeds, "--repeat", "2", "--number", "1",
                     "-q", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["relayjit_ms"]["median"] > 0 and report["onnxruntime_ms"]["median"] > 0
    assert cli.main(["profile", model_path, "--input", feeds, "--repeat", "2", "-q",
                     "--json"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert any("2x8" in "x".join(map(str, n["output_shapes"][0])) for n in nodes)
    assert cli.main(["inspect", model_path, "--json", "-q"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inputs"][0] == {"name": "ids", "shape": ["batch", "seq"]}
    assert info["num_fused_groups"] >= 1
