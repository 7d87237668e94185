"""The differential fuzzer in the default test run: a bounded, fixed-seed batch, the fuzzer's
own machinery, and one regression test per bug it found (its minimal repro in repros/, with
a .txt saying what was wrong).

    python -m tests.fuzz --minutes N [--seed S] [--out DIR]   runs a long campaign instead
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from .generate import MAX_OPSET, MIN_OPSET, generate, validate
from .dynamic import dynamic_variant
from .oracle import CRASH, PASS, REJECTED, UNSUPPORTED, classify_error, compare, verdict
from .reference import run_reference
from .runner import Worker
from .shrink import shrink

REPROS = Path(__file__).with_name("repros")

ONNX_SEEDS = list(range(80))
RELAY_SEEDS = list(range(0, 80, 4))


@pytest.fixture(scope="module")
def worker():
    with Worker(timeout=120.0) as w:
        yield w


def _summary(failures: list) -> str:
    return "\n".join(f"  {kind} seed {seed}: {r['status']}: {r.get('detail', '')[:400]}"
                     for kind, seed, r in failures)


def test_fixed_seed_batch(worker):
    """80 ONNX graphs and 20 Relay programs: relayjit agrees with the reference on all, on
    the graph executor and on the VM, with and without dynamic dims (If and Loop on the VM)."""
    failures, statuses, engines = [], {}, Counter()
    control_flow_on_vm = 0
    for seed in ONNX_SEEDS:
        case = generate(seed)
        validate(case)
        result = worker.run_onnx(case.model, case.feeds)
        statuses[result["status"]] = statuses.get(result["status"], 0) + 1
        engines.update((k, v["status"]) for k, v in result.get("engines", {}).items())
        if "If" in case.ops and result["engines"]["relayjit-vm"]["status"] == PASS:
            control_flow_on_vm += 1
        if result["status"] not in (PASS, UNSUPPORTED):
            failures.append(("onnx", seed, result))
    for seed in RELAY_SEEDS:
        result = worker.run_relay(seed)
        statuses[result["status"]] = statuses.get(result["status"], 0) + 1
        if result["status"] not in (PASS, UNSUPPORTED):
            failures.append(("relay", seed, result))
    assert not failures, f"{len(failures)} failing cases ({statuses}):\n{_summary(failures)}"
    assert statuses.get(PASS, 0) >= 0.9 * (len(ONNX_SEEDS) + len(RELAY_SEEDS)), statuses
    assert engines["relayjit-vm", PASS] >= 0.85 * len(ONNX_SEEDS), engines
    assert engines["relayjit-vm-dynamic", PASS] >= 0.2 * len(ONNX_SEEDS), engines
    assert control_flow_on_vm >= 3, engines


# -- the fuzzer's own machinery -------------------------------------------------------------
def test_generator_is_deterministic_and_valid():
    seen_opsets, sizes = set(), set()
    for seed in range(150):
        case = generate(seed)
        again = generate(seed)
        assert case.model.SerializeToString() == again.model.SerializeToString()
        assert case.feeds.keys() == again.feeds.keys()
        for name, value in case.feeds.items():
            np.testing.assert_array_equal(value, again.feeds[name])
        validate(case)
        sizes.add(len(case.model.graph.node))
        seen_opsets.add(case.opset)
    assert min(sizes) >= 3 and max(sizes) <= 15
    assert min(seen_opsets) == MIN_OPSET and max(seen_opsets) == MAX_OPSET


def test_runner_survives_crashes_and_hangs():
    with Worker(timeout=3.0) as w:
        hang = w.request({"kind": "selftest", "action": "sleep", "seconds": 30})
        assert hang["status"] == "hang"
        crash = w.request({"kind": "selftest", "action": "segfault"})
        assert crash["status"] == "crash" and "Segmentation fault" in crash["stderr"]
        raised = w.request({"kind": "selftest", "action": "raise"})
        assert raised["status"] == "crash" and "ValueError" in raised["detail"]
        assert w.request({"kind": "ping"})["status"] == "pong"
        assert w.restarts == 2


def test_compare_tolerances():
    f32 = np.array([1.0, np.nan, np.inf], np.float32)
    assert compare(f32, f32.copy()) == ""
    assert compare(f32, np.array([1.00001, np.nan, np.inf], np.float32)) == ""
    assert "differ" in compare(f32, np.array([1.001, np.nan, np.inf], np.float32))
    assert "differ" in compare(f32, np.array([1.0, 0.0, np.inf], np.float32))  # NaN position
    assert "differ" in compare(np.array([3], np.int32), np.array([4], np.int32))
    assert "dtype" in compare(np.array([3], np.int32), np.array([3], np.int64))
    f16 = np.array([1.0], np.float16)
    assert compare(f16, np.array([1.005], np.float16)) == ""
    assert compare(np.array([1.0], np.float32), np.array([1.01], np.float32), err=0.01) == ""


def test_error_classification():
    from compiler.errors import CompilerError, OpNotImplemented
    assert classify_error(OpNotImplemented("Foo is not supported")) == UNSUPPORTED
    assert classify_error(CompilerError("dtype float8 is not supported")) == UNSUPPORTED
    assert classify_error(CompilerError("shapes (2, 3) and (4,) disagree")) == REJECTED
    assert classify_error(ValueError("operands could not be broadcast")) == CRASH
    assert classify_error(KeyError("x")) == CRASH
    from compiler.frontend.onnx_ops.common import FrontendError
    refusal = FrontendError("node 'sq' (Squeeze): cannot squeeze axis 0 of shape (?, 3)")
    assert classify_error(refusal) == REJECTED
    assert classify_error(refusal, dynamic=True) == UNSUPPORTED  # static form converted
    assert classify_error(TypeError("x"), dynamic=True) == CRASH


def test_verdict_passes_a_case_one_engine_runs_and_fails_any_failure():
    ok, no = {"status": PASS}, {"status": UNSUPPORTED, "detail": "no control flow"}
    bad = {"status": "mismatch", "detail": "1/4 elements differ"}
    assert verdict({"relayjit-O0": no, "relayjit-vm": ok}, 0)["status"] == PASS
    assert verdict({"relayjit-O0": no, "relayjit-vm": no}, 0)["status"] == UNSUPPORTED
    assert verdict({"relayjit-vm": ok, "relayjit-vm-dynamic": bad}, 0)["status"] == "mismatch"


def test_the_dynamic_variant_imports_its_input_dims_as_any():
    from compiler import relay
    from compiler.ir.dims import Any
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = dynamic_variant(helper.make_model(graph), seed=1)
    onnx.checker.check_model(model)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["n3", "s4"]
    assert not any(d.HasField("dim_value")
               for d in model.graph.output[0].type.tensor_type.shape.dim)
    mod, _ = relay.frontend.from_onnx(model)
    assert all(isinstance(d, Any) for d in mod["main"].params[0].type_annotation.shape)


def test_shrinker_finds_the_culprit_node():
    """With a predicate "the graph still has a Gemm", shrinking keeps that node alone."""
    case = next(c for c in map(generate, range(200))
                if "Gemm" in c.ops and len(c.model.graph.node) >= 8)

    def fails(model, feeds) -> bool:
        onnx.checker.check_model(model)
        assert {i.name for i in model.graph.input} <= set(feeds)
        return any(n.op_type == "Gemm" for n in model.graph.node)

    small, feeds, _ = shrink(case.model, case.feeds, fails, budget_s=30)
    assert [n.op_type for n in small.graph.node] == ["Gemm"]


def test_reference_pools_agree_with_onnxruntime():
    """The oracle's own pooling (patched over onnx.reference's) against onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    configs = [
        ("MaxPool", [1, 2, 5], {"kernel_shape": [2], "pads": [0, 1]}),
        ("MaxPool", [1, 2, 6, 7], {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "strides": [2, 2],
                                   "ceil_mode": 1}),
        ("AveragePool", [2, 1, 7, 5], {"kernel_shape": [3, 3], "pads": [2, 1, 0, 2],
                                       "count_include_pad": 1, "ceil_mode": 1, "strides": [2, 1]}),
        ("AveragePool", [1, 3, 8], {"kernel_shape": [3], "auto_pad": "SAME_LOWER",
                                    "strides": [3]}),
        ("LpPool", [1, 2, 5, 5], {"kernel_shape": [2, 2], "pads": [0, 0, 1, 1], "p": 1}),
    ]
    for op, shape, attrs in configs:
        x = np.random.default_rng(0).permutation(int(np.prod(shape))).astype(np.float32)
        x = x.reshape(shape)
        got, want = _reference_and_onnxruntime(ort, helper.make_node(op, ["x"], ["y"], **attrs),
                                               x)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{op} {attrs}")


