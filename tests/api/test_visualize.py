"""compiler.tools.visualize.draw_graph: the SVG's boxes and edges match the graph JSON."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from compiler import relay, transform
from compiler.tools.visualize import draw_graph

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def factory():
    """Two inputs, a branch that joins again, two outputs: conv+relu, add, reshape, dense."""
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 3, 6, 6))
    z = relay.var("z", shape=(1, 4, 6, 6))
    w = relay.const(rng.standard_normal((4, 3, 3, 3)).astype("float32"))
    conv = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    joined = relay.add(conv, relay.exp(z))
    flat = relay.reshape(joined, (1, 144))
    dense = relay.nn.dense(flat, relay.const(rng.standard_normal((5, 144)).astype("float32")))
    with transform.PassContext(opt_level=3):
        return relay.build(relay.Function([x, z], relay.Tuple([dense, joined])))


def _parse(svg: str) -> dict[str, list]:
    root = ET.fromstring(svg)
    by_class: dict[str, list] = {}
    for g in root.iter(f"{SVG}g"):
        for cls in g.get("class", "").split():
            by_class.setdefault(cls, []).append(g)
    return by_class


def test_boxes_and_edges_match_the_graph(factory):
    graph = json.loads(factory.get_graph_json())
    params = factory.get_params()
    svg = _parse(draw_graph(factory.get_graph_json(), params, title="t"))
    ops = [n for n in graph["nodes"] if n["op"] == "tvm_op"]
    param_ids = {i for i, n in enumerate(graph["nodes"]) if n["name"] in params}
    assert len(svg["kernel"]) == len(ops)
    assert len(svg["input"]) == 2 and len(svg["output"]) == 2
    reads = sum(1 for n in ops for ref in n["inputs"] if ref[0] not in param_ids)
    assert len(svg["edge"]) == reads + len(graph["heads"])
    labels = [" ".join(t.text for t in g.iter(f"{SVG}text")) for g in svg["kernel"]]
    for node, label in zip(ops, labels):  # boxes follow the node order
        for op in node["attrs"]["relay_ops"].split(","):
            assert op in label
    assert sum("param p" in label for label in labels) == len(params)
    edge_labels = {g.find(f"{SVG}text").text for g in svg["edge"]}
    assert {"1x3x6x6", "1x4x6x6", "1x144", "1x5"} <= edge_labels
    assert len(svg["nop"]) == 1  # the reshape shares its input's storage


def test_profile_times_shade_and_label_the_kernels(factory):
    graph = json.loads(factory.get_graph_json())
    names = [n["name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    times = {name: 1e-3 * (i + 1) for i, name in enumerate(names)}
    svg = _parse(draw_graph(factory.get_graph_json(), factory.get_params(), times))
    fills = [g.find(f"{SVG}rect").get("style") for g in svg["kernel"]]
    assert all(f and f.startswith("fill:#") for f in fills)
    assert fills[-1] != fills[0]  # slowest and fastest differ
    text = " ".join(t.text for g in svg["kernel"] for t in g.iter(f"{SVG}text"))
    assert "1.000 ms" in text and f"{len(names)}.000 ms" in text
