"""Pre-packed dense GEMMs (+ bias) with the schedule's micro tile beside forced two-vector rows.

    nice -n 10 python benchmarks/experiments/gemm_tiles.py [--shapes 128x768x3072,...] [--rounds 41]

Each shape MxKxN is built twice in this process (the default GemmConfig, then one of two-vector
rows: 8x32 / 12x32 on AVX-512, where the default picks 8x48 when that pads N no more), the two kernels run on the same 64-byte aligned inputs in interleaved rounds
at one thread, and the medians (and minimums) of the calling thread's CPU time are printed
with GFLOP/s. Both outputs are checked against numpy first. Figures only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from codegen import cache, jit, te  # noqa: E402
from codegen.lower import lower  # noqa: E402
from codegen.schedules import GemmConfig, dense_pack_geometry, dense_packed  # noqa: E402
from codegen.schedules.gemm_config import resolve_gemm, rows_per_tile  # noqa: E402
from compiler.driver.build import current_options  # noqa: E402
from runtime import threadpool  # noqa: E402
from runtime.memory import aligned_empty  # noqa: E402

SHAPES = ["128x768x3072", "128x3072x768", "128x768x768", "128x768x2304", "32x784x512",
          "128x768x1000"]
F32 = np.dtype("float32")


def _aligned(a: np.ndarray) -> np.ndarray:
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def _pack(w: np.ndarray, nt: int, kp: int, nr: int) -> np.ndarray:
    """Bp[j, k, v] = w[j*nr + v, k], zero padded (dense_pack_geometry's layout)."""
    n, k = w.shape
    packed = aligned_empty((nt, kp, nr), F32)
    for j in range(nt):
        block = w[j * nr:(j + 1) * nr]
        packed[j, :k, :block.shape[0]] = block.T
    return packed


def build(m: int, k: int, n: int, two_vectors: bool, tag: str):
    """(kernel(x, wp, bias, out), packed-weight geometry) of dense_packed + bias."""
    options = current_options()
    vw = options.vector_width
    given = GemmConfig(tile_columns=2 * vw, tile_rows=rows_per_tile(m, True, vw)) \
        if two_vectors else None
    config = resolve_gemm(m, n, k, True, options, given, wide=True)
    nt, kp, nr = dense_pack_geometry(n, k, config)
    x, wp = te.placeholder((m, k), name="x"), te.placeholder((nt, kp, nr), name="wp")
    bias = te.placeholder((n,), name="bias")
    d = dense_packed(x, wp, n, options=options, config=config)
    y = te.compute((m, n), lambda i, j: d[i, j] + bias[j], name="bias_add")
    name = f"gemm_tiles_{tag}"
    with cache.disabled():
        lib = jit.build_library([lower(name, [x, wp, bias], [y])], options=options)
    return lib[name], (nt, kp, nr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated MxKxN")
    ap.add_argument("--rounds", type=int, default=41)
    args = ap.parse_args()
    threadpool.set_num_threads(1)
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        m, k, n = (int(d) for d in shape.split("x"))
        x = _aligned(rng.standard_normal((m, k)).astype(F32))
        w = rng.standard_normal((n, k)).astype(F32)
        bias = _aligned(rng.standard_normal(n).astype(F32))
        want = x.astype("f8") @ w.T.astype("f8") + bias
        runs = []
        for two in (False, True):
            kernel, geometry = build(m, k, n, two, f"{m}_{k}_{n}_{int(two)}")
            wp, out = _pack(w, *geometry), aligned_empty((m, n), F32)
            kernel(x, wp, bias, out)
            np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
            runs.append((kernel, wp, out, geometry[2]))
        start = time.thread_time()
        runs[0][0](x, runs[0][1], bias, runs[0][2])
        number = max(1, int(5e-3 / max(time.thread_time() - start, 1e-6)))
        times: list[list[float]] = [[], []]
        for _ in range(args.rounds):
            for i, (kernel, wp, out, _) in enumerate(runs):
                start = time.thread_time()
                for _ in range(number):
                    kernel(x, wp, bias, out)
                times[i].append((time.thread_time() - start) / number * 1e3)
        gflop = 2 * m * n * k / 1e9
        cells = []
        for (_, _, _, nr), t in zip(runs, times):
            med, best = float(np.median(t)), float(np.min(t))
            cells.append(f"NR={nr:2d} {med:7.3f} ms ({gflop / med * 1e3:4.0f} GFLOP/s, best "
                         f"{gflop / best * 1e3:4.0f})")
        ratio = float(np.median(times[0])) / float(np.median(times[1]))
        print(f"{shape:>14}: {cells[0]}   {cells[1]}   ratio {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
