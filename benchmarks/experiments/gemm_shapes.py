"""GEMM shapes of the generated transformer and MLP models, relayjit beside onnxruntime.

    nice -n 10 python benchmarks/experiments/gemm_shapes.py [--rounds 25] [--shapes 128x768x3072,...]

Each dense shape MxKxN is one ONNX MatMul (constant weight) + Add (bias), as BERT and GPT-2 run
their projections; each batch shape BxMxKxN is a MatMul of two inputs ([B, M, K] @ [B, K, N]),
as attention runs its scores and context. Both engines at one thread in this process, CPU time
of the calling thread (time.thread_time) over interleaved rounds, medians printed. Figures
only: the output is checked against numpy, speed is never asserted.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from benchmarks.model_cpu_time import measure  # noqa: E402

DENSE = ["128x768x3072", "128x3072x768", "128x768x2304", "128x768x768", "32x784x512",
         "1x784x512"]
BATCHED = ["12x128x64x128", "12x128x128x64"]


def _value(name: str, shape: tuple) -> object:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def dense_model(m: int, k: int, n: int, rng) -> tuple:
    """MatMul(x[M, K], W[K, N]) + B[N]: the model and its inputs."""
    w = (rng.standard_normal((k, n)) * 0.05).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["t"]),
             helper.make_node("Add", ["t", "B"], ["y"])]
    graph = helper.make_graph(nodes, "dense", [_value("x", (m, k))], [_value("y", (m, n))],
                              [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    return graph, {"x": rng.standard_normal((m, k)).astype("float32")}


def batched_model(bt: int, m: int, k: int, n: int, rng) -> tuple:
    """MatMul(a[B, M, K], b[B, K, N]), both inputs (attention's products)."""
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    graph = helper.make_graph([node], "bmm", [_value("a", (bt, m, k)), _value("b", (bt, k, n))],
                              [_value("y", (bt, m, n))])
    return graph, {"a": rng.standard_normal((bt, m, k)).astype("float32"),
                   "b": rng.standard_normal((bt, k, n)).astype("float32")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--shapes", default=",".join(DENSE + BATCHED),
                    help="comma-separated MxKxN (dense) or BxMxKxN (batched MatMul)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        dims = [int(d) for d in shape.split("x")]
        graph, inputs = (dense_model if len(dims) == 3 else batched_model)(*dims, rng)
        flops = 2 * np.prod(dims) / 1e9
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        ours, theirs = measure(model, inputs, args.rounds)
        print(f"{shape:>16}: relayjit {ours:7.3f} ms ({flops / ours * 1e3:4.0f} GFLOP/s)  "
              f"onnxruntime {theirs:7.3f} ms  ratio {ours / theirs:.2f}", flush=True)


if __name__ == "__main__":
    main()
