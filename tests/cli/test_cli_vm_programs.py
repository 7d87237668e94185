"""profile and inspect on models with control flow, which run on the Relay VM (issue 22 item
6): the greedy-decode Loop of tests/frontend/test_onnx_loop.py with a data-dependent trip
count. The VM profiler times every kernel at every shape it is called at (a loop calls the
same kernel many times, at a growing shape); inspect draws and dumps every function."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest

import runtime
from compiler import relay
from compiler.frontend import from_onnx
from compiler.tools import cli
from runtime.vm import VirtualMachineProfiler

pytest.importorskip("onnxruntime")
pytest.importorskip("grandalf")
from tests.frontend.test_onnx_loop import _decode_model  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli_vm")


@pytest.fixture(scope="module")
def decode(workdir) -> tuple[str, str]:
    """The decode model's path and a feeds file that runs its loop for 6 steps at most."""
    model = _decode_model()
    path = str(workdir / "decode.onnx")
    onnx.save(model, path)
    feeds = str(workdir / "feeds.npz")
    np.savez(feeds, start=np.array(3, np.int64), max_len=np.array(6, np.int64))
    return path, feeds


def test_the_vm_profiler_times_each_kernel_at_each_shape():
    mod, params = from_onnx(_decode_model())
    exe = relay.vm.compile(mod, target="llvm", params=params)
    feeds = {"start": np.array(3, np.int64), "max_len": np.array(6, np.int64)}
    report = VirtualMachineProfiler(exe, runtime.cpu()).profile(repeat=3, **feeds)
    kernels = {n.kernel for n in report.nodes}
    assert kernels <= {k.name for k in exe.kernels} and len(kernels) >= 5
    # the tokens so far grow by one a step: the concatenation is a row per shape
    grown = [n for n in report.nodes if "concatenate" in n.kernel and n.output_shapes[0]]
    assert len({n.output_shapes for n in grown}) >= 3
    looped = [n for n in report.nodes if n.name.endswith(tuple(f" x{k}" for k in range(2, 9)))]
    assert looped, "a kernel of the loop body called once a step at one shape"
    assert all(n.min <= n.median <= n.max for n in report.nodes)
    assert abs(sum(n.share for n in report.nodes) - 1) < 1e-6
    assert report.whole_run > 0 and report.repeat == 3


def test_profile_of_a_vm_program(decode, workdir, capsys):
    path, feeds = decode
    trace = str(workdir / "trace.json")
    assert cli.main(["profile", path, "--input", feeds, "--repeat", "2", "-q", "--json",
                     "--trace", trace]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nodes"] and doc["whole_run_ms"] > 0
    assert any(n["kernel"].endswith("dense_pack") or "dense" in n["kernel"]
               for n in doc["nodes"])
    with open(trace) as f:
        assert len(json.load(f)["traceEvents"]) == len(doc["nodes"]) + 1
    assert cli.main(["profile", path, "--input", feeds, "--number", "3", "-q"]) == 2
    assert "--number" in capsys.readouterr().err


def test_inspect_draws_and_dumps_a_vm_program(decode, workdir, capsys):
    path, feeds = decode
    svg = str(workdir / "decode.svg")
    assert cli.main(["inspect", path, "--input", feeds, "--graph", svg, "--profile", "-q",
                     "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["graph"] == svg and info["num_fused_groups"] >= 5
    groups = [g for g in ET.parse(svg).getroot().iter(f"{SVG}g")]
    titles = [g.find(f"{SVG}title").text for g in groups if g.find(f"{SVG}title") is not None]
    assert "If" in titles and any(t.startswith("call of the closure") for t in titles)
    assert sum(t.startswith("kernel tvmgen_default_fused_argmax") for t in titles) == 1
    shaded = [g for g in groups if "kernel" in g.get("class", "")
              and "fill:" in (g.find(f"{SVG}rect").get("style") or "")]
    assert shaded, "--profile shades the kernels by their time"
    assert sum(g.get("class") == "edge" for g in groups) >= 10
    assert cli.main(["inspect", path, "--input", feeds, "--dump", "tir", "-q"]) == 0
    assert "argmax" in capsys.readouterr().out


def test_a_compiled_vm_program_runs_loops_of_any_length(decode, workdir):
    """relayjit compile of a Loop model writes a VM executable whose dynamic kernels (the
    tokens so far grow by one a step) are symbolic: run loads it without a compiler and
    matches onnxruntime at lengths it never saw."""
    import onnxruntime as ort
    path, _ = decode
    rjit = str(workdir / "decode.rjit")
    assert cli.main(["compile", path, "-o", rjit, "-q"]) == 0
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for start, max_len in ((3, 6), (2, 11)):
        feeds = {"start": np.array(start, np.int64), "max_len": np.array(max_len, np.int64)}
        np.savez(workdir / "f.npz", **feeds)
        out = str(workdir / "out.npz")
        assert cli.main(["run", rjit, "--input", str(workdir / "f.npz"), "--output", out,
                         "-q"]) == 0
        want = session.run(None, feeds)
        with np.load(out) as got:
            assert len(got.files) == len(want) == 3
            for g, w in zip(got.values(), want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
