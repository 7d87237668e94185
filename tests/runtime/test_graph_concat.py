"""__concat nodes and storage offsets in the graph executor (runtime.graph_json /
graph_runtime): inputs laid out in place cost nothing, others are copied, and a graph file
that lays tensors out wrongly is refused before anything runs."""
from __future__ import annotations

import json

import numpy as np
import pytest

import runtime
from runtime import graph_executor

from tests.runtime import _runtime_kernels as K

N = 16  # the test kernels' vector length: 64 bytes, one aligned run
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def lib():
    return K.library(N)


def _concat_graph(storage_ids, offsets=None, out_shape=(2, N)) -> str:
    """a = relu(x), b = relu(y), out = concat(a, b) viewed as out_shape."""
    nodes = [K.null("x"), K.null("y"),
             K.op("relu_a", "relu", [[0, 0, 0]]), K.op("relu_b", "relu", [[1, 0, 0]]),
             K.op("concatenate", "__concat", [[2, 0, 0], [3, 0, 0]])]
    g = json.loads(K.graph(nodes, [[4, 0]], [[N], [N], [1, N], [1, N], list(out_shape)],
                           storage_ids))
    g["attrs"]["shape"][1][2:4] = [[1, N], [1, N]]
    if offsets is not None:
        g["attrs"]["storage_offset"] = ["list_int", offsets]
    return json.dumps(g)


def _run(lib, graph):
    m = graph_executor.create(graph, lib, runtime.cpu())
    x, y = RNG.standard_normal(N).astype("float32"), RNG.standard_normal(N).astype("float32")
    m.run(x=x, y=y)
    return m, np.concatenate([np.maximum(x, 0), np.maximum(y, 0)]).reshape(2, N)


def test_inputs_laid_out_in_place_need_no_copy(lib):
    m, want = _run(lib, _concat_graph([0, 1, 2, 2, 2], [0, 0, 0, 64, 0]))
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)
    assert [name for _, _, name in m.module.steps] == ["relu_a", "relu_b"]
    out = m.module.entries[4]
    assert m.module.entries[3].ctypes.data == out.ctypes.data + 64


def test_inputs_elsewhere_are_copied(lib):
    m, want = _run(lib, _concat_graph([0, 1, 2, 3, 4]))
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)
    assert [name for _, _, name in m.module.steps].count("concatenate") == 2
    # one input in place, the other copied
    m, want = _run(lib, _concat_graph([0, 1, 2, 3, 2], [0, 0, 0, 0, 0]))
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)
    assert [name for _, _, name in m.module.steps].count("concatenate") == 1


def test_bad_layouts_are_refused(lib):
    with pytest.raises(ValueError, match="storage_offset of entry 3 is 32; expected a multiple "
                                         "of 64"):
        graph_executor.create(_concat_graph([0, 1, 2, 2, 2], [0, 0, 0, 32, 0]), lib,
                              runtime.cpu())
    with pytest.raises(ValueError, match="storage_offset"):
        graph_executor.create(_concat_graph([0, 1, 2, 2, 2], [0, 0, 0, -64, 0]), lib,
                              runtime.cpu())
    # b placed over a while both are alive (not the layout the concatenation needs)
    with pytest.raises(ValueError, match="share bytes of storage 2 while both are alive"):
        graph_executor.create(_concat_graph([0, 1, 2, 2, 3], [0, 0, 0, 0, 0]), lib,
                              runtime.cpu())
    with pytest.raises(ValueError, match="not a concatenation of whole byte runs"):
        graph_executor.create(_concat_graph([0, 1, 2, 3, 4], out_shape=(2, N + 1)), lib,
                              runtime.cpu())


def test_a_kernel_output_may_not_overlap_its_input(lib):
    nodes = [K.null("x"), K.op("relu", "relu", [[0, 0, 0]]), K.op("relu2", "relu", [[1, 0, 0]])]
    g = json.loads(K.graph(nodes, [[2, 0]], [[N], [N], [N]], [0, 1, 1]))
    g["attrs"]["storage_offset"] = ["list_int", [0, 0, 0]]
    with pytest.raises(ValueError, match="share bytes|overlaps an input"):
        graph_executor.create(json.dumps(g), lib, runtime.cpu())