@pytest.mark.parametrize("attrs, sizes", [
    ({"mode": "nearest"}, [1, 2, 12, 5]),
    ({"mode": "linear", "antialias": 1, "coordinate_transformation_mode": "half_pixel_symmetric"},
     [1, 2, 4, 2]),
], ids=["nearest", "linear-antialias"])
def test_reference_resize_of_infinities_agrees_with_onnxruntime(attrs, sizes):
    """The stock reference turns 0 * inf into NaN and saturates float16 infinities.

    (onnxruntime's plain linear mode still adds 0 * inf at a clamped edge: not compared.)"""
    ort = pytest.importorskip("onnxruntime")
    x = np.ones((1, 2, 6, 3), np.float16)
    x[0, 0, 0, 0], x[0, 1, 2, 1], x[0, 1, 5, 2] = -np.inf, np.inf, np.nan
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    got, want = _reference_and_onnxruntime(ort, node, x, sizes=np.array(sizes))
    assert np.isneginf(got).any() and np.isposinf(got).any() and np.isnan(got).any()
    np.testing.assert_array_equal(got, want)


def _reference_and_onnxruntime(ort, node, x: np.ndarray, **consts) -> tuple:
    """One node reading x (and int64 constants) through the oracle and onnxruntime."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", elem, x.shape)],
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.log_severity_level = 4
    want = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return run_reference(model, {"x": x})[0], want


def test_campaign_command_writes_a_summary(tmp_path):
    from .__main__ import main
    main(["--minutes", "0.05", "--seed", "20", "--out", str(tmp_path), "-q"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["graphs_run"] + summary["relay_programs_run"] >= 1
    assert (tmp_path / "summary.txt").read_text().startswith("relayjit differential fuzzing")


# -- regressions: one per bug the campaigns found ---------------------------------------------
def _repros() -> list:
    out = []
    for path in sorted(REPROS.glob("*.onnx")) + sorted(REPROS.glob("*.relay.json")):
        stem = path.name.split(".")[0]
        reason = (REPROS / f"{stem}.txt").read_text().strip()
        out.append(pytest.param(path, reason, id=stem))
    return out


@pytest.mark.parametrize("path, bug", _repros())
def test_fuzz_regression(worker, path, bug):
    """A minimal repro the fuzzer saved (`bug` says what was wrong): relayjit must agree with
    the reference."""
    if path.name.endswith(".relay.json"):
        spec = json.loads(path.read_text())
        result = worker.run_relay(spec["seed"], spec["steps"], spec["pipeline"], spec["level"])
    else:
        model = onnx.load(path)
        with np.load(path.with_suffix(".npz")) as data:
            feeds = {k: data[k] for k in data.files}
        result = worker.run_onnx(model, feeds)
    assert result["status"] == PASS, f"{bug}\n{result['status']}: {result.get('detail', '')}"
