"""`relayjit profile model.onnx`: time every fused kernel (slowest first), optionally as a
Chrome/Perfetto trace. A model with control flow runs on the Relay VM: its rows are kernels
at each set of argument shapes, their calls in one invoke summed (runtime.vm.profiler)."""
from __future__ import annotations

import json

import runtime
from runtime import debug_executor
from runtime.vm import Executable, VirtualMachineProfiler
from .common import CliError, check_writable
from .prepare import prepare
from .options import (MODEL_HELP, apply_threads, build_options, input_option, json_option,
                      positive, threads_option)


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="time every fused kernel of a model (slowest first)")
    p.add_argument("model", help=MODEL_HELP)
    input_option(p)
    p.add_argument("--repeat", type=positive, default=10,
                   help="timing rounds; a node's time is its median over rounds (default: 10)")
    p.add_argument("--number", type=positive,
                   help="calls of each kernel per round (default: enough for ~20 ms rounds)")
    p.add_argument("--top", type=positive, metavar="N", help="show only the N slowest nodes")
    p.add_argument("--trace", metavar="FILE.json",
                   help="also write a Chrome/Perfetto trace (traceEvents, one per node)")
    threads_option(p, "kernel threads")
    json_option(p, "model, threads, invented_inputs, trace, nodes [{name, kernel, ops, "
                   "input_shapes, output_shapes, median_ms, min_ms, max_ms, share, flops, "
                   "gflops_per_s, bytes, gbytes_per_s}], total_ms, whole_run_ms, repeat, "
                   "number")
    build_options(p)
    p.set_defaults(func=command)


def command(args) -> int:
    threads = apply_threads(args)
    if args.trace:
        check_writable(args.trace, "--trace")
    prepared = prepare(args)
    if isinstance(prepared.module, Executable):  # control flow: each kernel at each shape
        if args.number is not None:
            raise CliError("--number: a VM program's kernels are timed over whole invokes "
                           "(--repeat of them), not called on their own")
        vm = VirtualMachineProfiler(prepared.module, runtime.cpu())
        report = vm.profile(repeat=args.repeat, **prepared.feeds)
    else:
        gmod = debug_executor.GraphModuleDebug(prepared.module["default"](runtime.cpu()))
        report = gmod.profile(repeat=args.repeat, number=args.number, **prepared.feeds)
    if args.trace:
        with open(args.trace, "w") as f:
            json.dump(report.chrome_trace(), f)
    if args.json:
        print(json.dumps({"model": args.model, "threads": threads,
                          "invented_inputs": prepared.invented,
                          "trace": args.trace, **report.as_dict()}))
        return 0
    print(report.table(top=args.top))
    if args.trace:
        print(f"trace -> {args.trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0
