"""Every relayjit subcommand and its errors in a real subprocess, on a tiny conv/dense model.

The model compiles in well under a second, and most commands run on one exported .rjit, so
the file costs about one subprocess start (~1 s) per test.
"""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.tools import cli
from compiler.tools.cli import demo
from compiler.tools.model_zoo import LIGHT_MODELS

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli_commands")


@pytest.fixture(scope="module")
def tiny(workdir) -> str:
    """x[1,3,8,8] -> Conv(4, 3x3, pad 1) -> Relu -> Flatten -> Gemm(10) -> Softmax -> prob."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype("float32"), "b"),
             numpy_helper.from_array(rng.standard_normal((10, 256)).astype("float32"), "fc")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["prob"], axis=1)]
    model = helper.make_model(helper.make_graph(nodes, "tiny", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = workdir / "tiny.onnx"
    onnx.save(model, str(path))
    return str(path)


def relayjit(*argv: str, cwd, code: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "compiler.tools.cli", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc


@pytest.fixture(scope="module")
def rjit(tiny, workdir) -> str:
    out = str(workdir / "tiny.rjit")
    relayjit("compile", tiny, "-o", out, "-q", cwd=workdir)
    return out


def test_version_and_help_on_every_option(workdir):
    proc = relayjit("--version", cwd=workdir)
    assert proc.stdout.startswith("relayjit ") and proc.stdout.split()[1][0].isdigit()
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    assert {"compile", "run", "bench", "profile", "inspect", "demo"} <= set(subparsers)
    for name, sub in subparsers.items():
        for action in sub._actions:
            assert action.help, f"relayjit {name}: option {action.dest} has no help text"
    demo_help = subparsers["demo"].format_help()
    assert all(model in demo_help for model in LIGHT_MODELS)


def test_profile_prints_a_table_and_writes_a_trace(rjit, workdir):
    trace = workdir / "trace.json"
    proc = relayjit("profile", rjit, "--repeat", "3", "--trace", str(trace), cwd=workdir)
    assert "no --input for 'x' (shape (1, 3, 8, 8) float32): using arange(n)/n\n" in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["node", "fused", "ops"]
    assert "sum of 3 nodes" in proc.stdout and "GF/s" in proc.stdout
    assert "nn.softmax" in proc.stdout and f"trace -> {trace}" in proc.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e["ph"] == "X"]
    assert len(kernels) == 3
    assert all({"name", "ts", "dur", "args"} <= set(e) for e in kernels)


def test_profile_json_of_an_onnx_model(tiny, workdir):
    proc = relayjit("profile", tiny, "--json", "--repeat", "2", "--number", "2", "-q",
                    cwd=workdir)
    doc = json.loads(proc.stdout)
    assert {"model", "threads", "invented_inputs", "trace", "nodes", "total_ms",
            "whole_run_ms", "repeat", "number"} <= set(doc)
    assert doc["invented_inputs"] == ["x"] and doc["number"] == 2
    conv = next(n for n in doc["nodes"] if "nn.relu" in n["ops"])
    assert conv["flops"] == 2 * 4 * 8 * 8 * 3 * 3 * 3 and conv["gflops_per_s"] > 0


def test_run_json_npz_and_top_k(rjit, workdir):
    out = workdir / "out.npz"
    proc = relayjit("run", rjit, "--json", "--top-k", "3", "--output", str(out), cwd=workdir)
    doc = json.loads(proc.stdout)
    assert {"model", "invented_inputs", "outputs", "run_ms"} <= set(doc)
    (entry,) = doc["outputs"]
    assert {"name", "shape", "dtype", "min", "max", "mean", "file", "top_k"} <= set(entry)
    saved = np.load(out)["output_0"]
    assert entry["shape"] == [1, 10] and saved.shape == (1, 10)
    best = entry["top_k"][0]
    assert [i for i, _ in best] == list(np.argsort(-saved[0], kind="stable")[:3])
    assert best[0][1] == pytest.approx(float(saved.max()))


def test_run_onnx_with_npy_and_npz_inputs(tiny, workdir):
    data = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype("float32")
    np.save(workdir / "x.npy", data)
    np.savez(workdir / "feeds.npz", x=data)
    a = relayjit("run", tiny, "--input", f"x={workdir / 'x.npy'}", "--output",
                 str(workdir / "a"), "--top-k", "2", cwd=workdir)
    assert "no --input" not in a.stderr
    assert "output 0 (prob): shape=(1, 10)" in a.stdout and "top-2: " in a.stdout
    relayjit("run", tiny, "--input", str(workdir / "feeds.npz"), "--output",
             str(workdir / "b.npz"), "-q", cwd=workdir)
    got = np.load(workdir / "b.npz")["prob"]
    np.testing.assert_array_equal(got, np.load(workdir / "a_0.npy"))
    import onnxruntime as ort
    session = ort.InferenceSession(tiny, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, session.run(None, {"x": data})[0], rtol=1e-4, atol=1e-6)


def test_bench_json(rjit, workdir):
    proc = relayjit("bench", rjit, "--json", "--repeat", "2", "--number", "1", "-q",
                    cwd=workdir)
    doc = json.loads(proc.stdout)
    assert {"model", "threads", "repeat", "number", "invented_inputs", "relayjit_ms",
            "onnxruntime_ms"} <= set(doc)
    assert set(doc["relayjit_ms"]) == {"median", "min", "max"}
    assert doc["onnxruntime_ms"] is None  # a compiled module has no ONNX model to compare


def test_inspect_json_and_graph_svg(tiny, workdir):
    svg = workdir / "g.svg"
    proc = relayjit("inspect", tiny, "--json", "--graph", str(svg), "-q", cwd=workdir)
    doc = json.loads(proc.stdout)
    assert {"model", "opset", "inputs", "outputs", "onnx_ops", "fused_groups",
            "num_fused_groups", "graph"} <= set(doc)
    assert doc["inputs"] == [{"name": "x", "shape": [1, 3, 8, 8]}]
    assert doc["onnx_ops"]["Conv"] == 1 and doc["num_fused_groups"] == 4
    root = ET.parse(svg).getroot()
    groups = root.iter(f"{SVG}g")
    classes = [g.get("class", "") for g in groups]
    # conv, reshape (nop), dense, softmax; input x; output 0; one edge per tensor read
    assert sum("kernel" in c.split() for c in classes) == 4
    assert sum("nop" in c.split() for c in classes) == 1
    assert classes.count("node input") == 1 and classes.count("node output") == 1
    assert classes.count("edge") == 4 + 1


def test_inspect_print_ir_after_and_dumps(tiny, workdir):
    proc = relayjit("inspect", tiny, "--print-ir-after", "FuseOps", "-q", cwd=workdir)
    assert proc.stdout.count("# after ") == 1 and "# after FuseOps" in proc.stdout
    assert "Primitive=1" in proc.stdout
    tir = relayjit("inspect", tiny, "--dump", "tir", "-q", cwd=workdir).stdout
    assert "for (" in tir and "T_softmax" in tir
    asm = relayjit("inspect", tiny, "--dump", "asm", "-q", cwd=workdir).stdout
    assert "tvmgen_default_fused_nn_softmax" in asm and "ret" in asm
    v3 = relayjit("inspect", tiny, "--dump", "asm", "--target", "llvm -mcpu=x86-64-v3", "-q",
                  cwd=workdir).stdout
    assert "tvmgen_default_fused_nn_softmax" in v3 and "zmm" not in v3  # 256-bit vectors only


def test_demo_with_shipped_weights_warns_that_the_reference_is_uniform(workdir):
    proc = relayjit("demo", "--model", "squeezenet", "--shipped-weights", "-q", cwd=workdir)
    assert "shipped constant-fill weights" in proc.stdout
    assert "reference: onnxruntime" in proc.stdout and "MATCH" in proc.stdout
    assert "warning: the reference output is uniform" in proc.stderr


def test_demo_reference_falls_back_to_the_interpreter(tiny, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # "not installed"
    model = onnx.load(tiny)
    data = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype("float32")
    expected, source = demo.reference(model, {"x": data})
    assert "reference interpreter" in source
    import compiler
    np.testing.assert_allclose(compiler.load(tiny).run({"x": data})["prob"], expected,
                               rtol=1e-4, atol=1e-6)


# ----- errors: exit code and a one-line message naming what was wrong

@pytest.mark.parametrize("argv, code, message", [
    (["run", "{dir}"], 2, "{dir} is a directory; expected an ONNX model file"),
    (["profile", "{dir}/none.rjit"], 2, "no such file: {dir}/none.rjit"),
    (["run", "{rjit}", "--input", "x={dir}/notes.txt"], 2,
     "notes.txt is not a NumPy .npy or .npz file"),
    (["run", "{rjit}", "--input", "{dir}/x.npy"], 2, "a .npy file holds one array; say which"),
    (["profile", "{rjit}", "--trace", "{dir}/missing/t.json"], 2, "missing does not exist"),
    (["inspect", "{tiny}", "--profile"], 2, "give --graph FILE.svg too"),
    (["inspect", "{tiny}", "--json", "--dump", "llvm"], 2, "--json cannot be combined"),
    (["inspect", "{tiny}", "--print-ir-after", "NoSuchPass"], 2,
     "bad --print-ir-after 'NoSuchPass': no such pass ran"),
    (["compile", "{tiny}", "--target", "cuda", "-o", "{dir}/t.rjit"], 1,
     "target 'cuda' is not supported"),
])
def test_errors_name_what_was_wrong(argv, code, message, tiny, rjit, workdir):
    (workdir / "notes.txt").write_text("not an array\n")
    np.save(workdir / "x.npy", np.zeros((1, 3, 8, 8), "float32"))
    fill = {"dir": str(workdir), "rjit": rjit, "tiny": tiny}
    proc = relayjit(*[a.format(**fill) for a in argv], "-q", cwd=workdir, code=code)
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("relayjit: error: ")
    assert message.format(**fill) in lines[-1]


def test_missing_layout_library_names_the_extra(monkeypatch):
    from compiler.tools import visualize
    monkeypatch.setattr(visualize.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(visualize.VizDependencyError, match=r"pip install 'relayjit\[viz\]'"):
        visualize.require_layout_library()
