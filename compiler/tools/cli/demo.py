"""`relayjit demo`: compile a model shipped with the onnx package and check its output against
onnxruntime (or the reference interpreter when onnxruntime is not installed)."""
from __future__ import annotations

import os

import numpy as np

import runtime
from compiler import relay
from compiler.op.interpreter import evaluate
from compiler.passes.bind_params import bind_params_by_name
from compiler.tools.model_zoo import (LIGHT_MODELS, dummy_inputs, light_model_path,
                                      with_random_weights)
from .common import Progress, compile_model, executor, load_onnx, note, summary
from .options import build_options


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="compile a model shipped with onnx and check it against "
                                    "onnxruntime (or the reference interpreter)")
    p.add_argument("--model", default="squeezenet", choices=LIGHT_MODELS, metavar="NAME",
                   help=f"one of {', '.join(LIGHT_MODELS)} (default: squeezenet)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random weights (default: 0)")
    p.add_argument("--shipped-weights", action="store_true",
                   help="keep the model's shipped weights (constant fills: every output is "
                        "the same, so the check is weak)")
    build_options(p, shapes=False, target=False)
    p.set_defaults(func=command)


def reference(model, feeds) -> tuple[np.ndarray, str]:
    """The model's first output from onnxruntime, or from the reference interpreter when
    onnxruntime is not installed; and which one it was."""
    try:
        import onnxruntime as ort
    except ImportError:
        mod, params = relay.frontend.from_onnx(model)
        main = bind_params_by_name(mod["main"], params)
        result = evaluate(main, [feeds[p.name_hint] for p in main.params])
        first = result[0] if isinstance(result, tuple) else result
        return np.asarray(first), "relayjit's reference interpreter (numpy)"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0], f"onnxruntime {ort.__version__}"


def command(args) -> int:
    path = light_model_path(args.model)
    model = load_onnx(path)
    if args.shipped_weights:
        weights = "its shipped constant-fill weights"
    else:
        model = with_random_weights(model, seed=args.seed)
        weights = f"random weights (seed {args.seed})"
    print(f"relayjit demo: {os.path.basename(path)} from the onnx package, with {weights}")
    factory, seconds = compile_model(model, {}, args.opt_level, Progress(not args.quiet))
    print(f"compiled in {seconds:.2f} s")
    gmod = executor(factory)
    feeds = dummy_inputs(model)
    gmod.run(**feeds)
    out = gmod.get_output(0).numpy()
    expected, source = reference(model, feeds)
    print(f"reference: {source}")
    if expected.size > 1 and np.ptp(expected) <= 1e-6 * max(1.0, float(np.abs(expected).max())):
        note(f"warning: the reference output is uniform (every value is "
             f"{float(expected.reshape(-1)[0]):.6g}), so this check cannot tell a right "
             "network from a wrong one")
    result = gmod.benchmark(runtime.cpu(), repeat=5, number=3, **feeds)
    print(summary("output", out))
    ok = out.shape == expected.shape and np.allclose(out, expected, rtol=1e-3, atol=1e-5)
    error = float(np.max(np.abs(out - expected))) if out.shape == expected.shape else np.inf
    print(f"max |ours - reference| = {error:.3g}: {'MATCH' if ok else 'MISMATCH'}")
    print(f"latency: median {result.median * 1e3:.2f} ms over {len(result.results)} runs")
    return 0 if ok else 1
