"""Compile-time benchmark: cold and warm builds of the light models, split by stage.

    nice python benchmarks/compile_time.py                     # the nine light models
    nice python benchmarks/compile_time.py resnet50 densenet121 --detail   # + full tables
    nice python benchmarks/compile_time.py resnet50 densenet121 --jobs 1,2,auto --repeat 5
    nice python benchmarks/compile_time.py densenet121 --jobs 1,auto --families 0,1 --repeat 3
    nice python benchmarks/compile_time.py --scaling           # Python passes vs graph size

Each build runs in a fresh process, as a user's first build does (imports not counted):
"cold" on an empty compile cache directory (RELAYJIT_CACHE_DIR), at opt_level 3, then "warm"
in a second fresh process on the cache the first one filled. `frontend` is the ONNX import,
`cold` and `warm` relay.build's wall time, `cpu` the cold build's CPU time (its process and
forked compile jobs: the figure to compare on a busy machine, where wall time mostly says how
busy it was); the stage columns split the cold build (`passes` without
FoldConstant, `fold` FoldConstant with the kernels it compiles, `emit`/`opt`/`mc` LLVM IR
emission, the optimisation pipeline and machine-code emission, `llvm+` the other compile
stages: digest, parse, jobs, link, cache, load; with several compile jobs these are the
parent's share). `jobs` is RELAYJIT_COMPILE_JOBS as resolved in that build. --jobs runs each
model under each listed RELAYJIT_COMPILE_JOBS value, --repeat N rounds of them interleaved
(model by model, the settings in turn): each row is then the median of N, `jobs` lists what
each run resolved to. --families 0,1 does the same for RELAYJIT_KERNEL_FAMILIES (kernels that
differ only in an extent compiled as one body, codegen.kernel_families: off, on), crossed
with --jobs. Figures only: nothing is asserted. The machine is shared and noisy;
run it with `nice` and compare medians of several runs, never one. The build and kernel caches
are keyed by the compiler's own source: while others commit to the checkout, a warm build may
find nothing and rebuild; run a snapshot (`git archive HEAD | tar -x -C DIR`, then
DIR/benchmarks/compile_time.py) for figures that hold still.

--scaling builds a generated chain of N blocks (an elementwise op on the activation plus a
constant sub-expression FoldConstant folds, a residual connection every 8 blocks) and prints the
seconds of InferType, FoldConstant, FuseOps, lowering and memory planning per N: each should
grow linearly with the graph.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OPT_LEVEL = 3
LLVM_STAGES = {"emit": "LLVM IR emission", "opt": "LLVM optimisation pipeline",
               "mc": "machine-code emission"}
OTHER_LLVM = ("kernel set digest", "compile cache lookup", "LLVM IR parse + verify",
              "compile jobs: fork + wait", "link micro-kernels + table", "compile cache write",
              "kernel loading (MCJIT)")


def build_once(name: str) -> dict:
    """Import and build one light model in this process: its timing report as plain data."""
    import onnx

    from compiler import relay
    from compiler.tools.model_zoo import light_model_path
    from compiler.transform import PassContext

    model = onnx.load(light_model_path(name))
    start = time.perf_counter()
    mod, params = relay.frontend.from_onnx(model)
    frontend = time.perf_counter() - start
    before = _cpu_seconds()
    with PassContext(opt_level=OPT_LEVEL):
        factory = relay.build(mod, params=params)
    cpu = _cpu_seconds() - before
    timing = factory.build_timing
    return {**timing.as_dict(), "frontend": frontend, "cpu": cpu,
            "table": timing.table().replace("relay.build timing", f"{name} (frontend "
                                            f"{frontend:.3f} s not in the table)")}


def _cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (the forked compile jobs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def build_in_subprocess(name: str, cache_dir: str, settings: dict[str, str] | None = None
                        ) -> dict:
    env = dict(os.environ, RELAYJIT_CACHE_DIR=cache_dir, **(settings or {}))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name],
                          env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building {name} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.splitlines()[-1])


def stage_split(report: dict) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for stage in report["stages"]:
        seconds[stage["name"]] = seconds.get(stage["name"], 0.0) + stage["seconds"]
    passes = sum(s for n, s in seconds.items() if n.startswith("pass "))
    split = {"passes": passes - seconds.get("pass FoldConstant", 0.0),
             "fold": seconds.get("pass FoldConstant", 0.0),
             "lower": seconds.get("lower fused functions to PrimFuncs", 0.0)}
    split.update({key: seconds.get(name, 0.0) for key, name in LLVM_STAGES.items()})
    split["llvm+"] = sum(seconds.get(name, 0.0) for name in OTHER_LLVM)
    return split


def model_table(names: list[str], detail: bool, settings: list[dict[str, str]],
                repeat: int) -> None:
    from compiler.tools.model_zoo import LIGHT_MODELS

    names = names or list(LIGHT_MODELS)
    width = max([14] + [len(name) + len(_label(s)) + 1 for name in names or ["x"]
                         for s in settings])
    head = (f"{'model':<{width}} {'frontend':>8} {'cold':>6} {'cpu':>6} {'warm':>6} {'kernels':>7} {'jobs':>6}"
            f" | {'passes':>6} {'fold':>6} {'lower':>6} {'emit':>6} {'opt':>6} {'mc':>6}"
            f" {'llvm+':>6}")
    print(f"relay.build seconds, opt_level {OPT_LEVEL}, one process each "
          f"(cold: empty compile cache; warm: the cache the cold build filled)"
          + (f"; medians of {repeat} interleaved rounds" if repeat > 1 else ""))
    print(head)
    print("-" * len(head))
    tables = []
    for name in names:
        runs: list[list[tuple[dict, dict]]] = [[] for _ in settings]
        for _ in range(repeat):
            for k, setting in enumerate(settings):
                with tempfile.TemporaryDirectory(prefix="relayjit-compile-time-") as cache:
                    cold = build_in_subprocess(name, cache, setting)
                    warm = build_in_subprocess(name, cache, setting)
                runs[k].append((cold, warm))
        for k, setting in enumerate(settings):
            colds = [cold for cold, _ in runs[k]]
            splits = [stage_split(cold) for cold in colds]
            resolved = ",".join(str(c["counts"].get("compile_jobs", 1)) for c in colds)
            label = f"{name} {_label(setting)}".strip()
            print(f"{label:<{width}} {_median(c['frontend'] for c in colds):>8.2f} "
                  f"{_median(c['wall'] for c in colds):>6.2f} "
                  f"{_median(c['cpu'] for c in colds):>6.2f} "
                  f"{_median(w['wall'] for _, w in runs[k]):>6.2f} "
                  f"{colds[0]['counts'].get('kernels', 0):>7} {resolved:>6} | "
                  + " ".join(f"{_median(sp[k] for sp in splits):>6.2f}"
                             for k in ("passes", "fold", "lower", "emit", "opt", "mc", "llvm+")),
                  flush=True)
            if repeat > 1:
                print(f"{'':<{width}} cold runs: "
                      + " ".join(f"{c['wall']:.2f}" for c in colds), flush=True)
            tables.append(colds[-1]["table"])
    if detail:
        for table in tables:
            print()
            print(table)


def _label(setting: dict[str, str]) -> str:
    return " ".join(f"{_SHORT[k]}={v}" for k, v in setting.items())


_SHORT = {"RELAYJIT_COMPILE_JOBS": "j", "RELAYJIT_KERNEL_FAMILIES": "fam"}


def _median(values) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def chain_module(blocks: int):
    """A Relay main of `blocks` blocks over a (1, 8) activation: roughly 4 nodes per block."""
    import numpy as np

    import compiler as tvm
    from compiler import relay

    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 8))
    act = skip = x
    for i in range(blocks):
        if i % 8 == 0:
            skip = act
        scale = relay.multiply(relay.const(rng.standard_normal((1, 8)).astype("float32")),
                               relay.const(np.float32(0.5)))  # folded by FoldConstant
        act = relay.nn.relu(relay.add(act, scale))
        if i % 8 == 7:  # a residual connection every 8 blocks, as in a ResNet
            act = relay.add(act, skip)
    return tvm.IRModule.from_expr(relay.Function([x], act))


def scaling(sizes: list[int]) -> None:
    from compiler import relay
    from compiler.ir.traversal import post_order
    from compiler.transform import PassContext

    print("Python-side passes on a generated chain (seconds; linear growth expected)")
    head = (f"{'blocks':>7} {'nodes':>7} {'InferType':>9} {'Fold':>7} {'FuseOps':>7} "
            f"{'lower':>7} {'graph':>7} {'build':>7}")
    print(head)
    print("-" * len(head))
    for blocks in sizes:
        mod = chain_module(blocks)
        nodes = sum(1 for _ in post_order(mod["main"].body))
        with PassContext(opt_level=OPT_LEVEL):
            timing = relay.build(mod).build_timing
        seconds = {}
        for stage in timing.stages:
            seconds[stage.name] = seconds.get(stage.name, 0.0) + stage.seconds
        infer = sum(s for n, s in seconds.items() if "InferType" in n)
        print(f"{blocks:>7} {nodes:>7} {infer:>9.2f} {seconds.get('pass FoldConstant', 0):>7.2f} "
              f"{seconds.get('pass FuseOps', 0):>7.2f} "
              f"{seconds.get('lower fused functions to PrimFuncs', 0):>7.2f} "
              f"{seconds.get('graph codegen + memory planning', 0):>7.2f} {timing.wall:>7.2f}",
              flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="light model names (default: all nine)")
    p.add_argument("--detail", action="store_true", help="print each cold build's full table")
    p.add_argument("--jobs", help="comma-separated RELAYJIT_COMPILE_JOBS values to compare "
                   "(e.g. 1,2,auto; default: the environment's)")
    p.add_argument("--families", help="comma-separated RELAYJIT_KERNEL_FAMILIES values to "
                   "compare (0,1: kernels sharing one family body off and on)")
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds per model "
                   "(rows are medians)")
    p.add_argument("--scaling", action="store_true", help="pass timings vs graph size")
    p.add_argument("--sizes", default="625,1250,2500", help="blocks per chain for --scaling")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        report = build_once(args.worker)
        print(json.dumps(report))
    elif args.scaling:
        scaling([int(n) for n in args.sizes.split(",")])
    else:
        settings = [{}]
        for env, values in (("RELAYJIT_COMPILE_JOBS", args.jobs),
                            ("RELAYJIT_KERNEL_FAMILIES", args.families)):
            if values:
                settings = [{**s, env: v} for s in settings for v in values.split(",")]
        model_table(args.models, args.detail, settings, max(1, args.repeat))


if __name__ == "__main__":
    main()
