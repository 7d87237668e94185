"""NCHW global pools against the reductions mean / max they equal, and onnxruntime, one thread.

    python benchmarks/experiments/global_pool_layers.py [--rounds 15]

Each layer is relu then the pool (a conv's or batch norm's output in a model): built through
relay.build four ways, relu then nn.global_avg_pool2d / nn.global_max_pool2d, relu then mean /
max over (2, 3) with keepdims, and beside them onnxruntime (intra_op_num_threads=1) running
Relu then GlobalAveragePool / GlobalMaxPool. Outputs are checked against each other first.
Times: CPU time of this thread (time.thread_time), medians of interleaved rounds.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from compiler import relay  # noqa: E402
from compiler.ir.module import IRModule  # noqa: E402
from compiler.transform import PassContext  # noqa: E402
from runtime import cpu, graph_executor, threadpool  # noqa: E402

# (label, C, H): DenseNet-121, SqueezeNet, MobileNet-v2, ResNet-50's last activations
LAYERS = [("DenseNet-121 1024@7", 1024, 7), ("SqueezeNet 1000@13", 1000, 13),
          ("MobileNet-v2 1280@7", 1280, 7), ("ResNet-50 2048@7", 2048, 7)]
REPEAT = 50  # kernel runs per timed round


def _relayjit(body, shape, data):
    x = relay.var("x", shape=shape)
    with PassContext(opt_level=3):
        lib = relay.build(IRModule.from_expr(relay.Function([x], body(relay.nn.relu(x)))))
    g = graph_executor.GraphModule(lib["default"](cpu()))
    g.set_input(x=data)
    g.run()
    return g.run, g.get_output(0).numpy()


def _onnxruntime(op_type: str, shape, data):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op_type, ["r"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return (lambda: sess.run(None, {"x": data})), sess.run(None, {"x": data})[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    threadpool.set_num_threads(1)
    rng = np.random.default_rng(0)
    for label, c, h in LAYERS:
        shape = (1, c, h, h)
        data = rng.standard_normal(shape).astype("float32")
        for kind, reduce, op_type in (("avg", relay.mean, "GlobalAveragePool"),
                                      ("max", relay.max, "GlobalMaxPool")):
            pool = getattr(relay.nn, f"global_{kind}_pool2d")
            runs = {"pool": _relayjit(pool, shape, data),
                    kind if kind == "max" else "mean": _relayjit(
                        lambda v, r=reduce: r(v, axis=[2, 3], keepdims=True), shape, data),
                    "onnxruntime": _onnxruntime(op_type, shape, data)}
            outs = [out for _, out in runs.values()]
            for out in outs[1:]:
                np.testing.assert_allclose(out, outs[0], rtol=1e-5, atol=1e-6)
            times = {k: [] for k in runs}
            for _ in range(args.rounds):
                for k in random.sample(list(runs), len(runs)):
                    start = time.thread_time()
                    for _ in range(REPEAT):
                        runs[k][0]()
                    times[k].append((time.thread_time() - start) / REPEAT * 1e3)
            cols = "  ".join(f"{k} {np.median(v):.4f}" for k, v in times.items())
            print(f"{label:>22} relu + global {kind}: {cols} ms", flush=True)


if __name__ == "__main__":
    main()
