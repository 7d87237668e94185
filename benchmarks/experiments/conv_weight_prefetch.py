"""Whole models with and without the direct conv schedule's weight prefetch, beside onnxruntime.

    python benchmarks/experiments/conv_weight_prefetch.py resnet50 [vgg19 ...] [--rounds 15]
                                  [--switch conv2d_nchw.winograd.u_in_place]
                                  [--switch pool2d_nchw.window.phases_max_bytes --values 0,73728]

Each model is built twice in this process (a field of a schedule configuration, by default
conv2d_nchw.direct.prefetch_weights, off then on, or set to the two --values, given through
PassContext config relayjit.schedule_config; the build cache off so both really compile),
then the two builds and onnxruntime
(intra_op_num_threads=1) run in interleaved rounds at one thread. Times are CPU time of the
calling thread (time.thread_time), medians over the rounds: robust to the other load on a
shared machine. In a whole run the deep layers' weights are read once and arrive cold; the
prefetch streams them in while the tiles before them run.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["RELAYJIT_BUILD_CACHE"] = "0"

import argparse  # noqa: E402
import ast  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def build(model, feeds: dict, switch: str, value):
    """A graph module of the model built with the configuration field <implementation>.<field>
    (switch) given `value` (relayjit.schedule_config), inputs set."""
    import runtime
    from compiler import relay
    from compiler.transform import PassContext
    from runtime import graph_executor

    implementation, field = switch.rsplit(".", 1)
    config = {"relayjit.schedule_config": {implementation: {field: value}}}
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=3, config=config):
        factory = relay.build(mod, target="llvm", params=params)
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.set_input(**feeds)
    return gmod


def main() -> None:
    from benchmarks.model_cpu_time import ab_rounds, load
    from runtime import threadpool

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--switch", default="conv2d_nchw.direct.prefetch_weights",
                        help="<implementation>.<field> of a schedule configuration "
                             "(compiler.op.strategy), e.g. conv2d_nchw.winograd.u_in_place")
    parser.add_argument("--values", default="False,True",
                        help="the setting's off and on values (Python literals), e.g. 0,73728")
    args = parser.parse_args()
    threadpool.set_num_threads(1)
    for name in args.models:
        model, feeds = load(name)
        off, on = (build(model, feeds, args.switch, ast.literal_eval(v))
                   for v in args.values.split(","))
        med, same, ok = ab_rounds(model, feeds, off, on, args.rounds)
        print(f"== {name}: {args.switch} off {med['off']:.2f} ms "
              f"({med['off'] / med['ort']:.3f}x), "
              f"on {med['on']:.2f} ms ({med['on'] / med['ort']:.3f}x), onnxruntime "
              f"{med['ort']:.2f} ms; one thread, CPU time, median of {args.rounds} rounds; "
              f"on/off {med['on'] / med['off']:.3f}; outputs "
              f"{'agree' if same else 'DIFFER'} off vs on, "
              f"{'agree' if ok else 'DIFFER'} with onnxruntime")


if __name__ == "__main__":
    main()
