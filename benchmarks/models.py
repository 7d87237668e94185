"""Model benchmark: build time and latency of relayjit beside onnxruntime, same input, same run.

    python benchmarks/models.py                  # the nine light models shipped with onnx
    python benchmarks/models.py model.onnx ...   # any other models (static shapes)
    python benchmarks/models.py --no-readme      # print only; by default the README table
                                                 # between the models-table markers is rewritten

Both run single-threaded (relayjit kernels are single-threaded; onnxruntime gets
intra_op_num_threads=1). relayjit builds under PassContext(opt_level=3), as TVM users and the
`relayjit` CLI do (FoldScaleAxis, AlterOpLayout: weights folded and packed at compile time).
Latency is the median of interleaved repeats.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OPT_LEVEL = 3
START, END = "<!-- models-table:start -->", "<!-- models-table:end -->"


def _median_ms(fn, repeat: int, number: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return float(np.median(times)) * 1e3


def bench_model(path: str, repeat: int, number: int) -> dict:
    import onnx
    import onnxruntime as ort

    import runtime
    from compiler import relay
    from compiler.model_zoo import dummy_inputs, reference_outputs
    from codegen import jit
    from compiler.transform import PassContext
    from runtime import graph_executor

    model = onnx.load(path)
    feeds = dummy_inputs(model)
    jit.clear_cache()  # a cold build: no in-memory or on-disk compiled kernels
    start = time.perf_counter()
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=OPT_LEVEL, config={"relayjit.disable_disk_cache": True}):
        factory = relay.build(mod, target="llvm", params=params)
    build_s = time.perf_counter() - start
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.set_input(**feeds)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    start = time.perf_counter()
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    ort_session_s = time.perf_counter() - start
    gmod.run()
    ours = gmod.get_output(0).numpy()
    theirs = session.run(None, feeds)[0]
    expected = reference_outputs(path)
    reference = expected[0] if expected else theirs
    ok = ours.shape == reference.shape and np.allclose(ours, reference, rtol=1e-3, atol=1e-5)
    ours_ms, ort_ms = [], []
    for _ in range(repeat):  # interleaved, so machine noise hits both alike
        ours_ms.append(_median_ms(gmod.run, 1, number))
        ort_ms.append(_median_ms(lambda: session.run(None, feeds), 1, number))
    stats = getattr(factory, "memory_stats", {}) or {}
    return {"model": os.path.basename(path).removesuffix(".onnx"), "build_s": build_s,
            "ort_session_s": ort_session_s,
            "ours_ms": float(np.median(ours_ms)), "ort_ms": float(np.median(ort_ms)),
            "match": ok, "peak_mb": stats.get("intermediate_bytes", 0) / 2**20}


def table(rows: list[dict]) -> str:
    lines = [f"relayjit built with PassContext(opt_level={OPT_LEVEL}), cold (no compile cache); "
             "both single-threaded; median of interleaved repeats", "",
             "| model | cold build (s) | ort session (s) | relayjit median (ms) | "
             "onnxruntime median (ms) | relayjit / ort | peak intermediate (MiB) | "
             "output matches |",
             "|---|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | - | - | - | - | - | - | error: {r['error']} |")
            continue
        lines.append(f"| {r['model']} | {r['build_s']:.1f} | {r['ort_session_s']:.2f} | "
                     f"{r['ours_ms']:.1f} | "
                     f"{r['ort_ms']:.1f} | {r['ours_ms'] / r['ort_ms']:.2f} | "
                     f"{r['peak_mb']:.1f} | {'yes' if r['match'] else 'NO'} |")
    return "\n".join(lines)


def write_readme(text: str) -> None:
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    if START not in readme or END not in readme:
        raise SystemExit(f"README.md has no {START} ... {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(f"{head}{START}\n{text}\n{END}{tail}")


def main() -> None:
    from compiler.model_zoo import LIGHT_MODELS, light_model_path
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="ONNX files (default: the light models)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=2)
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args()
    paths = args.models or [light_model_path(m) for m in LIGHT_MODELS]
    rows: list[dict] = []
    for path in paths:
        try:
            row = bench_model(path, args.repeat, args.number)
        except Exception as err:  # report and go on: one model must not hide the others
            row = {"model": os.path.basename(path), "error": f"{type(err).__name__}: {err}"[:120]}
        rows.append(row)
        if not rows[:-1]:
            print(table([]), flush=True)
        print(table([row]).splitlines()[-1], flush=True)
    text = table(rows)
    print()
    print(text)
    if not args.no_readme and not args.models:
        write_readme(text)
        print("\nREADME.md table updated")


if __name__ == "__main__":
    main()
