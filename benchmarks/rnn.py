"""ONNX LSTM and GRU layers: relayjit beside onnxruntime in the same run, at 1 and 2 threads.

    python benchmarks/rnn.py                       # LSTM and GRU, sequence 32 and 128,
                                                   # hidden 128 and 512, forward and
                                                   # bidirectional, batch 1
    python benchmarks/rnn.py --kinds GRU --seqs 32 --hiddens 128 --dirs forward
    python benchmarks/rnn.py --threads 1           # thread counts (default 1,2)
    python benchmarks/rnn.py --rounds 9            # interleaved rounds (median)

Each layer is benchmarks/generated_models.recurrent (input size = hidden, biases, initial
states as inputs; GRU with linear_before_reset=1 as torch exports it). relayjit builds it at
opt_level 3 with no disk cache (one kernel a direction looping over time) for each thread
count with the pool set to it (a build is for the threads it runs on: how a step's product
splits and walks the weight); the outputs are checked against onnxruntime (rtol 1e-3, atol
1e-4) before timing. Times are medians of
interleaved rounds, the two engines alternating so machine noise hits both alike: at 1 thread
the calling thread's CPU time (both engines compute on it; a shared machine's descheduling
does not count), at more threads wall time (benchmarks/models.py's _timed: warm-up, then
calls for at least 20 ms).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.generated_models import recurrent  # noqa: E402
from benchmarks.model_cpu_time import interleaved_medians  # noqa: E402
from benchmarks.models import _relayjit, _session, _timed  # noqa: E402
from runtime import threadpool  # noqa: E402


def bench(kind: str, seq: int, hidden: int, direction: str, threads: list[int],
          rounds: int) -> dict:
    model, feeds = recurrent(kind, seq=seq, input_size=hidden, hidden=hidden,
                             direction=direction)
    row = {"layer": f"{kind} T={seq} H={hidden} {direction}", "match": True}
    for n in threads:
        threadpool.set_num_threads(n)  # the build is for the threads it runs on
        gmod, row["build_s"] = _relayjit(model)
        gmod.set_input(**feeds)
        gmod.run()
        session = _session(model, n)
        want = session.run(None, feeds)
        row["match"] &= all(np.allclose(gmod.get_output(i).numpy(), w, rtol=1e-3, atol=1e-4)
                            for i, w in enumerate(want))
        ort_run = lambda s=session: s.run(None, feeds)  # noqa: E731
        if n == 1:
            cpu = interleaved_medians({"ours": gmod.run, "ort": ort_run}, rounds)
            row[n] = (cpu["ours"], cpu["ort"])
            continue
        ours, ort = [], []
        for _ in range(rounds):
            ours.append(_timed(gmod.run, 3, n))
            ort.append(_timed(ort_run, 3, n))
        row[n] = (float(np.median(ours)), float(np.median(ort)))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="LSTM,GRU")
    parser.add_argument("--seqs", default="32,128")
    parser.add_argument("--hiddens", default="128,512")
    parser.add_argument("--dirs", default="forward,bidirectional")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    head = " | ".join(f"relayjit {n} thr (ms) | ort {n} thr (ms) | ratio {n} thr"
                      for n in threads)
    print(f"| layer | build (s) | {head} | matches |")
    print("|---|---:|" + "---:|---:|---:|" * len(threads) + ":---:|")
    for kind in args.kinds.split(","):
        for seq in (int(s) for s in args.seqs.split(",")):
            for hidden in (int(h) for h in args.hiddens.split(",")):
                for direction in args.dirs.split(","):
                    row = bench(kind, seq, hidden, direction, threads, args.rounds)
                    cells = [row["layer"], f"{row['build_s']:.1f}"]
                    for n in threads:
                        ours, ort = row[n]
                        cells += [f"{ours:.3g}", f"{ort:.3g}", f"{ours / ort:.2f}"]
                    cells.append("yes" if row["match"] else "NO")
                    print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
