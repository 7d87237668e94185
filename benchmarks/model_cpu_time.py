"""Whole models at one thread in CPU time, relayjit beside onnxruntime in the same process.

    nice -n 10 python benchmarks/model_cpu_time.py gen_bert_encoder gen_gpt2_decoder [--rounds 21]
    nice -n 10 python benchmarks/model_cpu_time.py light_resnet50 model.onnx
    nice -n 10 python benchmarks/model_cpu_time.py resnet50 --opt-level 2   # the default level

Why beside benchmarks/models.py: on a shared VM wall-clock medians of the two engines drift
apart by 10-30% from run to run (other tenants steal the core); the CPU time of the calling
thread (time.thread_time) counts only the cycles the model got. Both engines run on the calling
thread (relayjit's pool at one thread, onnxruntime with intra_op_num_threads=1), interleaved
round by round; the medians and their ratio are printed. The output is checked against
onnxruntime's (rtol 1e-3, atol 1e-3) before timing. Figures only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.generated_models import GENERATED_MODELS  # noqa: E402
from benchmarks.generated_models import build as build_generated  # noqa: E402
from compiler import relay  # noqa: E402
from compiler.tools.model_zoo import LIGHT_MODELS, dummy_inputs, light_model_path  # noqa: E402
from compiler.transform import PassContext  # noqa: E402
from runtime import cpu, graph_executor, threadpool  # noqa: E402


def load(name: str) -> tuple[onnx.ModelProto, dict]:
    """A generated model (with its seeded feeds), a light model or an ONNX file (dummy feeds)."""
    if name in GENERATED_MODELS:
        return build_generated(name)
    short = name.removeprefix("light_").removesuffix(".onnx")
    model = onnx.load(light_model_path(short) if short in LIGHT_MODELS else name)
    return model, dummy_inputs(model)


def measure(model: onnx.ModelProto, feeds: dict, rounds: int, target: str = "llvm",
            rtol: float = 1e-3, atol: float = 1e-3, opt_level: int = 3) -> tuple[float, float]:
    """(relayjit ms, onnxruntime ms) per run: medians of interleaved rounds of thread CPU time,
    both engines on the calling thread; the outputs are checked against onnxruntime's first.
    A round repeats a short model until it takes about 2 ms, so the clock's granularity and
    the call overhead do not decide. (The one timing loop of the benchmarks/ scripts that
    compare against onnxruntime at one thread.)"""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=opt_level):
        factory = relay.build(mod, target=target, params=params)
    gm = graph_executor.GraphModule(factory["default"](cpu()))
    gm.set_input(**feeds)
    threadpool.set_num_threads(1)
    gm.run()
    for i, expected in enumerate(want):
        np.testing.assert_allclose(gm.get_output(i).numpy(), expected, rtol=rtol, atol=atol)
    start = time.thread_time()
    gm.run()
    number = max(1, int(2e-3 / max(time.thread_time() - start, 1e-6)))

    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(cpu_ms(gm.run, number))
        theirs.append(cpu_ms(lambda: sess.run(None, feeds), number))
    return float(np.median(ours)), float(np.median(theirs))


def ab_rounds(model: onnx.ModelProto, feeds: dict, off, on, rounds: int,
              tolerance: float = 1e-5) -> tuple[dict, bool, bool]:
    """Two relayjit builds of a model (graph modules with their inputs set) and onnxruntime
    at one thread, in interleaved rounds: ({"off"|"on"|"ort": median ms of thread CPU time},
    whether off and on agree within `tolerance`, whether on agrees with onnxruntime). The
    in-process A/B the switch scripts (blocked_layout_models.py,
    experiments/conv_weight_prefetch.py) print."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    for g in (off, on):
        g.run()
    same = all(np.allclose(off.get_output(i).numpy(), on.get_output(i).numpy(),
                           rtol=tolerance, atol=tolerance) for i in range(off.get_num_outputs()))
    ok = all(np.allclose(on.get_output(i).numpy(), e, rtol=1e-3, atol=1e-4)
             for i, e in enumerate(expected))
    runs = {"off": off.run, "on": on.run, "ort": lambda: sess.run(None, feeds)}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for key, fn in runs.items():
            times[key].append(cpu_ms(fn, 2))
    return {k: float(np.median(v)) for k, v in times.items()}, same, ok


def interleaved_medians(fns: dict, rounds: int, min_seconds: float = 0.02) -> dict:
    """{name: median ms a call} of callables timed in interleaved rounds of thread CPU time,
    each round calling a function (after one warm call) until min_seconds have passed."""
    times: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            number, start = 0, time.thread_time()
            while time.thread_time() - start <= min_seconds:
                fn()
                number += 1
            times[name].append((time.thread_time() - start) / number * 1e3)
    return {name: float(np.median(t)) for name, t in times.items()}


def cpu_ms(fn, number: int) -> float:
    """Milliseconds of this thread's CPU time per call of fn, over `number` calls."""
    start = time.thread_time()
    for _ in range(number):
        fn()
    return (time.thread_time() - start) / number * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="generated model names, light model names or "
                    "ONNX files")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--opt-level", type=int, default=3,
                    help="PassContext opt_level of the build (2 is relay.build's default)")
    args = ap.parse_args()
    threadpool.set_num_threads(1)
    for name in args.models:
        ours, theirs = measure(*load(name), args.rounds, opt_level=args.opt_level)
        print(f"{name:>20}: relayjit {ours:8.3f} ms  onnxruntime {theirs:8.3f} ms  "
              f"ratio {ours / theirs:.3f}", flush=True)


if __name__ == "__main__":
    main()
