"""Every distinct convolution of a model, alone, beside onnxruntime at one thread.

    python benchmarks/experiments/conv_layers.py squeezenet [shufflenet gen_mobilenet_v2 ...] [--top 15]
                                     [--rounds 15] [--relu] [--whole]

First the whole model (relayjit at one thread against onnxruntime with one intra-op thread,
CPU time of this thread: robust to the other load on a shared machine); --whole stops there.

Each distinct Conv of the model (input shape, weight shape, strides, pads, dilations, group)
becomes a one-node ONNX model (Conv with bias, then Relu with --relu, as most CNN layers
are); relayjit builds it under PassContext(opt_level=3) (weights packed at compile time) and
onnxruntime runs it with intra_op_num_threads=1, in this process. Times are CPU time of the
calling thread (time.thread_time), median of interleaved rounds; the table is sorted by the
time relayjit loses (ms x occurrences), so the layers to work on come first.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.model_cpu_time import load, measure  # noqa: E402


def model_convs(model) -> list[tuple[dict, int]]:
    """(conv description, occurrences) for every distinct Conv of the model."""
    from onnx import shape_inference

    model = shape_inference.infer_shapes(model)
    shapes = {}
    for v in list(model.graph.input) + list(model.graph.value_info):
        shapes[v.name] = tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
    for t in model.graph.initializer:
        shapes[t.name] = tuple(t.dims)
    found: dict[tuple, int] = {}
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        attrs = {a.name: tuple(a.ints) if a.ints else a.i for a in node.attribute}
        w = shapes[node.input[1]]
        key = (shapes[node.input[0]], w, attrs.get("strides", (1, 1)),
               attrs.get("pads", (0, 0, 0, 0)), attrs.get("dilations", (1, 1)),
               attrs.get("group", 1))
        found[key] = found.get(key, 0) + 1
    return [(dict(zip(("x", "w", "strides", "pads", "dilations", "group"), k)), n)
            for k, n in found.items()]


def conv_model(conv: dict, relu: bool):
    """A one-node (plus Relu) ONNX model of the conv with random weights and bias."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = rng.standard_normal(conv["w"]).astype(np.float32) * 0.1
    bias = rng.standard_normal(conv["w"][0]).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y" if relu else "out"],
                              strides=list(conv["strides"]), pads=list(conv["pads"]),
                              dilations=list(conv["dilations"]), group=conv["group"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["y"], ["out"]))
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, conv["x"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def compare_conv(conv: dict, relu: bool, rounds: int) -> tuple[float, float]:
    """(relayjit ms, onnxruntime ms) for one conv, one thread."""
    x = np.random.default_rng(1).standard_normal(conv["x"]).astype(np.float32)
    return measure(conv_model(conv, relu), {"x": x}, rounds, rtol=1e-3, atol=1e-4)


def describe(conv: dict) -> str:
    (_, c, h, w), (k, _, r, s) = conv["x"], conv["w"]
    extra = "" if conv["group"] == 1 else f" g{conv['group']}"
    stride = "" if conv["strides"] == (1, 1) else f"/{conv['strides'][0]}"
    pads = "" if not any(conv["pads"]) else f" p{conv['pads'][0]}"
    return f"{c}->{k} {r}x{s}{stride}{pads}{extra} @{h}x{w}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--relu", action="store_true")
    parser.add_argument("--whole", action="store_true", help="the whole models only")
    args = parser.parse_args()
    for name in args.models:
        model, feeds = load(name)
        ours, theirs = measure(model, feeds, args.rounds)
        print(f"== {name}: whole model relayjit {ours:.2f} ms, onnxruntime {theirs:.2f} ms "
              f"({ours / theirs:.2f}x), one thread, CPU time, outputs agree")
        if args.whole:
            continue
        rows = []
        for conv, count in model_convs(model):
            ours, theirs = compare_conv(conv, args.relu, args.rounds)
            rows.append((describe(conv), count, ours, theirs))
        rows.sort(key=lambda r: -(r[2] - r[3]) * r[1])
        total_ours = sum(r[2] * r[1] for r in rows)
        total_ort = sum(r[3] * r[1] for r in rows)
        print(f"   convs alone, relayjit {total_ours:.2f} ms, onnxruntime "
              f"{total_ort:.2f} ms ({total_ours / total_ort:.2f}x), one thread, CPU time")
        print(f"{'conv':34s} {'n':>3s} {'relayjit':>9s} {'ort':>9s} {'ratio':>6s} "
              f"{'lost ms':>8s}")
        for desc, count, ours, theirs in rows[:args.top]:
            print(f"{desc:34s} {count:3d} {ours:9.4f} {theirs:9.4f} {ours / theirs:6.2f} "
                  f"{(ours - theirs) * count:8.4f}")

if __name__ == "__main__":
    main()
