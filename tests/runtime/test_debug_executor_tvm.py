"""The debug executor as TVM scripts use it (issue 26): dump_root, debug_get_output,
run_individual(min_repeat_ms=), run_individual_node, lib["debug_create"], Report.csv and
table(aggregate=), module.time_evaluator, and graph_executor.create(graph, lib.lib, dev)
starting with the params the build bound."""
from __future__ import annotations

import os

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.contrib import graph_executor
from compiler.contrib.debugger import debug_executor

RNG = np.random.default_rng(26)
W1 = RNG.standard_normal((16, 8)).astype("float32")
W2 = RNG.standard_normal((4, 16)).astype("float32")
X = RNG.standard_normal((2, 8)).astype("float32")


@pytest.fixture(scope="module")
def lib():
    x, w1, w2 = (relay.var("x", shape=(2, 8)), relay.var("w1", shape=(16, 8)),
                 relay.var("w2", shape=(4, 16)))
    hidden = relay.nn.relu(relay.nn.dense(x, w1))
    out = relay.nn.softmax(relay.nn.dense(hidden, w2))
    mod = tvm.IRModule.from_expr(relay.Function([x, w1, w2], out))
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target="llvm", params={"w1": W1, "w2": W2})


def _expected():
    hidden = np.maximum(X @ W1.T, 0)
    z = hidden @ W2.T
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return hidden, e / e.sum(axis=1, keepdims=True)


def test_dump_root_and_node_outputs(lib, tmp_path):
    dev = tvm.cpu()
    root = str(tmp_path / "tvmdbg")
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), dev, dump_root=root)
    m.set_input("x", X)  # the params come with the library, as in TVM
    m.run()
    hidden, out = _expected()
    np.testing.assert_allclose(m.get_output(0).numpy(), out, rtol=1e-5, atol=1e-6)
    folder = os.path.join(root, "_tvmdbg_device_CPU_0")
    assert sorted(os.listdir(folder)) == ["_tvmdbg_execution_trace.json",
                                          "_tvmdbg_graph_dump.json", "output_tensors.params"]
    with open(os.path.join(folder, "output_tensors.params"), "rb") as f:
        dumped = tvm.runtime.load_param_dict(f.read())
    nodes = m.debug_datum.get_graph_nodes()
    first_kernel = next(i for i, n in enumerate(nodes) if n["op"] == "tvm_op")
    key = f"{nodes[first_kernel]['name']}____topo-index:{first_kernel}____output-num:0"
    np.testing.assert_allclose(dumped[key].numpy(), hidden, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m.debug_get_output(first_kernel).numpy(), dumped[key].numpy())
    np.testing.assert_array_equal(m.debug_get_output(nodes[first_kernel]["name"]).numpy(),
                                  dumped[key].numpy())
    np.testing.assert_array_equal(m.debug_get_output("x").numpy(), X)
    m.exit()
    assert not os.path.exists(root)


def test_debug_create_in_tvms_constructor_form(lib):
    dev = tvm.cpu()
    m = debug_executor.GraphModuleDebug(lib["debug_create"]("default", dev), [dev],
                                        lib.get_graph_json(), None)
    m.run(x=X)
    np.testing.assert_allclose(m.get_output(0).numpy(), _expected()[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(KeyError, match="not 'other'"):
        lib["debug_create"]("other", dev)


def test_debug_get_output_errors(lib):
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), tvm.cpu())
    with pytest.raises(RuntimeError, match="run\\(\\) has not been called"):
        m.debug_get_output(0)
    m.run(x=X)
    with pytest.raises(ValueError, match="no node named 'nope'"):
        m.debug_get_output("nope")
    with pytest.raises(IndexError, match="out of range"):
        m.debug_get_output(999)


def test_run_individual_and_node_timings(lib):
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), tvm.cpu())
    m.set_input("x", X)
    kernels = [i for i, n in enumerate(m.debug_datum.get_graph_nodes()) if n["op"] == "tvm_op"]
    times = m.run_individual(number=2, repeat=2, min_repeat_ms=1)
    assert len(times) == len(m._ex.steps) and all(t > 0 for t in times)
    result = m.run_individual_node(kernels[0], number=3, repeat=4)
    assert len(result.results) == 4 and result.mean > 0
    with pytest.raises(ValueError, match="runs no kernel"):
        m.run_individual_node(0)  # the input x


def test_report_csv_and_aggregated_table(lib):
    m = debug_executor.create(lib.get_graph_json(), lib.get_lib(), tvm.cpu())
    report = m.profile(repeat=2, number=1, x=X)
    rows = report.csv().splitlines()
    assert rows[0].startswith("name,kernel,ops,median_ms") and len(rows) == len(report.nodes) + 1
    table = report.table(sort=True, aggregate=True, col_sums=False)
    assert "(x1)" in table and "sum of" not in table
    assert len(report.aggregated()) <= len(report.nodes)


def test_time_evaluator_and_create_with_library_params(lib):
    dev = tvm.cpu()
    module = graph_executor.create(lib.get_graph_json(), lib.lib, dev)  # no set_params
    module.set_input("x", X)
    module.run()
    np.testing.assert_allclose(module.get_output(0).numpy(), _expected()[1], rtol=1e-5,
                               atol=1e-6)
    ftimer = module.module.time_evaluator("run", dev, number=2, repeat=3)
    prof = np.array(ftimer().results) * 1000
    assert prof.shape == (3,) and (prof > 0).all()
    with pytest.raises(ValueError, match="times 'run'"):
        module.module.time_evaluator("main", dev)
