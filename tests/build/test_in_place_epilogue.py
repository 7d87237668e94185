"""Outputs written over a residual: a conv whose fused epilogue adds an intermediate that no
later node reads writes its result into that intermediate's storage (the kernel library
says which of its kernels may; the plan takes the input's token; the runtime checks both),
for every conv schedule that declares it, checked against the interpreter; and the runtime
refuses a graph that puts an output over an input any other way."""
from __future__ import annotations

import json

import numpy as np
import pytest

from codegen import te
from codegen.lower import lower
from codegen.schedules import conv2d_nchw_packed
from compiler import relay
from compiler.passes.convert_blocked_layout import BLOCKED_LAYOUT, BLOCKED_LAYOUT_GUARD
from runtime import cpu, load_module
from runtime.graph_executor import GraphModule
from runtime.graph_runtime import create_executor
from tests.build._interpreter_check import build_and_check

from tests.schedule_helpers import conv_pack, host

RNG = np.random.default_rng(11)


def _weight(c_out, c_in, k):
    return relay.const(RNG.standard_normal((c_out, c_in, k, k)).astype("float32")
                       * (1.0 / np.sqrt(c_in * k * k)))


def _conv(x, c_in, c_out, k=1, relu=True):
    y = relay.nn.conv2d(x, _weight(c_out, c_in, k), padding=(k // 2, k // 2),
                        channels=c_out, kernel_size=(k, k))
    y = relay.nn.bias_add(y, relay.const(RNG.standard_normal(c_out).astype("float32")))
    return relay.nn.relu(y) if relu else y


def _build(func, shape, blocked=False, guard=None):
    config = {BLOCKED_LAYOUT: blocked, **({BLOCKED_LAYOUT_GUARD: guard} if guard else {})}
    return build_and_check(func, shape, RNG, config=config)


def _bottleneck(channels, inner, k, size, tail=None, ends=8, depthwise=False):
    """r = conv(x); z = relu(conv_k(conv(r)) + r); out = conv(z) (+ tail(r)); x and out have
    `ends` channels; depthwise: conv_k is a k x k depthwise conv of inner = channels."""
    x = relay.var("x", shape=(1, ends, size, size))
    r = _conv(x, ends, channels)
    y = _conv(r, channels, inner, k=1 if depthwise else 3)
    if depthwise:
        w = relay.const(RNG.standard_normal((channels, 1, k, k)).astype("float32") / k)
        conv = relay.nn.conv2d(y, w, padding=(k // 2, k // 2), groups=channels,
                               channels=channels, kernel_size=(k, k))
    else:
        conv = _conv(y, inner, channels, k=k, relu=False)
    z = relay.nn.relu(relay.add(conv, r))
    out = _conv(z, channels, ends)
    if tail is not None:
        out = relay.add(out, tail(r))
    return relay.Function([x], out), (1, ends, size, size)


# case: ((residual channels, conv input channels, window, size), bottleneck options, the
# residual conv's kernel); "blocked" cases build in NCHW[x]c (ConvertBlockedLayout), whole
# channel blocks at both widths, the others in NCHW
SCHEDULES = {
    "direct 1x1": ((64, 128, 1, 7), {}, "conv2d"),
    "direct 3x3": ((64, 64, 3, 8), {}, "conv2d"),
    "rows 3x3": ((16, 16, 3, 20), {}, "conv2d"),
    "pointwise rows": ((32, 16, 1, 10), {}, "conv2d"),
    "gemm": ((64, 64, 1, 8), {}, "conv2d"),
    "pixel-major 1x1": ((256, 128, 1, 7), {}, "conv2d"),  # the copy reads y, tiles write r
    "three-vector 3x3": ((48, 64, 3, 8), {}, "conv2d"),  # 48 channels, one tile
    "winograd F(2)": ((128, 128, 3, 12), {}, "winograd"),
    "blocked 1x1": ((64, 128, 1, 7), {"ends": 16}, "conv2d_NCHWc"),
    "blocked 3x3": ((32, 32, 3, 9), {"ends": 16}, "conv2d_NCHWc"),
    "blocked 1x1, input-channel blocks": ((64, 512, 1, 7), {"ends": 16}, "conv2d_NCHWc"),
    "blocked winograd F(4)": ((64, 64, 3, 24), {"ends": 16}, "winograd"),
    "blocked depthwise 3x3": ((32, 32, 3, 10), {"ends": 16, "depthwise": True},
                              "depthwise_conv2d_NCHWc"),
}


@pytest.mark.parametrize("case", sorted(SCHEDULES))
def test_residual_conv_writes_over_its_residual(case):
    sizes, options, kernel = SCHEDULES[case]
    blocked = case.startswith("blocked")
    func, shape = _bottleneck(*sizes, **options)
    # these small graphs pay for their edge transforms: lift the pass's cost guard
    factory, m, x, want = _build(func, shape, blocked, {"max_transform_elements_per_flop": 1.0})
    lib = factory.get_lib()
    assert len(m.module.in_place) == 1, lib.in_place
    (src, dst), = m.module.in_place
    graph = json.loads(factory.get_graph_json())
    assert graph["attrs"]["storage_id"][1][src] == graph["attrs"]["storage_id"][1][dst]
    node, _, _ = _node_and_entries(graph, lambda f: f in lib.in_place)
    name = node["attrs"]["func_name"]
    assert f"_{kernel}_" in name, name
    assert ("layout_transform" in graph_ops(graph)) == blocked
    m.run()  # a second run recomputes the residual before it is written over
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("blocked", [False, True])
def test_a_residual_read_later_keeps_its_storage(blocked):
    func, shape = _bottleneck(64, 128, 1, 7, ends=16, tail=lambda r: relay.nn.relu(
        relay.mean(r, axis=[1], keepdims=True)))
    factory, m, _, want = _build(func, shape, blocked)
    assert m.module.in_place == set()
    assert ("layout_transform" in graph_ops(json.loads(factory.get_graph_json()))) == blocked
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def graph_ops(graph) -> str:
    """The graph's kernel names, one string."""
    return " ".join(n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op")


def test_a_graph_input_is_never_written_over():
    x = relay.var("x", shape=(1, 64, 7, 7))
    z = relay.nn.relu(relay.add(_conv(x, 64, 64, k=3, relu=False), x))
    factory, m, x_value, want = _build(relay.Function([x], _conv(z, 64, 8)), (1, 64, 7, 7))
    assert m.module.in_place == set()
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def _node_and_entries(graph, pick):
    """The first kernel node pick(func_name) accepts: (node, input entries, output entry)."""
    row = graph["node_row_ptr"]
    for nid, node in enumerate(graph["nodes"]):
        if node["op"] == "tvm_op" and pick(node["attrs"]["func_name"]):
            ins = [row[i] + k for i, k, _ in node["inputs"]]
            return node, ins, row[nid]
    raise AssertionError("no such node")


def _write_output_over_its_residual(factory):
    """The graph of factory with the in-place kernel's output moved onto its residual."""
    graph = json.loads(factory.get_graph_json())
    in_place = factory.get_lib().in_place
    node, ins, out_entry = _node_and_entries(graph, lambda f: f in in_place)
    (_, q), = in_place[node["attrs"]["func_name"]].items()
    sids = graph["attrs"]["storage_id"][1]
    sids[out_entry] = sids[ins[q]]
    return graph


def _load(factory, graph):
    return create_executor(json.dumps(graph), factory.get_lib(), cpu())


def test_runtime_refuses_an_input_written_over_without_the_kernels_consent():
    x = relay.var("x", shape=(1, 16, 6, 6))
    r = _conv(x, 16, 16)
    out = _conv(relay.nn.max_pool2d(r, pool_size=(3, 3), padding=(1, 1)), 16, 8)
    factory, _, _, _ = _build(relay.Function([x], out), (1, 16, 6, 6))
    graph = json.loads(factory.get_graph_json())
    _, ins, out_entry = _node_and_entries(graph, lambda f: "max_pool2d" in f)
    sids = graph["attrs"]["storage_id"][1]
    sids[out_entry] = sids[ins[0]]  # the pool's output over its (same-sized) input
    with pytest.raises(ValueError, match="share bytes|does not run in place"):
        _load(factory, graph)


def test_runtime_refuses_writing_over_a_residual_that_is_read_later():
    func, shape = _bottleneck(64, 128, 1, 7, tail=lambda r: relay.nn.relu(
        relay.mean(r, axis=[1], keepdims=True)))
    factory, _, _, _ = _build(func, shape)
    with pytest.raises(ValueError, match="reads later"):
        _load(factory, _write_output_over_its_residual(factory))


def test_runtime_refuses_writing_over_a_graph_input():
    x = relay.var("x", shape=(1, 64, 7, 7))
    z = relay.nn.relu(relay.add(_conv(_conv(x, 64, 64), 64, 64, relu=False), x))
    factory, _, _, _ = _build(relay.Function([x], _conv(z, 64, 8)), (1, 64, 7, 7))
    with pytest.raises(ValueError, match="keeps its value between runs"):
        _load(factory, _write_output_over_its_residual(factory))


def test_an_exported_module_keeps_its_kernels_in_place(tmp_path):
    """The pairs travel inside the object code: a loaded module runs in place, correctly."""
    func, shape = _bottleneck(*SCHEDULES["direct 1x1"][0])
    factory, m, x, want = _build(func, shape)
    path = tmp_path / "bottleneck.relayjit"
    factory.export_library(str(path))
    loaded = load_module(str(path))
    assert loaded.get_lib().in_place == factory.get_lib().in_place != {}
    g = GraphModule(loaded["default"](cpu()))
    assert g.module.in_place == m.module.in_place
    g.run(x=x)
    np.testing.assert_allclose(g.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_runtime_refuses_writing_over_an_input_the_node_also_reads_otherwise():
    """A graph that passes the residual also as the conv's data, then puts the output over it:
    the conv would read what it had already overwritten."""
    func, shape = _bottleneck(*SCHEDULES["direct 3x3"][0])  # data and residual 64 x 8 x 8
    factory, _, _, _ = _build(func, shape)
    graph = _write_output_over_its_residual(factory)
    in_place = factory.get_lib().in_place
    node, _, _ = _node_and_entries(graph, lambda f: f in in_place)
    (_, q), = in_place[node["attrs"]["func_name"]].items()
    node["inputs"][0] = node["inputs"][q]  # the residual as the data too
    with pytest.raises(ValueError, match="also reads as another argument"):
        _load(factory, graph)


def test_lowering_pairs_only_an_input_read_at_the_outputs_index_alone():
    """The lowering's record: z = conv(x) + r pairs z with r; not when r is also copied to a
    second output (the copy would read r after z overwrote it), nor when r is read elsewhere
    than at z's own index."""
    x, r = te.placeholder((1, 128, 7, 7), name="x"), te.placeholder((1, 64, 7, 7), name="r")
    wp = te.placeholder(conv_pack(64, 128, 1, 1), name="wp")
    conv = conv2d_nchw_packed(x, wp, channels=64, options=host())
    z = te.compute(conv.shape, lambda n, k, i, j: conv[n, k, i, j] + r[n, k, i, j], name="z")
    assert lower("pair", [x, wp, r], [z]).attrs["in_place"] == ((3, 2),)
    assert "in_place" not in lower("copied", [x, wp, r], [z, r]).attrs
    flipped = te.compute(conv.shape, lambda n, k, i, j: conv[n, k, i, j] + r[n, k, j, i],
                         name="flipped")
    assert "in_place" not in lower("elsewhere", [x, wp, r], [flipped]).attrs


def test_lowering_never_pairs_the_extern_s_own_input():
    """z = conv(r) + r: r is the conv's data as well as its residual, so writing z over r
    would overwrite data the conv still reads (its neighbours, its other channels)."""
    r = te.placeholder((1, 64, 7, 7), name="r")
    wp = te.placeholder(conv_pack(64, 64, 1, 1), name="wp")
    conv = conv2d_nchw_packed(r, wp, channels=64, options=host())
    z = te.compute(conv.shape, lambda n, k, i, j: conv[n, k, i, j] + r[n, k, i, j], name="z")
    assert "in_place" not in lower("own_input", [r, wp], [z]).attrs


@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("kind", ["conv1x1", "conv3x3", "depthwise"])
def test_a_conv_adding_its_own_input(blocked, kind):
    """y = relu(conv1x1(x)); conv(y) + y, through relay.build against the interpreter: a
    fused epilogue adding the conv's own input (found by a random-network A/B of the blocked
    layout: the blocked depthwise wrote over its input and read back its own output)."""
    x = relay.var("x", shape=(1, 32, 10, 10), dtype="float32")
    y = _conv(x, 32, 32)
    k, groups = (1, 1) if kind == "conv1x1" else (3, 32 if kind == "depthwise" else 1)
    w = relay.const((RNG.standard_normal((32, 32 // groups, k, k)) / k)
                    .astype("float32"))
    z = relay.add(relay.nn.conv2d(y, w, padding=(k // 2, k // 2), groups=groups), y)
    _build(relay.Function([x], relay.nn.relu(z)), (1, 32, 10, 10), blocked=blocked)
