"""`relayjit compile/bench --timing`, progress lines when stderr is not a terminal, and
RELAYJIT_COMPILE_JOBS errors, on a tiny ONNX model built with onnx.helper."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.tools import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """Conv (with a constant Mul on its weight to fold) + Relu + Flatten + MatMul."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w"),
             numpy_helper.from_array(np.full((1, 1, 1, 1), 0.5, "float32"), "s"),
             numpy_helper.from_array(rng.standard_normal((256, 10)).astype("float32"), "d")]
    nodes = [helper.make_node("Mul", ["w", "s"], ["ws"]),
             helper.make_node("Conv", ["x", "ws"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("MatMul", ["f", "d"], ["y"])]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    path = str(tmp_path_factory.mktemp("timing") / "tiny.onnx")
    onnx.save(model, path)
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_compile_timing_prints_the_report(tiny_model, tmp_path, capsys):
    out_path = str(tmp_path / "tiny.rjit")
    code, out, err = run_cli(capsys, "compile", tiny_model, "-o", out_path, "--timing", "-q")
    assert code == 0, err
    assert err == ""  # -q: no progress lines either
    assert os.path.isfile(out_path)
    for label in ["relay.build timing", "frontend (ONNX import)", "pass FoldConstant",
                  "pass FuseOps", "lower fused functions to PrimFuncs", "LLVM IR emission",
                  "LLVM optimisation pipeline", "machine-code emission", "kernel loading",
                  "graph codegen + memory planning", "total", "compile cache"]:
        assert label in out, label


def test_compile_without_timing_prints_no_report(tiny_model, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "compile", tiny_model, "-o", str(tmp_path / "t.rjit"), "-q")
    assert code == 0 and "relay.build timing" not in out


def test_bench_timing(tiny_model, tmp_path, capsys):
    args = ["--timing", "--no-ort", "--repeat", "1", "--number", "1", "-q"]
    code, out, err = run_cli(capsys, "bench", tiny_model, *args)
    assert code == 0, err
    assert "relay.build timing" in out and "relayjit    median" in out
    exported = str(tmp_path / "tiny.rjit")
    assert cli.main(["compile", tiny_model, "-o", exported, "-q"]) == 0
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "bench", exported, *args)
    assert code == 0 and "no build timing" in out


def test_progress_lines_when_stderr_is_not_a_terminal(tiny_model, tmp_path, capsys):
    code, _, err = run_cli(capsys, "compile", tiny_model, "-o", str(tmp_path / "t.rjit"))
    assert code == 0
    assert re.search(r"^relayjit: optimising \(pass 1/\d+ InferType\)$", err, re.M)


def compile_in_subprocess(tiny_model, out_path, *extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "compiler.tools.cli", "compile", tiny_model,
                           "-o", out_path, *extra], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def test_plain_progress_in_a_subprocess_and_quiet_silences_it(tiny_model, tmp_path):
    proc = compile_in_subprocess(tiny_model, str(tmp_path / "a.rjit"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert "\r" not in proc.stderr and "\033" not in proc.stderr
    assert lines[0] == "relayjit: importing ONNX graph"
    assert any(re.fullmatch(r"relayjit: optimising \(pass \d+/\d+ FoldConstant\)", x)
               for x in lines)
    assert any(re.fullmatch(r"relayjit: compiling \d+ kernels with LLVM", x) for x in lines)
    assert re.fullmatch(r"relayjit: done in \d+\.\d s", lines[-1])
    assert all(x.startswith("relayjit: ") for x in lines)
    assert not any("lowering fused functions " in x for x in lines)  # no per-kernel lines
    quiet = compile_in_subprocess(tiny_model, str(tmp_path / "b.rjit"), "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.mark.parametrize("value", ["0", "abc"])
def test_bad_compile_jobs_is_a_clear_error(tiny_model, tmp_path, capsys, monkeypatch, value):
    monkeypatch.setenv("RELAYJIT_COMPILE_JOBS", value)
    code, _, err = run_cli(capsys, "compile", tiny_model, "-o", str(tmp_path / "t.rjit"), "-q")
    assert code == 1
    assert "RELAYJIT_COMPILE_JOBS" in err and repr(value) in err
    assert "Traceback" not in err
