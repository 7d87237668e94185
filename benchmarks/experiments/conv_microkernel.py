"""The direct conv micro-kernel alone: one tile, its data in cache, called over and over.

    python benchmarks/experiments/conv_microkernel.py [--channels 256] [--pixels 12] [--plane 196 3136]

Prints GFLOP/s beside the FMA peak measured in the same run (benchmarks/fma_peak.py), so the
distance between the kernel's instruction stream and the machine's limit is visible apart from
what a layer adds (memory, the tile's transpose and stores are in it: channel-major tiles).
`--plane` is the input's channel stride in floats (a 56x56 plane is 3136: its channels' lines
share few L1 sets). Thread CPU time, the best of rounds (the kernel's own speed: other
tenants only ever slow a round down). Figures only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from benchmarks.fma_peak import fma_peak_gflops  # noqa: E402
from codegen import te  # noqa: E402
from codegen.jit import build_te  # noqa: E402
from codegen.llvm.microkernels import Conv  # noqa: E402
from codegen.schedules.common import addr, imm, ukr_call, var  # noqa: E402
from codegen.tir.stmt import For  # noqa: E402
from compiler.driver.build import current_options  # noqa: E402

CALLS = 2000


def tile_gflops(channels: int, pixels: int, plane: int, rounds: int = 15) -> float:
    kb = 2 * current_options().vector_width
    w = te.placeholder((channels, kb), name="w")
    x = te.placeholder((channels, plane), name="x")

    def fcompute(ins, outs):
        wb, xb = ins
        i = var("call")
        kernel = Conv(kb, kb // 2, pixels, 1, 1, plane, plane, 1, 1, channel_major=True)
        return For(i, CALLS, ukr_call(kernel, addr(wb, 0, 0), addr(outs[0], 0, 0), 0, channels,
                                      addr(wb, 0, 0), *(addr(xb, imm(0), imm(j))
                                                        for j in range(pixels))))

    run = build_te([w, x], [te.extern((kb, kb // 2), [w, x], fcompute, name="tile")],
                   name="conv_tile")
    wa = np.random.rand(channels, kb).astype("float32")
    xa = np.random.rand(channels, plane).astype("float32")
    run(wa, xa)
    times = []
    for _ in range(rounds):
        start = time.thread_time()
        run(wa, xa)
        times.append(time.thread_time() - start)
    return 2 * kb * pixels * channels * CALLS / min(times) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--channels", type=int, default=256)
    parser.add_argument("--pixels", type=int, nargs="+", default=[8, 12])
    parser.add_argument("--plane", type=int, nargs="+", default=[196, 784, 3136])
    args = parser.parse_args()
    peak, _ = fma_peak_gflops()
    print(f"FMA peak {peak:.1f} GFLOP/s (one core); conv micro-kernel, {args.channels} channels:")
    for pixels in args.pixels:
        for plane in args.plane:
            g = tile_gflops(args.channels, pixels, plane)
            print(f"  {pixels:2d} pixels, plane {plane:5d} floats: {g:6.1f} GFLOP/s "
                  f"({g / peak:.0%} of peak)")


if __name__ == "__main__":
    main()
