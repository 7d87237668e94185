"""Concatenations without copies: relay.build turns a fused function that only concatenates
whole byte runs into a "__concat" node (no kernel) and the memory plan lays its inputs out
inside its output (nested ones too, as in DenseNet), checked against the interpreter."""
from __future__ import annotations

import json

import numpy as np
import pytest

from compiler import relay
from tests.build._interpreter_check import build_and_check

RNG = np.random.default_rng(3)


def _conv(x, c_in, c_out):
    w = relay.const(RNG.standard_normal((c_out, c_in, 3, 3)).astype("float32") * 0.2)
    return relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=c_out,
                                         kernel_size=(3, 3)))


def _build_and_check(func, shape):
    factory, m, _, _ = build_and_check(func, shape, RNG, atol=1e-5)
    return factory, json.loads(factory.get_graph_json()), m


def _concat_nodes(graph):
    return [n for n in graph["nodes"] if n["op"] == "tvm_op"
            and n["attrs"]["func_name"] == "__concat"]


def test_branches_write_into_their_slice():
    x = relay.var("x", shape=(1, 8, 10, 10))
    y = relay.concatenate([_conv(x, 8, 16), _conv(x, 8, 32)], axis=1)
    factory, graph, m = _build_and_check(relay.Function([x], relay.nn.max_pool2d(y)),
                                         (1, 8, 10, 10))
    assert len(_concat_nodes(graph)) == 1
    assert not any("concatenate" in name for name in factory.get_lib().function_names)
    offsets = graph["attrs"]["storage_offset"][1]
    assert sorted(set(offsets)) == [0, 16 * 100 * 4]
    assert [name for _, _, name in m.module.steps if "concatenate" in name] == []


def test_nested_concatenations_share_one_buffer():
    x = relay.var("x", shape=(1, 16, 8, 8))
    feats = _conv(x, 16, 16)
    outs = []
    for k in range(3):  # DenseNet: each layer reads the running concatenation
        new = _conv(feats, 16 + 16 * k, 16)
        feats = relay.concatenate([feats, new], axis=1)
        outs.append(feats)
    body = relay.add(relay.mean(outs[0], axis=[1, 2, 3]), relay.mean(feats, axis=[1, 2, 3]))
    factory, graph, m = _build_and_check(relay.Function([x], body), (1, 16, 8, 8))
    concats = _concat_nodes(graph)
    assert len(concats) == 3
    sids = graph["attrs"]["storage_id"][1]
    row = graph["node_row_ptr"]
    nid = {id(n): i for i, n in enumerate(graph["nodes"])}
    out_sids = {sids[row[nid[id(n)]]] for n in concats}
    assert len(out_sids) == 1  # the three concatenations are one buffer
    assert [name for _, _, name in m.module.steps if "concatenate" in name] == []


def test_an_input_or_a_batch_is_copied_or_compiled():
    x = relay.var("x", shape=(1, 8, 6, 6))
    y = relay.concatenate([x, _conv(x, 8, 8)], axis=1)  # the graph input is copied
    factory, graph, m = _build_and_check(relay.Function([x], relay.nn.max_pool2d(y)),
                                         (1, 8, 6, 6))
    assert len(_concat_nodes(graph)) == 1
    assert len([name for _, _, name in m.module.steps if "concatenate" in name]) >= 1
    xb = relay.var("x", shape=(2, 8, 6, 6))  # batch 2: channel slices are not byte runs
    yb = relay.concatenate([_conv(xb, 8, 8), _conv(xb, 8, 8)], axis=1)
    factory, graph, _ = _build_and_check(relay.Function([xb], relay.nn.max_pool2d(yb)),
                                         (2, 8, 6, 6))
    assert _concat_nodes(graph) == []
    assert any("concatenate" in name for name in factory.get_lib().function_names)


@pytest.mark.parametrize("axis", [2, 3])
def test_other_axes_after_unit_dims(axis):
    x = relay.var("x", shape=(1, 1, 4, 16))
    y = relay.concatenate([_conv(x, 1, 1), _conv(x, 1, 1)], axis=axis)
    _, graph, _ = _build_and_check(relay.Function([x], relay.nn.max_pool2d(y)), (1, 1, 4, 16))
    assert len(_concat_nodes(graph)) == (1 if axis == 2 else 0)
