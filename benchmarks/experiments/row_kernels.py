"""Attention's row kernels alone, each beside its earlier form in the same process (CPU time).

    RELAYJIT_BUILD_CACHE=0 nice -n 10 python benchmarks/experiments/row_kernels.py [--rounds 21] [--threads 1]

- softmax of [1, 12, 128, 128] (plain, and with GPT-2's causal -10000 mask added before it):
  rows in groups of softmax.ROW_GROUP against one row at a time (ROW_GROUP = 1);
- layer norm of [1, 128, 768] written out as exporters do (rsqrt form, and the sqrt/divide
  form of opset < 17 exports) with FuseLayerNorm against the pass disabled (four kernels).

Outputs are checked against each other first; medians of interleaved rounds of the calling
thread's CPU time per run are printed (at --threads 2 the second thread is not counted, so
wall-clock medians are printed too). Figures only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from compiler import relay  # noqa: E402
from compiler.transform import PassContext  # noqa: E402
from runtime import cpu, graph_executor, threadpool  # noqa: E402

RNG = np.random.default_rng(0)
SCORES = (1, 12, 128, 128)
HIDDEN = (1, 128, 768)


def build(func: relay.Function, feed: np.ndarray, disabled=(), overrides=None
          ) -> graph_executor.GraphModule:
    config = {"relayjit.schedule_config": overrides} if overrides else {}
    with PassContext(opt_level=3, disabled_pass=list(disabled), config=config):
        lib = relay.build(func)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.set_input("x", feed)
    gm.run()
    return gm


def softmax_pair(masked: bool) -> tuple:
    x = (RNG.standard_normal(SCORES) * 3).astype("float32")
    if masked:
        x += np.triu(np.full(SCORES[-2:], -1e4, np.float32), 1)
    v = relay.var("x", shape=SCORES)
    func = relay.Function([v], relay.nn.softmax(v, axis=-1))
    grouped = build(func, x)
    single = build(func, x, overrides={"softmax.rows": {"row_group": 1}})
    return grouped, single


def layer_norm_pair(form: str) -> tuple:
    v = relay.var("x", shape=HIDDEN)
    c = relay.subtract(v, relay.mean(v, axis=[-1], keepdims=True))
    if form == "rsqrt":
        var = relay.mean(relay.multiply(c, c), axis=[-1], keepdims=True)
        n = relay.multiply(c, relay.rsqrt(relay.add(var, relay.const(np.float32(1e-12)))))
    else:
        var = relay.mean(relay.power(c, relay.const(np.float32(2.0))), axis=[-1], keepdims=True)
        n = relay.divide(c, relay.sqrt(relay.add(var, relay.const(np.float32(1e-5)))))
    gamma = relay.const(RNG.uniform(0.8, 1.2, HIDDEN[-1]).astype("float32"))
    beta = relay.const(RNG.uniform(-0.1, 0.1, HIDDEN[-1]).astype("float32"))
    func = relay.Function([v], relay.add(relay.multiply(n, gamma), beta))
    x = RNG.standard_normal(HIDDEN).astype("float32")
    return build(func, x), build(func, x, disabled=["FuseLayerNorm"])


def timed(gm, number: int) -> tuple[float, float]:
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(number):
        gm.run()
    return (time.thread_time() - c0) / number * 1e3, (time.perf_counter() - w0) / number * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    threadpool.set_num_threads(args.threads)
    pairs = {"softmax 12x128x128": softmax_pair(False),
             "softmax 12x128x128 causal mask": softmax_pair(True),
             "layer norm 128x768 (rsqrt form)": layer_norm_pair("rsqrt"),
             "layer norm 128x768 (sqrt/divide form)": layer_norm_pair("sqrt")}
    for name, (new, old) in pairs.items():
        np.testing.assert_allclose(new.get_output(0).numpy(), old.get_output(0).numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
        times = {"new": [], "old": []}
        for _ in range(args.rounds):
            times["new"].append(timed(new, 50))
            times["old"].append(timed(old, 50))
        (cn, wn), (co, wo) = np.median(times["new"], axis=0), np.median(times["old"], axis=0)
        print(f"{name:>38} threads={args.threads}: cpu {cn:.4f} ms (before {co:.4f}, "
              f"{cn / co:.3f}x) | wall {wn:.4f} ms (before {wo:.4f})", flush=True)


if __name__ == "__main__":
    main()
