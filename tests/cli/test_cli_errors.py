"""relayjit's output-path and file-system errors, in a real subprocess: one clear line on
stderr, no traceback, a non-zero exit code, and the check made before any compiling."""
from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto, helper


def _model(path, op_type: str = "Relu") -> str:
    """x -> op_type -> y and x -> Neg -> z (two outputs)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "yz"]
    nodes = [helper.make_node(op_type, ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], outs),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def relayjit(*argv: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.tools.cli", *argv, "-q"], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _one_line_error(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("relayjit: error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("make_output, expected", [
    (lambda tmp: str(tmp / "missing_dir" / "x.rjit"), "missing_dir does not exist"),
    (lambda tmp: str(tmp / "model.onnx" / "x.rjit"), "model.onnx is not a directory"),
    (lambda tmp: str(tmp), "it is a directory; give a file path"),
])
def test_compile_into_a_bad_output_path_fails_before_compiling(tmp_path, make_output,
                                                                expected):
    # An op the frontend does not know: had the compile started, that would be the error.
    model = _model(tmp_path / "model.onnx", op_type="NoSuchOperator")
    proc = relayjit("compile", model, "-o", make_output(tmp_path), cwd=tmp_path)
    line = _one_line_error(proc, 2)
    assert "bad --output" in line and expected in line
    assert "NoSuchOperator" not in proc.stderr


def test_run_output_into_a_missing_directory_fails_before_running(tmp_path):
    model = _model(tmp_path / "model.onnx", op_type="NoSuchOperator")
    proc = relayjit("run", model, "--output", str(tmp_path / "nowhere" / "out"), cwd=tmp_path)
    line = _one_line_error(proc, 2)
    assert "nowhere does not exist" in line and "NoSuchOperator" not in line


def test_os_error_while_writing_is_one_line(tmp_path):
    """The second output's file is a directory: the OSError np.save raises becomes a message."""
    model = _model(tmp_path / "model.onnx")
    (tmp_path / "out_1.npy").mkdir()
    proc = relayjit("run", model, "--output", str(tmp_path / "out"), cwd=tmp_path)
    line = _one_line_error(proc, 1)
    assert line == f"relayjit: error: Is a directory: {tmp_path / 'out_1.npy'}"
    assert (tmp_path / "out_0.npy").is_file()
