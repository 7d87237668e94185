"""LLVM IR emission and kernel digest time on the kernels of real models, and an IR dump.

    nice python benchmarks/experiments/emit_time.py                          # resnet50 densenet121
    nice python benchmarks/experiments/emit_time.py resnet50 --gen mlp_mixer  # light + generated models
    nice python benchmarks/experiments/emit_time.py --all --dump /tmp/ir_before   # every model, write IR

Each model is built once (opt_level 3, as benchmarks/compile_time.py builds) to capture the
kernel sets relay.build and FoldConstant hand to codegen.jit.build_library; then, for each
model, `emit_module(funcs)` + `str()` (what codegen.optimise.optimised_kernels does) and
`structural_digest` + `kernel_text` (jit.structural_key and
microkernel_objects.microkernels_called) are timed over all its kernel sets, in CPU seconds
of this thread, best of --repeat rounds.
`ukr emit` is the other part of relay.build's "LLVM IR emission" stage on a cold cache: the
definitions of the micro-kernels those kernels call (codegen.llvm.microkernels.define + str),
each emitted once per process.
--dump writes the IR text of every kernel set to <dir>/<model>.ll, so two runs (before and
after an emitter change) can be compared with `cmp` or `diff -r`. Figures only; nothing is
asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

OPT_LEVEL = 3


def kernel_sets(model) -> list[list]:
    """Every PrimFunc list one relay.build of `model` compiles (FoldConstant's sets first)."""
    from codegen import jit
    from compiler import relay
    from compiler.transform import PassContext

    captured: list[list] = []
    original = jit.build_library

    def capture(funcs, opt_level=3, **kwargs):
        captured.append(list(funcs))
        return original(funcs, opt_level, **kwargs)

    jit.build_library = capture
    try:
        mod, params = relay.frontend.from_onnx(model)
        with PassContext(opt_level=OPT_LEVEL):
            relay.build(mod, params=params)
    finally:
        jit.build_library = original
    return captured


def load_model(name: str):
    import onnx

    from compiler.tools.model_zoo import LIGHT_MODELS, light_model_path

    if name in LIGHT_MODELS:
        return onnx.load(light_model_path(name))
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import generated_models

    return generated_models.build(name)[0]


def ir_text(funcs: list) -> str:
    """What optimise.optimised_kernels parses (without the target's triple and data layout)."""
    from codegen.llvm.emit import emit_module

    return str(emit_module(list(funcs)))


def digest(funcs: list) -> None:
    from codegen.tir.structural import kernel_text, structural_digest

    structural_digest(funcs, "opt3")
    for f in funcs:  # microkernels_called reads the same text again
        kernel_text(f)


def microkernel_texts(names: list[str]) -> list[str]:
    """What microkernel_objects.compile_microkernel emits for each micro-kernel (without triple and layout)."""
    from llvmlite import ir

    from codegen.llvm import microkernels

    texts = []
    for name in names:
        module = ir.Module(name=name)
        microkernels.define(module, microkernels.by_symbol(name))
        texts.append(str(module))
    return texts


def best_cpu_seconds(fn, sets: list[list], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        for funcs in sets:
            fn(funcs)
        best = min(best, time.thread_time() - start)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="light or generated model names")
    p.add_argument("--all", action="store_true", help="all light and generated models")
    p.add_argument("--repeat", type=int, default=3, help="timed rounds (best is reported)")
    p.add_argument("--dump", help="directory to write <model>.ll into")
    p.add_argument("--profile", help="write a cProfile of the emission rounds to this file")
    args = p.parse_args()
    names = args.models or ["resnet50", "densenet121"]
    if args.all:
        from compiler.tools.model_zoo import LIGHT_MODELS

        sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
        import generated_models

        names = [*LIGHT_MODELS, *generated_models.GENERATED_MODELS]
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
    print(f"{'model':<18} {'sets':>4} {'kernels':>7} {'emit+str s':>10} {'digest s':>8} "
          f"{'IR MB':>6} {'ukrs':>4} {'ukr emit s':>10} {'ukr IR MB':>9}")
    for name in names:
        sets = kernel_sets(load_model(name))
        kernels = sum(len(s) for s in sets)
        if args.profile:
            import cProfile

            cProfile.runctx("for s in sets: ir_text(s)", globals(), {"sets": sets},
                            f"{args.profile}.{name}")
        emit = best_cpu_seconds(ir_text, sets, args.repeat)
        dig = best_cpu_seconds(digest, sets, args.repeat)
        texts = [ir_text(s) for s in sets]
        size = sum(len(t) for t in texts) / 1e6
        from codegen.microkernel_objects import microkernels_called

        ukrs = list(dict.fromkeys(n for s in sets for n in microkernels_called(s)))
        ukr = best_cpu_seconds(microkernel_texts, [ukrs], args.repeat)
        ukr_texts = microkernel_texts(ukrs)
        ukr_size = sum(len(t) for t in ukr_texts) / 1e6
        print(f"{name:<18} {len(sets):>4} {kernels:>7} {emit:>10.3f} {dig:>8.3f} {size:>6.1f} "
              f"{len(ukrs):>4} {ukr:>10.3f} {ukr_size:>9.1f}", flush=True)
        if args.dump:
            with open(os.path.join(args.dump, f"{name}.ll"), "w") as out:
                out.write("\n".join(texts + ukr_texts))


if __name__ == "__main__":
    main()
