"""The relayjit command line through compiler.tools.cli.main([...]): every subcommand, errors.

squeezenet (the light model the onnx package ships) is compiled once per module and exported;
the run/bench tests load that export, so the module costs one compile plus the inspect/demo
ones.
"""
from __future__ import annotations


import numpy as np
import pytest

from compiler.tools import cli
from compiler.tools.model_zoo import light_model_path


@pytest.fixture(scope="module")
def onnx_path() -> str:
    return light_model_path("squeezenet")


@pytest.fixture(scope="module")
def exported(onnx_path, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("cli") / "squeezenet.rjit")
    assert cli.main(["compile", onnx_path, "-o", out, "-q"]) == 0
    return out


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ["compile", "run", "bench", "inspect", "demo"]:
        assert command in out


def test_no_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
    assert "required" in capsys.readouterr().err


def test_compile_writes_a_loadable_module(exported):
    import runtime
    from runtime import graph_executor
    gmod = graph_executor.GraphModule(runtime.load_module(exported)["default"](runtime.cpu()))
    assert gmod.get_input_info()[0] == {"data_0": (1, 3, 224, 224)}


def test_run_exported_module_writes_outputs(exported, tmp_path, capsys):
    stem = str(tmp_path / "out")
    code, out, _ = run_cli(capsys, "run", exported, "--output", stem)
    assert code == 0
    assert "output 0: shape=(1, 1000, 1, 1) dtype=float32" in out and "ran in" in out
    saved = np.load(stem + "_0.npy")
    assert saved.shape == (1, 1000, 1, 1)
    np.testing.assert_allclose(saved.sum(), 1.0, rtol=1e-4)  # softmax output


def test_run_with_input_file(exported, tmp_path, capsys):
    data = tmp_path / "data.npy"
    np.save(data, np.zeros((1, 3, 224, 224), "float32"))
    code, out, err = run_cli(capsys, "run", exported, "--input", f"data_0={data}",
                             "--output", str(tmp_path / "o"))
    assert code == 0, err
    assert (tmp_path / "o_0.npy").exists()


def test_bench_exported_module(exported, capsys):
    code, out, _ = run_cli(capsys, "bench", exported, "--repeat", "2", "--number", "1", "-q")
    assert code == 0
    assert "relayjit    median" in out and "(2 x 1 runs" in out


@pytest.mark.usefixtures("keep_thread_count")
def test_bench_and_run_set_the_thread_count(exported, onnx_path, tmp_path, capsys):
    from runtime import threadpool

    code, out, err = run_cli(capsys, "bench", onnx_path, "--repeat", "1", "--number", "1",
                             "--threads", "3", "-q")
    assert code == 0, err
    assert "3 thread(s)" in out and "onnxruntime median" in out
    assert threadpool.get_num_threads() == 3
    code, _, err = run_cli(capsys, "run", exported, "--threads", "2",
                           "--output", str(tmp_path / "o"))
    assert code == 0, err
    assert threadpool.get_num_threads() == 2


@pytest.mark.parametrize("value", ["0", "-3", "two", "100000"])
def test_bad_thread_count_is_a_usage_error(exported, capsys, value):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", exported, "--threads", value])
    assert exc.value.code == 2
    assert "--threads" in capsys.readouterr().err


def test_inspect(onnx_path, capsys):
    code, out, _ = run_cli(capsys, "inspect", onnx_path, "-q")
    assert code == 0
    assert "input  data_0: [1, 3, 224, 224]" in out
    assert "ONNX ops: " in out and "Conv x26" in out
    assert "fused groups:" in out and "fused_" in out


def test_demo_matches_reference(capsys):
    code, out, _ = run_cli(capsys, "demo", "--model", "squeezenet", "-q")
    assert code == 0
    assert "MATCH" in out and "MISMATCH" not in out


# ----- errors: one line on stderr, exit code 2 (user mistake) or 1 (compiler refused)

def test_missing_file(capsys, tmp_path):
    for command in ["compile", "run", "bench", "inspect"]:
        code, _, err = run_cli(capsys, command, str(tmp_path / "nope.onnx"))
        assert code == 2 and "no such file" in err, command
    for command in ["compile", "run", "profile"]:
        code, _, err = run_cli(capsys, command, str(tmp_path))  # a directory is not a model
        assert code == 2 and f"{tmp_path} is a directory; expected an ONNX model" in err


def test_not_an_onnx_file(capsys, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("hello, not a protobuf")
    code, _, err = run_cli(capsys, "compile", str(bad))
    assert code == 2 and "is not an ONNX model" in err
    assert err.startswith("relayjit: error:") and "Traceback" not in err


def test_inspect_of_an_exported_module_says_so(exported, capsys):
    code, _, err = run_cli(capsys, "inspect", exported)
    assert code == 2 and "compiled relayjit module" in err and "needs the ONNX model" in err


@pytest.mark.parametrize("shape", ["data_0=1,x", "1,2", "data_0=1,0,3", "=1,2"])
def test_bad_shape(onnx_path, capsys, shape):
    code, _, err = run_cli(capsys, "compile", onnx_path, "--shape", shape)
    assert code == 2 and f"bad --shape {shape!r}" in err and "NAME=D1,D2" in err


def test_bad_input_arguments(exported, tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", exported, "--input", "=x.npy")
    assert code == 2 and "expected NAME=FILE.npy or FILE.npz" in err
    code, _, err = run_cli(capsys, "run", exported, "--input", f"data_0={tmp_path / 'no.npy'}")
    assert code == 2 and "no such file" in err
    text = tmp_path / "text.npy"
    text.write_text("not numpy")
    code, _, err = run_cli(capsys, "run", exported, "--input", f"data_0={text}")
    assert code == 2 and "is not a NumPy .npy or .npz file" in err and str(text) in err
    assert "pickled" not in err
    small = tmp_path / "small.npy"
    np.save(small, np.zeros((2, 2), "float32"))
    code, _, err = run_cli(capsys, "run", exported, "--input", f"nope={small}")
    assert code == 2 and "has no input 'nope'" in err and "['data_0']" in err
    code, _, err = run_cli(capsys, "run", exported, "--input", f"data_0={small}")
    assert code == 1
    assert "input 'data_0': expected shape (1, 3, 224, 224)" in err and "(2, 2)" in err


def test_bad_bench_repeat(exported, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", exported, "--repeat", "0"])
    assert info.value.code == 2
    assert "argument --repeat: expected a number >= 1, got 0" in capsys.readouterr().err


def test_unknown_demo_model(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["demo", "--model", "nosuch"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nosuch'" in err and "squeezenet" in err
