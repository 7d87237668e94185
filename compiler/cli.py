"""The `relayjit` command: compile, run, bench, inspect and demo ONNX models."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import numpy as np

from compiler import relay, transform
from compiler.build import build_progress, optimize
from compiler.errors import CompilerError
from compiler.transform import PassInstrument


class CliError(Exception):
    """A user mistake reported as one line, without a traceback."""


def _parse_shapes(items: list[str] | None) -> dict[str, tuple]:
    shapes = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.split(","))
            if any(d <= 0 for d in shapes[name]):
                raise ValueError
        except ValueError:
            raise CliError(f"bad --shape {item!r}: expected NAME=D1,D2,... with positive "
                           "integer dimensions, e.g. data=1,3,224,224") from None
    return shapes


def _load_onnx(path: str):
    import onnx
    if not os.path.isfile(path):
        raise CliError(f"no such file: {path}")
    if _is_exported_module(path):
        raise CliError(f"{path} is a compiled relayjit module; this command needs the ONNX model")
    try:
        model = onnx.load(path)
    except Exception as err:  # protobuf raises several unrelated types
        raise CliError(f"{path} is not an ONNX model ({type(err).__name__}: {err})") from None
    if not model.graph.node:
        raise CliError(f"{path} is not an ONNX model (it has no graph nodes)")
    return model


class _Progress:
    """Build progress on stderr: on a terminal, one line rewritten pass by pass and kernel by
    kernel; otherwise (CI logs, pipes) one plain "relayjit: ..." line per stage."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.tty = sys.stderr.isatty()

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        if self.tty:
            sys.stderr.write(f"\r\033[K{message}")
        else:
            sys.stderr.write(f"relayjit: {message}\n")
        sys.stderr.flush()

    def done(self, seconds: float) -> None:
        if not self.enabled:
            return
        sys.stderr.write("\r\033[K" if self.tty else f"relayjit: done in {seconds:.1f} s\n")
        sys.stderr.flush()


def _compile(model, shapes, opt_level: int, progress: _Progress):
    """(factory, seconds) for an ONNX model; factory.build_timing includes the frontend."""
    start = time.perf_counter()
    progress("importing ONNX graph")
    mod, params = relay.frontend.from_onnx(model, shape=shapes or None)
    frontend = time.perf_counter() - start
    with transform.PassContext(opt_level=opt_level), build_progress(progress, detail=progress.tty):
        factory = relay.build(mod, target="llvm", params=params)
    factory.build_timing = dataclasses.replace(factory.build_timing, frontend=frontend)
    seconds = time.perf_counter() - start
    progress.done(seconds)
    return factory, seconds


