from __future__ import annotations

import json

import numpy as np
import pytest

import runtime
from runtime import KernelError, graph_executor, nd, save_param_dict

from tests.runtime import _runtime_kernels as K

N = 8
RNG = np.random.default_rng(42)


@pytest.fixture(scope="module")
def lib():
    return K.library(N)


def _vec() -> np.ndarray:
    return RNG.standard_normal(N).astype(np.float32)


def _chain(lib):
    return graph_executor.create(K.chain_graph(), lib, runtime.cpu(0))


def test_chain_with_storage_reuse(lib):
    m = _chain(lib)
    x, p0 = _vec(), _vec()
    m.set_input("x", x)
    m.set_input(1, nd.array(p0))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, p0), rtol=1e-6)
    assert m.get_num_outputs() == 1
    # pools: sid 2 is shared by t1 and out, so the executor holds 4 pools for 5 entries
    ex = m.module
    assert ex.entries[2].ctypes.data == ex.entries[4].ctypes.data
    assert len({a.ctypes.data for a in ex.entries}) == 4
    assert all(a.ctypes.data % 64 == 0 for a in ex.entries)


def test_run_with_kwargs_and_repeat(lib):
    m = _chain(lib)
    for _ in range(3):
        x, p0 = _vec(), _vec()
        m.run(x=x, p0=p0)
        np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, p0), rtol=1e-6)


def test_get_output_is_copy_and_out(lib):
    m = _chain(lib)
    x, p0 = _vec(), _vec()
    m.run(x=x, p0=p0)
    first = m.get_output(0)
    m.run(x=x + 10, p0=p0)
    np.testing.assert_allclose(first.numpy(), K.chain_reference(x, p0), rtol=1e-6)
    out = nd.empty((N,))
    assert m.get_output(0, out) is out
    np.testing.assert_allclose(out.numpy(), K.chain_reference(x + 10, p0), rtol=1e-6)
    with pytest.raises(ValueError, match="expected"):
        m.get_output(0, nd.empty((N + 1,)))


def test_get_output_index_errors(lib):
    m = _chain(lib)
    with pytest.raises(IndexError, match="output index 1 out of range; graph has 1 outputs"):
        m.get_output(1)
    with pytest.raises(IndexError, match="out of range"):
        m.get_output(-1)
    with pytest.raises(TypeError, match="output index must be an int"):
        m.get_output("0")


def test_get_output_before_run_is_an_error(lib):
    m = _chain(lib)
    x, p0 = _vec(), _vec()
    m.set_input(x=x, p0=p0)
    with pytest.raises(RuntimeError, match=r"get_output\(0\): run\(\) has not been called"):
        m.get_output(0)
    with pytest.raises(RuntimeError, match=r"run\(\) has not been called"):
        m.get_output(0, nd.empty((N,)))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, p0), rtol=1e-6)
    # a wrapper of the same executor sees the run
    np.testing.assert_allclose(graph_executor.GraphModule(m).get_output(0).numpy(),
                               K.chain_reference(x, p0), rtol=1e-6)


def test_get_output_after_a_failed_or_timed_run(lib):
    m = _chain(lib)
    with pytest.raises(ValueError, match="never set"):
        m.run(x=_vec())  # p0 missing: nothing ran
    with pytest.raises(RuntimeError, match="has not been called"):
        m.get_output(0)
    x, p0 = _vec(), _vec()
    m.benchmark(runtime.cpu(), repeat=1, number=1, x=x, p0=p0)
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, p0), rtol=1e-6)


def test_input_queries(lib):
    m = _chain(lib)
    assert m.get_num_inputs() == 2
    assert m.get_input_index("x") == 0 and m.get_input_index("p0") == 1
    assert m.get_input_index("nope") == -1
    assert m.get_input_info() == ({"x": (N,), "p0": (N,)}, {"x": "float32", "p0": "float32"})
    m.set_input("x", np.ones(N, np.float32))
    live = m.get_input("x")
    assert live.shape == (N,)
    np.testing.assert_array_equal(live.numpy(), 1)
    np.testing.assert_array_equal(m.get_input(0).numpy(), 1)


def test_load_params_marks_params_set(lib):
    m = _chain(lib)
    p0 = _vec()
    m.load_params(save_param_dict({"p0": p0, "unused": np.zeros(2, np.float32)}))
    assert m.get_input_info() == ({"x": (N,)}, {"x": "float32"})
    assert m.get_num_inputs() == 2  # TVM's NumInputs counts params too
    x = _vec()
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, p0), rtol=1e-6)


