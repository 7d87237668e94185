"""Whole models with and without the NCHW[x]c activation layout, beside onnxruntime.

    python benchmarks/blocked_layout_models.py resnet50 [squeezenet gen_mobilenet_v2 ...]
                                               [--rounds 15] [--opt-level 3]

Each model is built twice in this process, PassContext config "relayjit.blocked_layout" False
then True (compiler/passes/convert_blocked_layout.py; the build cache off so both really
compile), then the two builds and onnxruntime (intra_op_num_threads=1) run in interleaved
rounds at one thread. Times are CPU time of the calling thread (time.thread_time), medians over
the rounds. The line also counts the blocked build's layout_transform kernels and its
contrib_conv2d_NCHWc convs.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["RELAYJIT_BUILD_CACHE"] = "0"

import argparse  # noqa: E402
import json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def build(model, feeds: dict, blocked: bool, opt_level: int):
    """(graph module with its inputs set, graph JSON) of the model, blocked layout on or off."""
    import runtime
    from compiler import relay
    from compiler.transform import PassContext
    from runtime import graph_executor

    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=opt_level, config={"relayjit.blocked_layout": blocked}):
        factory = relay.build(mod, target="llvm", params=params)
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.set_input(**feeds)
    return gmod, factory.get_graph_json()


def kernel_counts(graph_json: str) -> tuple[int, int]:
    """(layout_transform kernels, NCHWc conv kernels) in a graph's nodes."""
    nodes = [n for n in json.loads(graph_json)["nodes"] if n["op"] == "tvm_op"]
    names = [n["attrs"]["func_name"] for n in nodes]
    return (sum("layout_transform" in f for f in names),
            sum("contrib_conv2d_NCHWc" in f for f in names))


def main() -> None:
    from benchmarks.model_cpu_time import ab_rounds, load
    from runtime import threadpool

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--opt-level", type=int, default=3)
    args = parser.parse_args()
    threadpool.set_num_threads(1)
    for name in args.models:
        model, feeds = load(name)
        (off, _), (on, graph) = (build(model, feeds, b, args.opt_level) for b in (False, True))
        med, same, ok = ab_rounds(model, feeds, off, on, args.rounds, tolerance=1e-4)
        transforms, convs = kernel_counts(graph)
        print(f"== {name} (opt_level {args.opt_level}): NCHW {med['off']:.2f} ms "
              f"({med['off'] / med['ort']:.3f}x), NCHW[x]c {med['on']:.2f} ms "
              f"({med['on'] / med['ort']:.3f}x), onnxruntime {med['ort']:.2f} ms; one thread, "
              f"CPU time, median of {args.rounds} rounds; on/off {med['on'] / med['off']:.3f}; "
              f"{convs} NCHWc convs, {transforms} layout_transform kernels; outputs "
              f"{'agree' if same else 'DIFFER'} off vs on, "
              f"{'agree' if ok else 'DIFFER'} with onnxruntime", flush=True)


if __name__ == "__main__":
    main()
