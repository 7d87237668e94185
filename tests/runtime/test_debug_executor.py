"""runtime.debug_executor: per-node profile of a small conv/dense/softmax graph."""
from __future__ import annotations

import json

import numpy as np
import pytest

import runtime
from compiler import relay, transform
from runtime import debug_executor

DATA_SHAPE = (1, 3, 16, 16)


@pytest.fixture(scope="module")
def factory():
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=DATA_SHAPE)
    w = relay.const(rng.standard_normal((8, 3, 3, 3)).astype("float32"))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    y = relay.reshape(y, (1, 8 * 16 * 16))
    y = relay.nn.dense(y, relay.const(rng.standard_normal((10, 8 * 16 * 16)).astype("float32")))
    y = relay.nn.softmax(y)
    with transform.PassContext(opt_level=3):
        return relay.build(relay.Function([x], y))


@pytest.fixture(scope="module")
def report(factory):
    gmod = debug_executor.create(factory.get_graph_json(), factory.get_lib(), runtime.cpu())
    gmod.set_params(factory.get_params())
    data = np.random.default_rng(1).standard_normal(DATA_SHAPE).astype("float32")
    return gmod.profile(repeat=5, x=data)


def test_rows_name_kernels_ops_shapes_and_flops(report):
    by_kernel = {"conv": None, "dense": None, "softmax": None}
    for node in report.nodes:
        for key in by_kernel:
            if key in node.kernel:
                by_kernel[key] = node
    conv, dense, softmax = by_kernel["conv"], by_kernel["dense"], by_kernel["softmax"]
    assert conv is not None and dense is not None and softmax is not None
    assert conv.ops[-1] == "nn.relu" and "conv2d" in conv.ops[0]
    assert conv.input_shapes[0] == DATA_SHAPE and conv.output_shapes == ((1, 8, 16, 16),)
    assert conv.flops == 2 * 8 * 16 * 16 * 3 * 3 * 3
    assert dense.flops == 2 * 10 * 8 * 16 * 16
    assert softmax.ops == ("nn.softmax",) and softmax.flops is None
    assert softmax.bytes == 2 * 10 * 4 and softmax.gflops is None
    assert conv.gflops is not None and conv.gflops > 0
    assert all(n.min <= n.median <= n.max for n in report.nodes)
    assert sum(n.share for n in report.nodes) == pytest.approx(1.0)
    assert report.sorted()[0].median == max(n.median for n in report.nodes)


def test_node_times_add_up_to_a_whole_run(report):
    # The only timed assertion: per-node medians against whole runs measured alongside them.
    # Generous bounds: per-call overhead and cache effects differ between the two ways.
    assert report.whole_run / 3 - 50e-6 < report.total < report.whole_run * 3 + 50e-6


def test_json_and_chrome_trace_have_the_documented_keys(report):
    doc = json.loads(report.json())
    assert set(doc) == {"nodes", "total_ms", "whole_run_ms", "repeat", "number"}
    assert set(doc["nodes"][0]) == {
        "name", "kernel", "ops", "input_shapes", "output_shapes", "median_ms", "min_ms",
        "max_ms", "share", "flops", "gflops_per_s", "bytes", "gbytes_per_s"}
    trace = json.loads(json.dumps(report.chrome_trace()))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in events] == [n.name for n in report.nodes]
    for event in events:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(event)
        assert {"kernel", "ops", "input_shapes", "output_shapes"} <= set(event["args"])
    ends = [e["ts"] + e["dur"] for e in events]
    assert all(b["ts"] == pytest.approx(a) for a, b in zip(ends, events[1:]))
    table = report.table()
    assert len(table.splitlines()) == 2 + len(report.nodes) + 1
    assert f"sum of {len(report.nodes)} nodes" in table and "nn.softmax" in table


def test_factory_module_profiles_and_outputs_match_the_plain_executor(factory):
    from runtime import graph_executor
    data = np.ones(DATA_SHAPE, "float32")
    debug = debug_executor.GraphModuleDebug(factory["default"](runtime.cpu()))
    plain = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    plain.run(x=data)
    debug.profile(repeat=1, number=1, x=data)
    np.testing.assert_array_equal(debug.get_output(0).numpy(), plain.get_output(0).numpy())
    times = debug.run_individual(number=2, repeat=2)
    assert len(times) == len(debug.profile(repeat=1, number=1).nodes)
    assert all(t > 0 for t in times)


@pytest.mark.parametrize("kwargs", [{"repeat": 0}, {"number": 0}, {"number": 1.5}])
def test_bad_counts_are_named(factory, kwargs):
    debug = debug_executor.GraphModuleDebug(factory["default"](runtime.cpu()))
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        debug.profile(x=np.ones(DATA_SHAPE, "float32"), **kwargs)


def test_inputs_never_set_is_an_error(factory):
    debug = debug_executor.GraphModuleDebug(factory["default"](runtime.cpu()))
    with pytest.raises(ValueError, match="never set"):
        debug.profile(repeat=1)