def _is_exported_module(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == b"RELAYJIT"  # export_library's magic (runtime/export.py)


def _load_any(path: str, shapes, opt_level: int, quiet: bool):
    """A factory module from an exported .rjit file or an ONNX model compiled now."""
    import runtime
    if not os.path.isfile(path):
        raise CliError(f"no such file: {path}")
    if _is_exported_module(path):
        return runtime.load_module(path), None
    model = _load_onnx(path)
    factory, _ = _compile(model, shapes, opt_level, _Progress(not quiet))
    return factory, model


def _cpu():
    import runtime
    return runtime.cpu()


def _executor(factory):
    from runtime import graph_executor
    return graph_executor.GraphModule(factory["default"](_cpu()))


def _summary(name: str, array: np.ndarray) -> str:
    text = f"{name}: shape={tuple(array.shape)} dtype={array.dtype}"
    if array.size and array.dtype.kind in "fiub":
        data = array.astype(np.float64)
        text += f" min={data.min():.6g} max={data.max():.6g} mean={data.mean():.6g}"
        if array.ndim >= 1 and array.dtype.kind == "f":
            text += f" argmax={int(np.argmax(array.reshape(-1)))}"
    return text


def _check_writable(path: str, option: str) -> None:
    """Refuse an output path whose directory is missing before any work is done."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CliError(f"bad {option} {path!r}: it is a directory; give a file path")
    if not os.path.isdir(folder):
        problem = "is not a directory" if os.path.exists(folder) else "does not exist"
        raise CliError(f"bad {option} {path!r}: {folder} {problem}")
    if not os.access(folder, os.W_OK):
        raise CliError(f"bad {option} {path!r}: the directory {folder} is not writable")


def cmd_compile(args) -> int:
    model = _load_onnx(args.model)
    out = args.output or os.path.splitext(args.model)[0] + ".rjit"
    _check_writable(out, "--output")
    factory, seconds = _compile(model, _parse_shapes(args.shape), args.opt_level,
                                _Progress(not args.quiet))
    factory.export_library(out)
    print(f"compiled {args.model} in {seconds:.2f} s -> {out} ({os.path.getsize(out)} bytes)")
    if args.timing:
        print(factory.build_timing.table())
    return 0


def _read_inputs(items: list[str] | None, gmod) -> dict[str, np.ndarray]:
    """--input NAME=FILE.npy values; the name must be a model input (not a bound param)."""
    names = list(gmod.get_input_info()[0])
    feeds = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name:
            raise CliError(f"bad --input {item!r}: expected NAME=FILE.npy")
        if name not in names:
            raise CliError(f"bad --input {item!r}: the model has no input {name!r}; its inputs "
                           f"are {names}")
        if not os.path.exists(path):
            raise CliError(f"no such file: {path}")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as err:
            raise CliError(f"bad --input {item!r}: {path} is not a .npy array file "
                           f"({type(err).__name__}: {err})") from None
        if not isinstance(feeds[name], np.ndarray):
            raise CliError(f"bad --input {item!r}: {path} holds several arrays (.npz); give "
                           "one .npy file per input")
    return feeds


def _default_inputs(gmod) -> dict[str, np.ndarray]:
    shapes, dtypes = gmod.get_input_info()
    feeds = {}
    for name, shape in shapes.items():
        n = int(np.prod(shape))
        feeds[name] = (np.arange(n).reshape(shape) / max(n, 1)).astype(dtypes[name])
    return feeds


def cmd_run(args) -> int:
    _apply_threads(args)
    if args.output:
        _check_writable(f"{args.output}_0.npy", "--output")
    factory, _ = _load_any(args.model, _parse_shapes(args.shape), args.opt_level, args.quiet)
    gmod = _executor(factory)
    feeds = _default_inputs(gmod)
    feeds.update(_read_inputs(args.input, gmod))
    start = time.perf_counter()
    gmod.run(**feeds)
    elapsed = time.perf_counter() - start
    stem = args.output or os.path.splitext(os.path.basename(args.model))[0] + "_output"
    for i in range(gmod.get_num_outputs()):
        out = gmod.get_output(i).numpy()
        path = f"{stem}_{i}.npy"
        np.save(path, out)
        print(f"{_summary(f'output {i}', out)} -> {path}")
    print(f"ran in {elapsed * 1e3:.2f} ms")
    return 0


def cmd_bench(args) -> int:
    threads = _apply_threads(args)
    factory, model = _load_any(args.model, _parse_shapes(args.shape), args.opt_level,
                               args.quiet)
    if args.timing:
        print(factory.build_timing.table() if model is not None else
              f"no build timing: {args.model} is a compiled module (nothing was built)")
    gmod = _executor(factory)
    feeds = _default_inputs(gmod)
    result = gmod.benchmark(_cpu(), repeat=args.repeat, number=args.number, **feeds)
    ms = [t * 1e3 for t in result.results]
    print(f"relayjit    median {np.median(ms):8.3f} ms  min {min(ms):8.3f}  max {max(ms):8.3f}"
          f"  ({args.repeat} x {args.number} runs, {threads} thread(s))")
    if model is not None and not args.no_ort:
        try:
            import onnxruntime as ort
        except ImportError:
            print("onnxruntime is not installed: no reference figure")
            return 0
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        time.sleep(0.1)  # let our pool's workers go idle before onnxruntime runs
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            for _ in range(args.number):
                session.run(None, feeds)
            times.append((time.perf_counter() - start) / args.number * 1e3)
        print(f"onnxruntime median {np.median(times):8.3f} ms  min {min(times):8.3f}"
              f"  max {max(times):8.3f}  ratio relayjit/ort "
              f"{np.median(ms) / np.median(times):.2f}")
    return 0


def cmd_inspect(args) -> int:
    from collections import Counter

    model = _load_onnx(args.model)
    print(f"model: {args.model} (opset {[o.version for o in model.opset_import]})")
    inits = {i.name for i in model.graph.initializer}
    for value in model.graph.input:
        if value.name not in inits:
            dims = [d.dim_value or d.dim_param for d in value.type.tensor_type.shape.dim]
            print(f"input  {value.name}: {dims}")
    for value in model.graph.output:
        dims = [d.dim_value or d.dim_param for d in value.type.tensor_type.shape.dim]
        print(f"output {value.name}: {dims}")
    ops = Counter(node.op_type for node in model.graph.node)
    print("ONNX ops: " + ", ".join(f"{op} x{n}" for op, n in ops.most_common()))
    mod, params = relay.frontend.from_onnx(model, shape=_parse_shapes(args.shape) or None)
    from compiler.passes.bind_params import bind_params_by_name
    mod["main"] = bind_params_by_name(mod["main"], params)
    instruments = [_PrintAfterEachPass()] if args.print_ir else []
    with transform.PassContext(opt_level=args.opt_level, instruments=instruments):
        mod = optimize(mod)
    groups = Counter()
    for node in _primitive_functions(mod["main"]):
        groups[_group_name(node)] += 1
    print(f"fused groups: {sum(groups.values())}")
    for name, n in groups.most_common():
        print(f"  {name} x{n}")
    return 0


class _PrintAfterEachPass(PassInstrument):
    """Pass instrument: the module text after every pass that ran."""

    def run_after_pass(self, mod, info):
        print(f"# after {info.name}\n{mod}\n")


def _primitive_functions(main):
    from compiler.ir.expr import Function
    from compiler.ir.traversal import post_order
    return [n for n in post_order(main.body) if isinstance(n, Function) and n.is_primitive]


def _group_name(func) -> str:
    from compiler.ir.expr import Call, Op
    from compiler.ir.traversal import post_order
    names = [n.op.name for n in post_order(func.body) if isinstance(n, Call)
             and isinstance(n.op, Op)]
    return "fused_" + "_".join(name.replace(".", "_") for name in names)


def cmd_demo(args) -> int:
    from compiler.model_zoo import dummy_inputs, light_model_path, reference_outputs
    path = light_model_path(args.model)
    model = _load_onnx(path)
    print(f"relayjit demo: {os.path.basename(path)} from the onnx package")
    factory, seconds = _compile(model, {}, args.opt_level, _Progress(not args.quiet))
    print(f"compiled in {seconds:.2f} s")
    gmod = _executor(factory)
    feeds = dummy_inputs(model)
    gmod.run(**feeds)
    out = gmod.get_output(0).numpy()
    expected = reference_outputs(path)[0]
    result = gmod.benchmark(_cpu(), repeat=5, number=3, **feeds)
    print(_summary("output", out))
    error = float(np.max(np.abs(out - expected)))
    ok = out.shape == expected.shape and np.allclose(out, expected, rtol=1e-3, atol=1e-5)
    print(f"max |ours - reference| = {error:.3g}: {'MATCH' if ok else 'MISMATCH'}")
    print(f"latency: median {result.median * 1e3:.2f} ms over {len(result.results)} runs")
    return 0 if ok else 1


def _thread_count(text: str) -> int:
    from runtime.thread_config import MAX_THREADS

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of threads, got {text!r}")
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_THREADS} threads, got {n}")
    return n


def threads_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--threads", type=_thread_count, metavar="N",
                   help=f"{what} (default: $RELAYJIT_NUM_THREADS, $TVM_NUM_THREADS, or the "
                        "cores this process may use)")


def _apply_threads(args) -> int:
    """Set the kernel thread count from --threads (if given); the count in force."""
    from runtime import threadpool

    if args.threads is not None:
        threadpool.set_num_threads(args.threads)
    return threadpool.get_num_threads()


def timing_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timing", action="store_true",
                   help="print where the compile time went: frontend, each pass, lowering, "
                        "LLVM stages, kernel loading, memory planning; kernel and cache counts")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relayjit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, shapes=True):
        if shapes:
            p.add_argument("--shape", action="append", metavar="NAME=D1,D2,...",
                           help="static shape of an input (repeatable)")
        p.add_argument("--opt-level", type=int, default=3, choices=range(4))
        p.add_argument("-q", "--quiet", action="store_true", help="no progress display")

    p = sub.add_parser("compile", help="compile an ONNX model to a .rjit file")
    p.add_argument("model")
    p.add_argument("-o", "--output")
    timing_option(p)
    common(p)
    p.set_defaults(func=cmd_compile)
    p = sub.add_parser("run", help="run a .rjit or .onnx model once")
    p.add_argument("model")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    p.add_argument("--output", help="prefix of the .npy files written")
    threads_option(p, "kernel threads")
    common(p)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("bench", help="latency of a model, beside onnxruntime")
    p.add_argument("model")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--number", type=int, default=3)
    threads_option(p, "kernel threads, relayjit's and onnxruntime's alike")
    p.add_argument("--no-ort", action="store_true")
    timing_option(p)
    common(p)
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("inspect", help="inputs, outputs, ops and fused groups of a model")
    p.add_argument("model")
    p.add_argument("--print-ir", action="store_true", help="print the module after each pass")
    common(p)
    p.set_defaults(func=cmd_inspect)
    p = sub.add_parser("demo", help="compile and check a model shipped with onnx")
    p.add_argument("--model", default="squeezenet")
    common(p, shapes=False)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as err:
        print(f"relayjit: error: {err}", file=sys.stderr)
        return 2
    except (CompilerError, ValueError, KeyError, TypeError) as err:
        print(f"relayjit: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # a file the command reads or writes
        where = f": {err.filename}" if err.filename else ""
        print(f"relayjit: error: {err.strerror or err}{where}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