def test_set_params(lib):
    m = _chain(lib)
    p0 = _vec()
    m.set_params({"p0": nd.array(p0)})
    x = _vec()
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, p0), rtol=1e-6)


def test_run_names_inputs_never_set(lib):
    m = _chain(lib)
    with pytest.raises(ValueError, match=r"never set before run: \['x', 'p0'\]"):
        m.run()
    m.set_input("p0", _vec())
    with pytest.raises(ValueError, match=r"never set before run: \['x'\]"):
        m.run()


def test_set_input_errors(lib):
    m = _chain(lib)
    with pytest.raises(KeyError, match=r"unknown input 'y'; graph inputs are \['x', 'p0'\]"):
        m.set_input("y", _vec())
    with pytest.raises(KeyError, match="unknown input 'y'"):
        m.set_input(y=_vec())
    with pytest.raises(IndexError, match="input index 2 out of range; graph has 2 inputs"):
        m.set_input(2, _vec())
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(8,\) dtype float32, "
                                         r"got shape \(4,\) dtype float32"):
        m.set_input("x", np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(8,\) dtype float32, "
                                         r"got shape \(8,\) dtype float64"):
        m.set_input("x", np.zeros(8))
    with pytest.raises(TypeError, match="input 'x': expected numpy.ndarray or NDArray, got list"):
        m.set_input("x", [0.0] * 8)
    with pytest.raises(TypeError, match="input key must be a name or an index"):
        m.set_input(1.5, _vec())
    with pytest.raises(KeyError, match="unknown input"):
        m.get_input("nope")


def test_non_contiguous_input_is_copied(lib):
    m = _chain(lib)
    wide = RNG.standard_normal(2 * N).astype(np.float32)
    p0 = _vec()
    m.run(x=wide[::2], p0=p0)
    np.testing.assert_allclose(
        m.get_output(0).numpy(), K.chain_reference(wide[::2], p0), rtol=1e-6
    )


def test_failing_kernel_raises(lib):
    nodes = [K.null("x"), K.op("bad", "fail", [[0, 0, 0]])]
    m = graph_executor.create(K.graph(nodes, [[1, 0]], [[N], [N]], [0, 1]), lib, runtime.cpu())
    m.set_input("x", _vec())
    with pytest.raises(KernelError, match="graph node 'bad' returned a nonzero status"):
        m.run()


def test_multiple_outputs_and_heads(lib):
    nodes = [K.null("x"), K.op("two", "plus_one_and_double", [[0, 0, 0]], num_outputs=2)]
    g = K.graph(nodes, [[1, 1], [1, 0], [0, 0]], [[N]] * 3, [0, 1, 2])
    m = graph_executor.create(g, lib, runtime.cpu())
    x = _vec()
    m.run(x=x)
    assert m.get_num_outputs() == 3
    np.testing.assert_allclose(m.get_output(0).numpy(), x * 2)
    np.testing.assert_allclose(m.get_output(1).numpy(), x + 1)
    np.testing.assert_array_equal(m.get_output(2).numpy(), x)


def _nop_graph(nop_sid: int) -> str:
    """x -> relu (sid 1) -> __nop reshape to (2, 4) -> add with p (2, 4)."""
    nodes = [
        K.null("x"),
        K.op("r", "relu", [[0, 0, 0]]),
        K.op("reshape", "__nop", [[1, 0, 0]]),
        K.null("p"),
        K.op("a", "add", [[2, 0, 0], [3, 0, 0]]),
    ]
    return K.graph(nodes, [[4, 0], [2, 0]], [[N], [N], [2, 4], [2, 4], [2, 4]],
                   [0, 1, nop_sid, 3, 4])


@pytest.mark.parametrize("nop_sid", [1, 2])
def test_nop_reshape(lib, nop_sid):
    m = graph_executor.create(_nop_graph(nop_sid), lib, runtime.cpu())
    x, p = _vec(), _vec().reshape(2, 4)
    m.run(x=x, p=p)
    relu = np.maximum(x, 0).reshape(2, 4)
    np.testing.assert_allclose(m.get_output(0).numpy(), relu + p, rtol=1e-6)
    np.testing.assert_array_equal(m.get_output(1).numpy(), relu)
    assert m.get_output(1).shape == (2, 4)
    shared = m.module.entries[1].ctypes.data == m.module.entries[2].ctypes.data
    assert shared == (nop_sid == 1)


