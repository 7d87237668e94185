"""`relayjit run model.rjit|model.onnx`: run a model once and save its outputs."""
from __future__ import annotations

import json
import os
import time

import numpy as np

from runtime.specialised import make_runner
from .common import check_writable, stats, summary
from .prepare import prepare
from .options import (MODEL_HELP, apply_threads, build_options, input_option, json_option,
                      positive, threads_option)


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a .rjit or .onnx model once")
    p.add_argument("model", help=MODEL_HELP)
    input_option(p)
    p.add_argument("--output", help="where outputs go: a FILE.npz (every output, by name) or a "
                                    "prefix for PREFIX_0.npy, PREFIX_1.npy, ... (default: "
                                    "<model>_output)")
    p.add_argument("--top-k", type=positive, metavar="K",
                   help="also print each output's K largest values and their indices per batch "
                        "row (for classifiers)")
    json_option(p, "model, invented_inputs, outputs [{name, shape, dtype, min, max, mean, "
                   "file, top_k}], run_ms")
    threads_option(p, "kernel threads")
    build_options(p)
    p.set_defaults(func=command)


def _top_k(array: np.ndarray, k: int) -> list[list[list]]:
    """Per batch row (axis 0; the rest flattened): the k largest [class index, score]."""
    rows = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(1, -1)
    best = np.argsort(-rows, axis=1, kind="stable")[:, :k]
    return [[[int(i), float(row[i])] for i in idx] for row, idx in zip(rows, best)]


def command(args) -> int:
    apply_threads(args)
    npz = bool(args.output) and args.output.endswith(".npz")
    if args.output:
        check_writable(args.output if npz else f"{args.output}_0.npy", "--output")
    prepared = prepare(args)
    runner = make_runner(prepared.module)
    names, arrays = list(prepared.feeds), list(prepared.feeds.values())
    start = time.perf_counter()
    results = runner.run(names, arrays)
    elapsed = time.perf_counter() - start
    stem = args.output or os.path.splitext(os.path.basename(args.model))[0] + "_output"
    labels = prepared.output_names if len(prepared.output_names) == len(results) else \
        [f"output_{i}" for i in range(len(results))]
    outputs = dict(zip(labels, results))
    if npz:
        np.savez(args.output, **outputs)
    report = []
    for i, (name, out) in enumerate(outputs.items()):
        path = args.output if npz else f"{stem}_{i}.npy"
        if not npz:
            np.save(path, out)
        entry = {"name": name, **stats(out), "file": path}
        if args.top_k:
            entry["top_k"] = _top_k(out, args.top_k)
        report.append(entry)
    if args.json:
        print(json.dumps({"model": args.model, "invented_inputs": prepared.invented,
                          "outputs": report, "run_ms": elapsed * 1e3}))
        return 0
    for i, (entry, out) in enumerate(zip(report, outputs.values())):
        label = f"output {i}" + (f" ({entry['name']})" if entry["name"] != f"output_{i}" else "")
        print(f"{summary(label, out)} -> {entry['file']}")
        for row, best in enumerate(entry.get("top_k", [])):
            ranked = ", ".join(f"{i} ({score:.4g})" for i, score in best)
            print(f"  top-{args.top_k}{f' [row {row}]' if len(entry['top_k']) > 1 else ''}: "
                  f"{ranked}")
    print(f"ran in {elapsed * 1e3:.2f} ms")
    return 0
