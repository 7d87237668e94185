"""Per-kernel time of a model on the graph executor (each node's kernel called repeatedly).

    python benchmarks/profile_model.py resnet50 [vgg19 ...] [--top 25] [--number 5]

Builds under PassContext(opt_level=3) (as benchmarks/models.py does), runs the graph once,
then times every graph node by calling its kernel `number` times (median of `repeat` rounds,
rounds interleaved over all nodes so machine noise hits all alike). Prints the nodes sorted by
time with their share, and the total against one whole run.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def profile(name: str, number: int, repeat: int, top: int) -> None:
    import onnx

    import runtime
    from compiler import relay
    from compiler.tools.model_zoo import dummy_inputs, light_model_path
    from compiler.transform import PassContext
    from runtime import graph_executor

    path = name if name.endswith(".onnx") else light_model_path(name)
    model = onnx.load(path)
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=3):
        factory = relay.build(mod, target="llvm", params=params)
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.set_input(**dummy_inputs(model))
    gmod.run()
    ex = gmod.module if hasattr(gmod, "module") else gmod._module
    steps = ex.steps
    shapes = {}
    for op in ex.plan.ops:
        shapes[op.name] = [tuple(ex.entries[e].shape) for e in op.inputs[:1] + op.outputs[:1]]
    times = [[] for _ in steps]
    for _ in range(repeat):
        for i, (fn, arg, _n) in enumerate(steps):
            t = time.perf_counter()
            for _ in range(number):
                fn(arg)
            times[i].append((time.perf_counter() - t) / number)
    med = [float(np.median(t)) * 1e3 for t in times]
    whole = []
    for _ in range(repeat):
        t = time.perf_counter()
        gmod.run()
        whole.append(time.perf_counter() - t)
    total = sum(med)
    print(f"== {os.path.basename(path)}: sum of nodes {total:.2f} ms, whole run "
          f"{np.median(whole) * 1e3:.2f} ms, {len(steps)} nodes")
    by_kind: dict[str, float] = {}
    for (fn, arg, n), m in zip(steps, med):
        kind = _kind(ex, n)
        by_kind[kind] = by_kind.get(kind, 0.0) + m
    for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {v:8.2f} ms {100 * v / total:5.1f}%  {k}")
    print("  -- top nodes")
    order = sorted(range(len(steps)), key=lambda i: -med[i])[:top]
    for i in order:
        n = steps[i][2]
        print(f"  {med[i]:8.3f} ms {100 * med[i] / total:5.1f}%  {_func(ex, n)[:70]:70s} "
              f"{shapes.get(n)}")


def _func(ex, node_name: str) -> str:
    for op in ex.plan.ops:
        if op.name == node_name:
            return op.func_name
    return node_name


def _kind(ex, node_name: str) -> str:
    f = _func(ex, node_name).replace("tvmgen_default_fused_", "")
    for key in ("contrib_conv2d_packed", "conv2d", "dense", "max_pool", "avg_pool",
                "global", "concatenate", "softmax", "lrn", "batch_norm", "__nop"):
        if key in f:
            return key
    return f.split("_")[0] + "_" + (f.split("_")[1] if "_" in f else "")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="+")
    parser.add_argument("--number", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    for m in args.models:
        profile(m, args.number, args.repeat, args.top)


if __name__ == "__main__":
    main()
