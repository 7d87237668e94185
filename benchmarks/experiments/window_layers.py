"""Depthwise conv and pooling layers (codegen/schedules/window.py) beside onnxruntime, one thread.

    python benchmarks/experiments/window_layers.py                 # MobileNet-v2, ShuffleNet and UNet layers
    python benchmarks/experiments/window_layers.py dw:144,56,2     # depthwise 3x3 + bias + Relu6, C,H,stride
    python benchmarks/experiments/window_layers.py max:24,112,3,2  # 3x3 stride-2 max pool (pad 1): C,H,k,s
    python benchmarks/experiments/window_layers.py max:64,111,3,2,0  # unpadded (SqueezeNet's): C,H,k,s,pad
    python benchmarks/experiments/window_layers.py --target "llvm -mcpu=x86-64-v3"  # AVX2 code on this host

Each layer is a one-node ONNX model (a depthwise Conv with its bias and Clip(0, 6), as MobileNet
exports it, or a MaxPool), built by relay.build at opt_level 3 and run through the graph
executor, and by an onnxruntime session with intra_op_num_threads=1 in the same process. The
outputs are compared first. Times are CPU time of the calling thread (time.thread_time), the
median over interleaved rounds, so the machine's other load hits both alike.

onnxruntime reorders a lone NCHW layer into its blocked layout and back (its ReorderInput and
ReorderOutput nodes are in its time); inside a model it keeps the blocked layout between
layers, so a whole model (benchmarks/models.py) is the fair comparison and this script the
per-layer A/B for schedule changes.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from benchmarks.model_cpu_time import measure  # noqa: E402

# (kind, channels, height=width, stride) for depthwise; pools add the window size
LAYERS = [
    ("dw", 32, 112, 1), ("dw", 96, 112, 2), ("dw", 144, 56, 1), ("dw", 144, 56, 2),
    ("dw", 192, 28, 1), ("dw", 192, 28, 2), ("dw", 384, 14, 1),  # MobileNet-v2
    ("dw", 112, 56, 2), ("dw", 136, 28, 1), ("dw", 272, 14, 1), ("dw", 544, 7, 1),  # ShuffleNet
    ("max", 24, 112, 3, 2), ("max", 16, 128, 2, 2),  # ShuffleNet's and UNet's max pools
]


def _model(layer: tuple):
    from onnx import TensorProto, helper, numpy_helper

    kind, c, h = layer[:3]
    rng = np.random.default_rng(0)
    inits = []
    if kind == "dw":
        stride = layer[3]
        inits = [numpy_helper.from_array(rng.standard_normal((c, 1, 3, 3)).astype("f4"), "w"),
                 numpy_helper.from_array(rng.standard_normal(c).astype("f4"), "b"),
                 numpy_helper.from_array(np.float32(0.0), "lo"),
                 numpy_helper.from_array(np.float32(6.0), "hi")]
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, kernel_shape=[3, 3],
                                  strides=[stride] * 2, pads=[1] * 4),
                 helper.make_node("Clip", ["y", "lo", "hi"], ["z"])]
        oh = (h + 2 - 3) // stride + 1
    else:
        k, stride = layer[3], layer[4]
        pad = layer[5] if len(layer) > 5 else (k - 1) // 2
        nodes = [helper.make_node("MaxPool", ["x"], ["z"], kernel_shape=[k, k],
                                  strides=[stride] * 2, pads=[pad] * 4)]
        oh = (h + 2 * pad - k) // stride + 1
    graph = helper.make_graph(
        nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c, h, h))],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, (1, c, oh, oh))],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def bench(layer: tuple, rounds: int, target: str = "llvm") -> tuple[float, float]:
    """(relayjit ms, onnxruntime ms) for one layer, medians of interleaved rounds."""
    x = np.random.default_rng(1).standard_normal((1, layer[1], layer[2], layer[2]))
    return measure(_model(layer), {"x": x.astype("float32")}, rounds, target, 1e-4, 1e-4)


def _parse(spec: str) -> tuple:
    kind, _, dims = spec.partition(":")
    values = tuple(int(v) for v in dims.split(","))
    if kind not in ("dw", "max") or len(values) not in ((3,) if kind == "dw" else (4, 5)):
        raise SystemExit(f"layer {spec!r}: expected dw:C,H,stride or max:C,H,k,stride[,pad]")
    return (kind, *values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("layers", nargs="*", help="dw:C,H,stride or max:C,H,k,stride[,pad]")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--target", default="llvm",
                        help='relay.build target, e.g. "llvm -mcpu=x86-64-v3" (AVX2 code)')
    args = parser.parse_args()
    layers = [_parse(s) for s in args.layers] or LAYERS
    print("| layer | relayjit (ms) | onnxruntime (ms) | relayjit / ort |")
    print("|---|---:|---:|---:|")
    for layer in layers:
        ours, theirs = bench(layer, args.rounds, args.target)
        name = f"{layer[0]} {layer[1]}@{layer[2]}x{layer[2]} " + (
            f"s{layer[3]}" if layer[0] == "dw" else f"{layer[3]}x{layer[3]}/{layer[4]}"
            + (f" pad {layer[5]}" if len(layer) > 5 else ""))
        print(f"| {name} | {ours:.4f} | {theirs:.4f} | {ours / theirs:.2f} |", flush=True)


if __name__ == "__main__":
    main()
