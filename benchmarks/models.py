"""Model benchmark: build time and latency of relayjit beside onnxruntime, same input, same run.

    python benchmarks/models.py                  # the nine light models shipped with onnx
    python benchmarks/models.py model.onnx ...   # any other models (static shapes)
    python benchmarks/models.py --generated      # the models benchmarks/generated_models.py
                                                 # builds (transformer, decoder, MobileNet-v2,
                                                 # UNet, LSTM/GRU, MLP); or name them: gen_lstm
    python benchmarks/models.py --quantized      # int8 models quantized by onnxruntime's tools
                                                 # (QDQ and QOperator ResNet-18-style CNN,
                                                 # dynamically quantized BERT-style encoder):
                                                 # relayjit int8 beside onnxruntime int8 and
                                                 # beside relayjit's float32 build of the same
                                                 # network
    python benchmarks/models.py --threads 1,2    # thread counts to measure (default 1,2)
    python benchmarks/models.py --opt-level 2    # relayjit at TVM's default level
    python benchmarks/models.py --no-readme      # print only; by default the README table
                                                 # between the models-table markers is rewritten
    python benchmarks/models.py --dynamic        # models with dynamic axes through
                                                 # compiler.load at several shapes each

At each thread count N, relayjit runs its kernels on N threads and onnxruntime gets
intra_op_num_threads=N. relayjit builds under PassContext(opt_level=3), as TVM users and the
`relayjit` CLI do (FoldScaleAxis, AlterOpLayout: weights folded and packed at compile time).
Latency is the median of interleaved rounds; between the two engines the process idles for a
moment so neither runs against the other's thread pool still spinning.

Outputs are checked against the model's stored reference when it has one (the light models,
rtol 1e-3 / atol 1e-5), else against onnxruntime's outputs, all of them (generated models are
fed their seeded random inputs and compared with rtol 1e-3 / atol 1e-4). A quantized model's
outputs must equal onnxruntime's where they are integers and be within one quantization step
where they are dequantized (the final DequantizeLinear's scale; 1e-4 for float outputs).

--dynamic runs generated_models.DYNAMIC_MODELS (a BERT-style encoder with dynamic batch and
sequence, a MobileNet-v2 with dynamic batch) through one compiler.load session each, beside
one onnxruntime session per thread count: first the first call at every shape (relayjit
compiles the shape then, with empty compile and build caches: a fresh RELAYJIT_CACHE_DIR),
then steady-state latency at each shape in interleaved rounds, every output checked against
onnxruntime (rtol 1e-3 / atol 1e-4). With every model (none named) the README table
between the dynamic-table markers is rewritten.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OPT_LEVEL = 3
START, END = "<!-- models-table:start -->", "<!-- models-table:end -->"
DYNAMIC_START, DYNAMIC_END = "<!-- dynamic-table:start -->", "<!-- dynamic-table:end -->"


def _median_ms(fn, repeat: int, number: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return float(np.median(times)) * 1e3


SETTLE_S = 0.1


def bench_model(path: str, repeat: int, number: int, threads: list[int],
                feeds: dict[str, np.ndarray] | None = None, atol: float = 1e-5) -> dict:
    import onnx

    from compiler.tools.model_zoo import dummy_inputs, reference_outputs

    model = onnx.load(path)
    feeds = dummy_inputs(model) if feeds is None else feeds
    gmod, build_s = _relayjit(model)  # a cold build: no in-memory or on-disk kernels
    gmod.set_input(**feeds)
    start = time.perf_counter()
    sessions = {n: _session(model, n) for n in threads}
    ort_session_s = (time.perf_counter() - start) / len(threads)
    gmod.run()
    expected = reference_outputs(path) or sessions[threads[0]].run(None, feeds)
    ours = [gmod.get_output(i).numpy() for i in range(len(expected))]
    ok = gmod.get_num_outputs() == len(expected) and all(
        o.shape == e.shape and np.allclose(o, e, rtol=1e-3, atol=atol)
        for o, e in zip(ours, expected))
    row = {"model": os.path.basename(path).removesuffix(".onnx"), "build_s": build_s,
           "ort_session_s": ort_session_s, "match": ok}
    for n in threads:
        ours_ms, ort_ms = [], []
        for _ in range(repeat):  # interleaved, so machine noise hits both alike
            ours_ms.append(_timed(gmod.run, number, n))
            ort_ms.append(_timed(lambda: sessions[n].run(None, feeds), number, n))
        row[f"ours_ms_{n}"] = float(np.median(ours_ms))
        row[f"ort_ms_{n}"] = float(np.median(ort_ms))
    stats = getattr(gmod, "memory_stats", {}) or {}
    row["peak_mb"] = stats.get("intermediate_bytes", 0) / 2**20
    return row


def _timed(fn, number: int, threads: int) -> float:
    """ms per call of fn at `threads` relayjit threads: settle, warm up, then `number` timed
    calls (more for a fast model, so a round lasts at least MIN_ROUND_S).

    Warm-up runs for WARMUP_S, not one call: on this VM the cores take several milliseconds
    of work after an idle pause to reach full speed (a 1 ms model runs 2-4x slower for its
    first calls), which would otherwise decide the figure for small models."""
    from runtime import threadpool

    threadpool.set_num_threads(threads)
    time.sleep(SETTLE_S)
    start, calls = time.perf_counter(), 0
    while calls == 0 or time.perf_counter() - start < WARMUP_S:
        fn()
        calls += 1
    per_call = (time.perf_counter() - start) / calls
    return _median_ms(fn, 1, max(number, int(MIN_ROUND_S / per_call)))


WARMUP_S = 0.03
MIN_ROUND_S = 0.02


def _ms(value: float) -> str:
    """Three significant figures down to microseconds (tiny models run in 0.05 ms)."""
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def table(rows: list[dict], threads: list[int]) -> str:
    per_n = " | ".join(f"relayjit {n} thr (ms) | ort {n} thr (ms) | relayjit / ort ({n} thr)"
                       for n in threads)
    speedup = f" | relayjit {threads[0]}->{threads[-1]} thr speed-up" if len(threads) > 1 else ""
    lines = [f"relayjit built with PassContext(opt_level={OPT_LEVEL}), cold (no compile cache); "
             "at N threads both engines get N threads; median of interleaved repeats", "",
             f"| model | cold build (s) | ort session (s) | {per_n}{speedup} | "
             "peak intermediate (MiB) | output matches |",
             "|---|---:|---:|" + "---:|---:|---:|" * len(threads) + ("---:|" if speedup else "")
             + "---:|:---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |")
            continue
        cells = [r["model"], f"{r['build_s']:.1f}", f"{r['ort_session_s']:.2f}"]
        for n in threads:
            ours, ort_ms = r[f"ours_ms_{n}"], r[f"ort_ms_{n}"]
            cells += [_ms(ours), _ms(ort_ms), f"{ours / ort_ms:.2f}"]
        if speedup:
            cells.append(f"{r[f'ours_ms_{threads[0]}'] / r[f'ours_ms_{threads[-1]}']:.2f}x")
        cells += [f"{r['peak_mb']:.1f}", "yes" if r["match"] else "NO"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _session(model, threads: int):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _relayjit(model):
    """(graph module, cold build seconds) of an ONNX model at OPT_LEVEL."""
    import runtime
    from codegen import jit
    from compiler import relay
    from compiler.transform import PassContext
    from runtime import graph_executor
    jit.clear_cache()
    start = time.perf_counter()
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=OPT_LEVEL, config={"relayjit.disable_disk_cache": True}):
        factory = relay.build(mod, target="llvm", params=params)
    module = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    module.memory_stats = getattr(factory, "memory_stats", {})
    return module, time.perf_counter() - start


def _output_steps(model) -> list:
    """Per graph output: the scale of the DequantizeLinear producing it (None otherwise)."""
    from onnx import numpy_helper
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producers = {out: node for node in model.graph.node for out in node.output}
    steps = []
    for output in model.graph.output:
        node = producers.get(output.name)
        while node is not None and node.op_type == "Identity":
            node = producers.get(node.input[0])
        scale = consts.get(node.input[1]) if node is not None and \
            node.op_type == "DequantizeLinear" else None
        steps.append(None if scale is None else float(np.max(scale)))
    return steps


def _quantized_match(model, ours: list, want: list) -> bool:
    for o, w, step in zip(ours, want, _output_steps(model)):
        if o.shape != w.shape or o.dtype != w.dtype:
            return False
        if o.dtype.kind in "iu":
            ok = np.array_equal(o, w)
        else:
            ok = np.allclose(o, w, rtol=0, atol=1.0001 * step) if step else \
                np.allclose(o, w, rtol=1e-3, atol=1e-4)
        if not ok:
            return False
    return True


def bench_quantized(name: str, repeat: int, number: int, threads: list[int]) -> dict:
    """relayjit int8 beside onnxruntime int8 and relayjit float32 of the same network."""
    from benchmarks.generated_models import GENERATED_MODELS, QUANTIZED_MODELS
    builder, float_name = QUANTIZED_MODELS[name]
    model, feeds = builder()
    float_model, _ = GENERATED_MODELS[float_name]()
    int8, build_s = _relayjit(model)
    fp32, _ = _relayjit(float_model)
    for module in (int8, fp32):
        module.set_input(**feeds)
    sessions = {n: _session(model, n) for n in threads}
    int8.run()
    want = sessions[threads[0]].run(None, feeds)
    ours = [int8.get_output(i).numpy() for i in range(len(want))]
    row = {"model": name, "build_s": build_s, "match": _quantized_match(model, ours, want)}
    for n in threads:
        times: dict = {"ours": [], "ort": [], "fp32": []}
        for _ in range(repeat):
            times["ours"].append(_timed(int8.run, number, n))
            times["ort"].append(_timed(lambda: sessions[n].run(None, feeds), number, n))
            times["fp32"].append(_timed(fp32.run, number, n))
        for key, values in times.items():
            row[f"{key}_ms_{n}"] = float(np.median(values))
    return row


def quantized_table(rows: list[dict], threads: list[int]) -> str:
    per_n = " | ".join(f"relayjit int8 {n} thr (ms) | ort int8 {n} thr (ms) | relayjit / ort "
                       f"({n} thr) | relayjit fp32 {n} thr (ms) | int8 speed-up over fp32 "
                       f"({n} thr)" for n in threads)
    lines = [f"relayjit built with PassContext(opt_level={OPT_LEVEL}), cold; both engines at N "
             "threads; median of interleaved repeats", "",
             f"| model | cold build (s) | {per_n} | output matches |",
             "|---|---:|" + "---:|" * 5 * len(threads) + ":---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |")
            continue
        cells = [r["model"], f"{r['build_s']:.1f}"]
        for n in threads:
            ours, ort_ms, fp32 = r[f"ours_ms_{n}"], r[f"ort_ms_{n}"], r[f"fp32_ms_{n}"]
            cells += [_ms(ours), _ms(ort_ms), f"{ours / ort_ms:.2f}", _ms(fp32),
                      f"{fp32 / ours:.2f}x"]
        cells.append("yes" if r["match"] else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_readme(text: str, start: str = START, end: str = END) -> None:
    """Put text between README.md's start and end markers."""
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    if start not in readme or end not in readme:
        raise SystemExit(f"README.md has no {start} ... {end} markers")
    head, rest = readme.split(start, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(f"{head}{start}\n{text}\n{end}{tail}")


def main() -> None:
    from compiler.tools.model_zoo import LIGHT_MODELS, light_model_path
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="ONNX files or generated model names "
                        "(default: the light models)")
    parser.add_argument("--generated", action="store_true",
                        help="benchmark the models of benchmarks/generated_models.py")
    parser.add_argument("--quantized", action="store_true",
                        help="benchmark the int8 models of benchmarks/generated_models.py "
                             "(QUANTIZED_MODELS; needs onnxruntime's quantization tools)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=2)
    parser.add_argument("--threads", default="1,2",
                        help="comma-separated thread counts (both engines), default 1,2")
    parser.add_argument("--no-readme", action="store_true")
    parser.add_argument("--opt-level", type=int, default=3, choices=range(4),
                        help="relayjit's PassContext opt_level (default 3; TVM's default is 2)")
    parser.add_argument("--dynamic", action="store_true",
                        help="benchmark the models with dynamic axes (generated_models."
                             "DYNAMIC_MODELS, or those named) at each of their shapes")
    args = parser.parse_args()
    global OPT_LEVEL
    OPT_LEVEL = args.opt_level
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads must be comma-separated integers, got {args.threads!r}")
    if args.dynamic:
        text = bench_dynamic(args.models, args.repeat, args.number, threads)
        if not args.no_readme and not args.models:
            write_readme(text, DYNAMIC_START, DYNAMIC_END)
            print("\nREADME.md dynamic-models table updated")
        return
    if args.quantized:
        return _main_quantized(args, threads)
    from benchmarks.generated_models import GENERATED_MODELS, write_models
    generated = [m for m in args.models if m in GENERATED_MODELS and not os.path.exists(m)]
    if args.generated:
        generated += [m for m in GENERATED_MODELS if m not in generated]
    paths = [m for m in args.models if m not in generated]
    if not paths and not generated:
        paths = [light_model_path(m) for m in LIGHT_MODELS]
    with tempfile.TemporaryDirectory(prefix="relayjit-generated-") as tmp:
        jobs = [(path, None, 1e-5) for path in paths]
        if generated:  # written out, so they load by path like any other model
            jobs += [(path, _generated_feeds(tmp, name), 1e-4)
                     for name, path in write_models(tmp, generated).items()]
        rows = _bench_all(jobs, args, threads)
    text = table(rows, threads)
    print()
    print(text)
    if not args.no_readme and not args.models and not args.generated:
        write_readme(text)
        print("\nREADME.md table updated")


def _main_quantized(args, threads: list[int]) -> None:
    import logging
    from benchmarks.generated_models import QUANTIZED_MODELS
    logging.disable(logging.WARNING)  # the quantizer's advice to pre-process
    rows = []
    for name in args.models or QUANTIZED_MODELS:
        try:
            rows.append(bench_quantized(name, args.repeat, args.number, threads))
        except Exception as err:  # report and go on
            rows.append({"model": name, "error": f"{type(err).__name__}: {err}"[:120]})
        print(quantized_table(rows[-1:], threads).splitlines()[-1], flush=True)
    print()
    print(quantized_table(rows, threads))


def _generated_feeds(directory: str, name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(directory, f"{name}_inputs.npz")) as data:
        return dict(data)


def _bench_all(jobs: list, args, threads: list[int]) -> list[dict]:
    rows: list[dict] = []
    for path, feeds, atol in jobs:
        try:
            row = bench_model(path, args.repeat, args.number, threads, feeds, atol)
        except Exception as err:  # report and go on: one model must not hide the others
            row = {"model": os.path.basename(path), "error": f"{type(err).__name__}: {err}"[:120]}
        rows.append(row)
        if not rows[:-1]:
            print(table([], threads), flush=True)
        print(table([row], threads).splitlines()[-1], flush=True)
    return rows


def bench_dynamic(names: list[str], repeat: int, number: int, threads: list[int]) -> str:
    """--dynamic: each model's first call and steady latency at each of its shapes, beside
    onnxruntime (see the module docstring); prints one table and returns it."""
    import onnx
    from benchmarks.generated_models import DYNAMIC_MODELS
    from codegen import jit
    unknown = [n for n in names if n not in DYNAMIC_MODELS]
    if unknown:
        raise SystemExit(f"unknown dynamic model(s) {unknown}; known: {list(DYNAMIC_MODELS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="relayjit-dynamic-") as tmp:
        os.environ["RELAYJIT_CACHE_DIR"] = os.path.join(tmp, "cache")  # cold: nothing cached
        jit.clear_cache()
        for name in names or DYNAMIC_MODELS:
            build, feeds_for, shapes = DYNAMIC_MODELS[name]
            path = os.path.join(tmp, f"{name}.onnx")
            onnx.save(build(), path)
            rows += _bench_shapes(name, path, [(s, feeds_for(**s)) for s in shapes], repeat,
                                  number, threads)
    text = dynamic_table(rows, threads)
    print()
    print(text)
    return text


def _bench_shapes(name: str, path: str, cases: list, repeat: int, number: int,
                  threads: list[int]) -> list[dict]:
    import compiler
    import onnxruntime as ort
    from runtime import threadpool

    def session(n: int):
        options = ort.SessionOptions()
        options.intra_op_num_threads = n
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    sessions = {n: session(n) for n in threads}
    ours = compiler.load(path)
    rows = []
    for shape, feeds in cases:  # first calls: relayjit compiles each shape now
        threadpool.set_num_threads(max(threads))
        time.sleep(SETTLE_S)
        start = time.perf_counter()
        got = ours.run(None, feeds)
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        expected = sessions[max(threads)].run(None, feeds)
        ort_first_ms = (time.perf_counter() - start) * 1e3
        match = len(got) == len(expected) and all(
            g.shape == e.shape and np.allclose(g, e, rtol=1e-3, atol=1e-4)
            for g, e in zip(got, expected))
        rows.append({"model": name, "shape": shape, "first_s": first_s,
                     "ort_first_ms": ort_first_ms, "match": match})
        print(f"{name} {shape}: first call {first_s:.2f} s (onnxruntime {ort_first_ms:.1f} ms),"
              f" outputs {'match' if match else 'DIFFER'}", flush=True)
    for row, (_, feeds) in zip(rows, cases):  # steady state, interleaved
        for n in threads:
            ours_ms, ort_ms = [], []
            for _ in range(repeat):
                ours_ms.append(_timed(lambda: ours.run(None, feeds), number, n))
                ort_ms.append(_timed(lambda: sessions[n].run(None, feeds), number, n))
            row[f"ours_ms_{n}"] = float(np.median(ours_ms))
            row[f"ort_ms_{n}"] = float(np.median(ort_ms))
        print(dynamic_table([row], threads).splitlines()[-1], flush=True)
    if ours.model.builds != len(cases):
        raise SystemExit(f"{name}: {ours.model.builds} builds for {len(cases)} shapes")
    return rows


def dynamic_table(rows: list[dict], threads: list[int]) -> str:
    per_n = " | ".join(f"relayjit {n} thr (ms) | ort {n} thr (ms) | relayjit / ort ({n} thr)"
                       for n in threads)
    lines = [f"| model | shape | first call (s) | ort first call (ms) | {per_n} | "
             "output matches |",
             "|---|---|---:|---:|" + "---:|---:|---:|" * len(threads) + ":---:|"]
    for r in rows:
        shape = ", ".join(f"{k} {v}" for k, v in r["shape"].items())
        cells = [r["model"], shape, f"{r['first_s']:.2f}", f"{r['ort_first_ms']:.1f}"]
        for n in threads:
            ours, ort_ms = r.get(f"ours_ms_{n}"), r.get(f"ort_ms_{n}")
            cells += [_ms(ours), _ms(ort_ms), f"{ours / ort_ms:.2f}"] if ours else ["", "", ""]
        cells.append("yes" if r["match"] else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
