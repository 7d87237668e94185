"""One blocked-layout conv layer built with a switch of its configuration (a bool field of
conv2d_nchwc.direct's Conv2dConfig) off and on, timed in one process (one thread, thread CPU
time, median of interleaved rounds).

    python benchmarks/experiments/conv_nchwc_switch.py [--switch subsample_strided] [--rounds 9]
                                           [--layer C,H,K,R,stride,pad ...]

Default layers: ResNet-50's strided convs (1x1/2 projections and the 3x3/2 convs). Both
builds' outputs must agree before they are timed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from conv_blocked_layout import build  # noqa: E402

from codegen.schedules import Conv2dConfig  # noqa: E402

STRIDED = ["256,56,512,1,2,0", "256,56,128,1,2,0", "512,28,1024,1,2,0", "512,28,256,1,2,0",
           "1024,14,2048,1,2,0", "1024,14,512,1,2,0",
           "128,56,128,3,2,1", "256,28,256,3,2,1", "512,14,512,3,2,1"]


def timed(fns: dict, rounds: int) -> dict:
    """Median seconds a call of each function, over interleaved rounds of >= 20 ms each."""
    times = {key: [] for key in fns}
    for _ in range(rounds):
        for key, f in fns.items():
            f()
            number, start = 0, time.thread_time()
            while time.thread_time() - start < 0.02:
                f()
                number += 1
            times[key].append((time.thread_time() - start) / number)
    return {key: statistics.median(v) for key, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--switch", default="subsample_strided")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--layer", nargs="+", default=STRIDED)
    args = parser.parse_args()
    from runtime import threadpool

    threadpool.set_num_threads(1)
    print(f"conv2d_nchwc.direct {args.switch} off/on; one thread, thread CPU time, median of "
          f"{args.rounds} interleaved rounds (conv+bias+relu, ms)")
    for spec in args.layer:
        c, h, k, r, stride, pad = (int(v) for v in spec.split(","))
        fns = {}
        for value in (False, True):
            fns[value] = build("NCHWc", c, h, k, r, stride, pad, False,
                               Conv2dConfig.from_json({args.switch: value}))
        for f, _ in fns.values():
            f()
        np.testing.assert_allclose(fns[False][1], fns[True][1], rtol=1e-4, atol=1e-4)
        t = timed({key: f for key, (f, _) in fns.items()}, args.rounds)
        print(f"{c}->{k} {r}x{r}/{stride} @{h}: off {t[False] * 1e3:.4f}  on {t[True] * 1e3:.4f}"
              f"  on/off {t[True] / t[False]:.2f}", flush=True)


if __name__ == "__main__":
    main()
