"""`relayjit bench model.onnx`: a model's latency, beside onnxruntime's on the same feeds."""
from __future__ import annotations

import json
import time

import numpy as np

import runtime
from runtime.vm import Executable, VirtualMachine
from .common import executor
from .prepare import prepare
from .options import (MODEL_HELP, apply_threads, build_options, input_option, json_option,
                      positive, threads_option, timing_option)


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="latency of a model, beside onnxruntime")
    p.add_argument("model", help=MODEL_HELP)
    input_option(p)
    p.add_argument("--repeat", type=positive, default=10,
                   help="measurements to take; each is the mean of --number runs (default: 10)")
    p.add_argument("--number", type=positive, default=3,
                   help="runs averaged per measurement (default: 3)")
    threads_option(p, "kernel threads, relayjit's and onnxruntime's alike")
    p.add_argument("--no-ort", action="store_true",
                   help="skip the onnxruntime reference figure")
    json_option(p, "model, threads, repeat, number, invented_inputs, relayjit_ms {median, "
                   "min, max}, onnxruntime_ms (same keys, or null)")
    timing_option(p)
    build_options(p)
    p.set_defaults(func=command)


def _ms(times: list[float]) -> dict:
    return {"median": float(np.median(times)), "min": min(times), "max": max(times)}


def _onnxruntime_ms(model, values, threads: int, repeat: int, number: int) -> list[float] | None:
    """onnxruntime's per-run ms on the same feeds, or None when it is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    time.sleep(0.1)  # let our pool's workers go idle before onnxruntime runs
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            session.run(None, values)
        times.append((time.perf_counter() - start) / number * 1e3)
    return times


def _timing_text(prepared, path: str) -> str:
    if not prepared.compiled:
        return f"no build timing: {path} is a compiled module (nothing was built)"
    if isinstance(prepared.module, Executable):
        return "no build timing: the model was compiled for the Relay VM (control flow)"
    return prepared.module.build_timing.table()


def command(args) -> int:
    threads = apply_threads(args)
    prepared = prepare(args)
    module, model, values = prepared.module, prepared.model, prepared.feeds
    if args.timing and not args.json:
        print(_timing_text(prepared, args.model))
    if isinstance(module, Executable):
        result = VirtualMachine(module, runtime.cpu()).benchmark(
            runtime.cpu(), repeat=args.repeat, number=args.number, **values)
    else:
        result = executor(module).benchmark(runtime.cpu(), repeat=args.repeat,
                                            number=args.number, **values)
    ms = [t * 1e3 for t in result.results]
    ort_ms = None
    if model is not None and not args.no_ort:
        ort_ms = _onnxruntime_ms(model, values, threads, args.repeat, args.number)
    if args.json:
        print(json.dumps({"model": args.model, "threads": threads, "repeat": args.repeat,
                          "number": args.number, "invented_inputs": prepared.invented,
                          "relayjit_ms": _ms(ms),
                          "onnxruntime_ms": _ms(ort_ms) if ort_ms else None}))
        return 0
    print(f"relayjit    median {np.median(ms):8.3f} ms  min {min(ms):8.3f}  max {max(ms):8.3f}"
          f"  ({args.repeat} x {args.number} runs, {threads} thread(s))")
    if model is not None and not args.no_ort:
        if ort_ms is None:
            print("onnxruntime is not installed: no reference figure")
        else:
            print(f"onnxruntime median {np.median(ort_ms):8.3f} ms  min {min(ort_ms):8.3f}"
                  f"  max {max(ort_ms):8.3f}  ratio relayjit/ort "
                  f"{np.median(ms) / np.median(ort_ms):.2f}")
    return 0