def test_nop_size_mismatch(lib):
    nodes = [K.null("x"), K.op("reshape", "__nop", [[0, 0, 0]])]
    g = K.graph(nodes, [[1, 0]], [[N], [N + 1]], [0, 0])
    with pytest.raises(ValueError, match="'reshape' is __nop"):
        graph_executor.create(g, lib, runtime.cpu())


def test_missing_function_in_library(lib):
    nodes = [K.null("x"), K.op("n", "no_such_kernel", [[0, 0, 0]])]
    with pytest.raises(ValueError, match="'n' calls 'no_such_kernel', which the library lacks"):
        graph_executor.create(K.graph(nodes, [[1, 0]], [[N]] * 2, [0, 1]), lib, runtime.cpu())


def _mutated(mutate) -> str:
    g = json.loads(K.chain_graph())
    mutate(g)
    return json.dumps(g)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda g: g.pop("heads"), 'missing "heads"'),
        (lambda g: g["attrs"].pop("storage_id"), 'no "storage_id"'),
        (lambda g: g["attrs"]["shape"][1].pop(), "has 4 entries, the graph has 5"),
        (lambda g: g["attrs"]["dltype"][1].__setitem__(0, "complex64"), "entry 0: unsupported"),
        (lambda g: g["attrs"]["storage_id"][1].__setitem__(0, -1), "storage_id must be >= 0"),
        (lambda g: g["heads"].__setitem__(0, [9, 0, 0]), r"refers to missing output \[9, 0\]"),
        (lambda g: g["nodes"][2]["inputs"].__setitem__(0, [3, 0, 0]), "at or after itself"),
        (lambda g: g["nodes"][2]["attrs"].__setitem__("num_inputs", "3"), "num_inputs 3"),
        (lambda g: g["nodes"][2].__setitem__("op", "conv"), "expected \"tvm_op\""),
        (lambda g: g["arg_nodes"].append(2), "not a null"),
        (lambda g: g["nodes"][1].__setitem__("name", "x"), "duplicate input names"),
        (lambda g: g.__setitem__("node_row_ptr", [0, 1]), "node_row_ptr must have 6"),
        (lambda g: g["attrs"]["shape"][1].__setitem__(0, [-8]), "negative shape"),
    ],
)
def test_malformed_graph_json(lib, mutate, message):
    with pytest.raises(ValueError, match=message):
        graph_executor.create(_mutated(mutate), lib, runtime.cpu())


def test_not_json(lib):
    with pytest.raises(ValueError, match="graph JSON: not valid JSON"):
        graph_executor.create("{nodes", lib, runtime.cpu())


def test_create_argument_types(lib):
    with pytest.raises(TypeError, match="lib must be a KernelLibrary"):
        graph_executor.create(K.chain_graph(), object(), runtime.cpu())
    with pytest.raises(TypeError, match="device must be a runtime Device"):
        graph_executor.create(K.chain_graph(), lib, "cpu")
    with pytest.raises(TypeError, match="GraphModule expects"):
        graph_executor.GraphModule(42)


def test_benchmark(lib):
    m = _chain(lib)
    x, p0 = _vec(), _vec()
    res = m.benchmark(runtime.cpu(), repeat=3, number=4, x=x, p0=p0)
    assert len(res.results) == 3
    assert res.min <= res.median <= res.max and res.min > 0
    assert res.std >= 0 and res.min <= res.mean <= res.max
    text = str(res)
    assert "mean (ms)" in text and "median (ms)" in text
    e2e = m.benchmark(runtime.cpu(), repeat=2, number=2, end_to_end=True, x=x, p0=p0)
    assert len(e2e.results) == 2
    slow = m.benchmark(runtime.cpu(), repeat=1, number=1, min_repeat_ms=5)
    assert slow.results[0] > 0
    with pytest.raises(ValueError, match="func_name must be 'run'"):
        m.benchmark(runtime.cpu(), func_name="get_output")
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        m.benchmark(runtime.cpu(), repeat=0)


def test_benchmark_requires_inputs(lib):
    with pytest.raises(ValueError, match="never set"):
        _chain(lib).benchmark(runtime.cpu())


def test_graph_module_wraps_graph_module(lib):
    m = _chain(lib)
    m2 = graph_executor.GraphModule(m)
    m.set_input("x", _vec())
    m.set_input("p0", _vec())
    m2.run()
    assert m2["get_num_outputs"]() == 1
    with pytest.raises(AttributeError, match="no function 'nope'"):
        m2["nope"]
