"""The `relayjit` command: compile, run, bench, profile, inspect and demo ONNX models.

With --json, inspect, run, bench and profile print one JSON object on stdout and nothing else
there (progress and notes stay on stderr); each command's help lists the object's keys.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import sys
import time
from collections import Counter

import numpy as np

from codegen import jit
from codegen.printer import primfunc_str
from compiler import relay, transform
from compiler.backend.graph_codegen import GraphCodegen
from compiler.build import build_progress, cpu_target, lower_module, optimize
from compiler.cli_serve import add_serve_parser
from compiler.errors import CompilerError
from compiler.interpreter import evaluate
from compiler.ir.expr import Call, Function, Op
from compiler.ir.traversal import post_order
from compiler.model_zoo import (LIGHT_MODELS, dummy_inputs, light_model_path,
                                 with_random_weights)
from compiler.passes.bind_params import bind_params_by_name
from compiler.session import is_exported_module, read_onnx
from compiler.target import Target
from compiler.transform import PassInstrument
from compiler.visualize import draw_graph, require_layout_library
import runtime
from runtime import debug_executor, graph_executor, threadpool
from runtime.target import building_for
from runtime.thread_config import MAX_THREADS


class CliError(Exception):
    """A user mistake reported as one line, without a traceback."""


def _version() -> str:
    try:
        return importlib.metadata.version("relayjit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


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


def _check_model_file(path: str) -> None:
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory; expected an ONNX model file (.onnx) or a "
                       "compiled relayjit module (.rjit)")
    if not os.path.isfile(path):
        raise CliError(f"no such file: {path}")


def _load_onnx(path: str):
    _check_model_file(path)
    if is_exported_module(path):
        raise CliError(f"{path} is a compiled relayjit module; this command needs the ONNX model")
    try:
        return read_onnx(path)
    except CompilerError as err:
        raise CliError(str(err)) from None


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


def _note(message: str) -> None:
    """A one-line notice on stderr (stdout may be JSON)."""
    print(f"relayjit: {message}", file=sys.stderr)


def _compile(model, shapes, opt_level: int, progress: _Progress, target: str = "llvm"):
    """(factory, seconds) for an ONNX model; factory.build_timing includes the frontend."""
    start = time.perf_counter()
    progress("importing ONNX graph")
    mod, params = relay.frontend.from_onnx(model, shape=shapes or None)
    frontend = time.perf_counter() - start
    with transform.PassContext(opt_level=opt_level), build_progress(progress, detail=progress.tty):
        factory = relay.build(mod, target=target, params=params)
    factory.build_timing = dataclasses.replace(factory.build_timing, frontend=frontend)
    seconds = time.perf_counter() - start
    progress.done(seconds)
    return factory, seconds


def _load_any(args):
    """(factory, ONNX model or None) from an exported .rjit file or an ONNX model compiled now."""
    _check_model_file(args.model)
    if is_exported_module(args.model):
        return runtime.load_module(args.model), None
    model = _load_onnx(args.model)
    factory, _ = _compile(model, _parse_shapes(args.shape), args.opt_level,
                          _Progress(not args.quiet), args.target)
    return factory, model


def _cpu():
    return runtime.cpu()


def _executor(factory):
    return graph_executor.GraphModule(factory["default"](_cpu()))


def _output_names(gmod, model) -> list[str]:
    """ONNX graph output names when the model is at hand, else output_0, output_1, ..."""
    if model is not None and len(model.graph.output) == gmod.get_num_outputs():
        return [o.name for o in model.graph.output]
    return [f"output_{i}" for i in range(gmod.get_num_outputs())]


def _stats(array: np.ndarray) -> dict:
    info = {"shape": list(array.shape), "dtype": str(array.dtype)}
    if array.size and array.dtype.kind in "fiub":
        data = array.astype(np.float64)
        info.update(min=float(data.min()), max=float(data.max()), mean=float(data.mean()))
    return info


def _summary(name: str, array: np.ndarray) -> str:
    info = _stats(array)
    text = f"{name}: shape={tuple(array.shape)} dtype={array.dtype}"
    if "min" in info:
        text += f" min={info['min']:.6g} max={info['max']:.6g} mean={info['mean']:.6g}"
        if array.ndim >= 1 and array.dtype.kind == "f":
            text += f" argmax={int(np.argmax(array.reshape(-1)))}"
    return text


def _top_k(array: np.ndarray, k: int) -> list[list[list]]:
    """Per batch row (axis 0; the rest flattened): the k largest [class index, score]."""
    rows = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(1, -1)
    best = np.argsort(-rows, axis=1, kind="stable")[:, :k]
    return [[[int(i), float(row[i])] for i in idx] for row, idx in zip(rows, best)]


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
                                _Progress(not args.quiet), args.target)
    factory.export_library(out)
    print(f"compiled {args.model} in {seconds:.2f} s -> {out} ({os.path.getsize(out)} bytes)")
    if args.timing:
        print(factory.build_timing.table())
    return 0


_NPY_MAGIC, _NPZ_MAGIC = b"\x93NUMPY", b"PK\x03\x04"


def _load_array_file(path: str, item: str):
    """np.load of a .npy or .npz file, after checking it is one (np.load would call a text
    file "pickled data")."""
    if not os.path.isfile(path):
        raise CliError(f"bad --input {item!r}: no such file: {path}")
    with open(path, "rb") as f:
        head = f.read(6)
    if not (head.startswith(_NPY_MAGIC) or head.startswith(_NPZ_MAGIC)):
        raise CliError(f"bad --input {item!r}: {path} is not a NumPy .npy or .npz file (it "
                       f"starts with {head!r}); save arrays with numpy.save or numpy.savez")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise CliError(f"bad --input {item!r}: {path} is not a readable .npy/.npz file "
                       f"({type(err).__name__}: {err})") from None


def _read_inputs(items: list[str] | None, names: list[str]) -> dict[str, np.ndarray]:
    """--input NAME=FILE.npy and --input FILE.npz (one array per input, by name) values."""
    feeds = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep:
            path = item
        elif not name:
            raise CliError(f"bad --input {item!r}: expected NAME=FILE.npy or FILE.npz")
        data = _load_array_file(path, item)
        arrays = dict(data.items()) if isinstance(data, np.lib.npyio.NpzFile) else None
        if arrays is None and not sep:
            raise CliError(f"bad --input {item!r}: a .npy file holds one array; say which "
                           f"input it is with NAME={path} (inputs: {names})")
        if arrays is not None and sep:
            raise CliError(f"bad --input {item!r}: {path} is an .npz archive; give it without "
                           "NAME= (its arrays are matched to inputs by name)")
        for key, value in (arrays or {name: data}).items():
            if key not in names:
                raise CliError(f"bad --input {item!r}: the model has no input {key!r}; its "
                               f"inputs are {names}")
            feeds[key] = value
    return feeds


def _feeds(args, gmod) -> tuple[dict[str, np.ndarray], list[str]]:
    """Inputs from --input, the rest invented (arange(n)/n) and announced unless --quiet;
    (feeds, names of the invented ones)."""
    shapes, dtypes = gmod.get_input_info()
    feeds = _read_inputs(args.input, list(shapes))
    invented = [name for name in shapes if name not in feeds]
    for name in invented:
        shape = shapes[name]
        n = int(np.prod(shape))
        feeds[name] = (np.arange(n).reshape(shape) / max(n, 1)).astype(dtypes[name])
        if not args.quiet:
            _note(f"no --input for {name!r} ({'x'.join(map(str, shape))} {dtypes[name]}): "
                  "using arange(n)/n")
    return feeds, invented


def cmd_run(args) -> int:
    _apply_threads(args)
    npz = bool(args.output) and args.output.endswith(".npz")
    if args.output:
        _check_writable(args.output if npz else f"{args.output}_0.npy", "--output")
    factory, model = _load_any(args)
    gmod = _executor(factory)
    feeds, invented = _feeds(args, gmod)
    start = time.perf_counter()
    gmod.run(**feeds)
    elapsed = time.perf_counter() - start
    stem = args.output or os.path.splitext(os.path.basename(args.model))[0] + "_output"
    names = _output_names(gmod, model)
    outputs = {name: gmod.get_output(i).numpy() for i, name in enumerate(names)}
    if npz:
        np.savez(args.output, **outputs)
    report = []
    for i, (name, out) in enumerate(outputs.items()):
        path = args.output if npz else f"{stem}_{i}.npy"
        if not npz:
            np.save(path, out)
        entry = {"name": name, **_stats(out), "file": path}
        if args.top_k:
            entry["top_k"] = _top_k(out, args.top_k)
        report.append(entry)
    if args.json:
        print(json.dumps({"model": args.model, "invented_inputs": invented,
                          "outputs": report, "run_ms": elapsed * 1e3}))
        return 0
    for i, (entry, out) in enumerate(zip(report, outputs.values())):
        label = f"output {i}" + (f" ({entry['name']})" if entry["name"] != f"output_{i}" else "")
        print(f"{_summary(label, out)} -> {entry['file']}")
        for row, best in enumerate(entry.get("top_k", [])):
            ranked = ", ".join(f"{i} ({score:.4g})" for i, score in best)
            print(f"  top-{args.top_k}{f' [row {row}]' if len(entry['top_k']) > 1 else ''}: "
                  f"{ranked}")
    print(f"ran in {elapsed * 1e3:.2f} ms")
    return 0


def _ms(times: list[float]) -> dict:
    return {"median": float(np.median(times)), "min": min(times), "max": max(times)}


def _onnxruntime_ms(model, feeds, threads: int, repeat: int, number: int) -> list[float] | None:
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
            session.run(None, feeds)
        times.append((time.perf_counter() - start) / number * 1e3)
    return times


def cmd_bench(args) -> int:
    threads = _apply_threads(args)
    factory, model = _load_any(args)
    if args.timing and not args.json:
        print(factory.build_timing.table() if model is not None else
              f"no build timing: {args.model} is a compiled module (nothing was built)")
    gmod = _executor(factory)
    feeds, invented = _feeds(args, gmod)
    result = gmod.benchmark(_cpu(), repeat=args.repeat, number=args.number, **feeds)
    ms = [t * 1e3 for t in result.results]
    ort_ms = None
    if model is not None and not args.no_ort:
        ort_ms = _onnxruntime_ms(model, feeds, threads, args.repeat, args.number)
    if args.json:
        print(json.dumps({"model": args.model, "threads": threads, "repeat": args.repeat,
                          "number": args.number, "invented_inputs": invented,
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


def cmd_profile(args) -> int:
    threads = _apply_threads(args)
    if args.trace:
        _check_writable(args.trace, "--trace")
    factory, _ = _load_any(args)
    gmod = debug_executor.GraphModuleDebug(factory["default"](_cpu()))
    feeds, invented = _feeds(args, gmod)
    report = gmod.profile(repeat=args.repeat, number=args.number, **feeds)
    if args.trace:
        with open(args.trace, "w") as f:
            json.dump(report.chrome_trace(), f)
    if args.json:
        print(json.dumps({"model": args.model, "threads": threads, "invented_inputs": invented,
                          "trace": args.trace, **report.as_dict()}))
        return 0
    print(report.table(top=args.top))
    if args.trace:
        print(f"trace -> {args.trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def _dims(value) -> list:
    return [d.dim_value or d.dim_param for d in value.type.tensor_type.shape.dim]


def cmd_inspect(args) -> int:
    if args.json and (args.print_ir or args.print_ir_after or args.dump):
        raise CliError("--json cannot be combined with --print-ir, --print-ir-after or --dump "
                       "(they print text)")
    if args.profile and not args.graph:
        raise CliError("--profile shades the boxes of the --graph picture; give --graph "
                       "FILE.svg too")
    if args.graph:
        _check_writable(args.graph, "--graph")
        require_layout_library()
    model = _load_onnx(args.model)
    inits = {i.name for i in model.graph.initializer}
    info = {"model": args.model, "opset": [o.version for o in model.opset_import],
            "inputs": [{"name": v.name, "shape": _dims(v)} for v in model.graph.input
                       if v.name not in inits],
            "outputs": [{"name": v.name, "shape": _dims(v)} for v in model.graph.output],
            "onnx_ops": dict(Counter(node.op_type for node in model.graph.node).most_common())}
    if not args.json:
        print(f"model: {args.model} (opset {info['opset']})")
        for kind in ("input", "output"):
            for value in info[kind + "s"]:
                print(f"{kind:<6} {value['name']}: {value['shape']}")
        print("ONNX ops: " + ", ".join(f"{op} x{n}" for op, n in info["onnx_ops"].items()))
    mod, params = relay.frontend.from_onnx(model, shape=_parse_shapes(args.shape) or None)
    mod["main"] = bind_params_by_name(mod["main"], params)
    printer = _PrintIR(args.print_ir_after if not args.print_ir else None)
    instruments = [printer] if args.print_ir or args.print_ir_after else []
    target = Target(args.target)
    cpu = cpu_target(target)
    with transform.PassContext(opt_level=args.opt_level, instruments=instruments), target, \
            building_for(cpu):
        mod = optimize(mod)
    missing = sorted(set(args.print_ir_after or ()) - printer.ran)
    if missing:
        raise CliError(f"bad --print-ir-after {missing[0]!r}: no such pass ran; the passes that "
                       f"ran are {sorted(printer.ran)}")
    groups = Counter(_group_name(f) for f in _primitive_functions(mod["main"]))
    info["fused_groups"] = dict(groups.most_common())
    info["num_fused_groups"] = sum(groups.values())
    with target, building_for(cpu):  # the kernels and --dump as relay.build makes them
        kernel_names, prim_funcs = (lower_module(mod["main"]) if args.dump or args.graph
                                    else (None, None))
        dump = _dump(prim_funcs, args.dump) if args.dump else None
    if args.graph:
        info["graph"] = args.graph
        _write_graph(args, mod, kernel_names, model)
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"fused groups: {info['num_fused_groups']}")
    for name, n in groups.most_common():
        print(f"  {name} x{n}")
    if dump is not None:
        print(dump)
    if args.graph:
        print(f"fused graph -> {args.graph}" + (" (shaded by time)" if args.profile else ""))
    return 0


def _write_graph(args, mod, kernel_names, model) -> None:
    """--graph: the fused graph as SVG; with --profile, built, run and timed first."""
    node_times = None
    if args.profile:
        factory, _ = _compile(model, _parse_shapes(args.shape), args.opt_level,
                              _Progress(not args.quiet))
        gmod = debug_executor.GraphModuleDebug(factory["default"](_cpu()))
        feeds, _ = _feeds(args, gmod)
        report = gmod.profile(repeat=5, **feeds)
        node_times = {n.name: n.median for n in report.nodes}
        graph_json, params = factory.get_graph_json(), factory.get_params()
    else:
        result = GraphCodegen(mod["main"], kernel_names).run()
        graph_json, params = result.graph_json, result.params
    svg = draw_graph(graph_json, params, node_times, title=os.path.basename(args.model))
    with open(args.graph, "w") as f:
        f.write(svg)


def _dump(prim_funcs, kind: str) -> str:
    """The kernels as loop-nest IR, optimised LLVM IR or host assembly (TVM's get_source)."""
    if kind == "tir":
        return "\n\n".join(primfunc_str(f) for f in prim_funcs)
    if kind == "llvm":
        return jit.get_llvm_ir(prim_funcs)
    return jit.get_assembly(prim_funcs)


class _PrintIR(PassInstrument):
    """Pass instrument: the module text after every pass (or the named ones) that ran."""

    def __init__(self, only: list[str] | None):
        self.only = set(only) if only is not None else None
        self.ran: set[str] = set()

    def run_after_pass(self, mod, info):
        self.ran.add(info.name)
        if self.only is None or info.name in self.only:
            print(f"# after {info.name}\n{mod}\n")


def _primitive_functions(main):
    return [n for n in post_order(main.body) if isinstance(n, Function) and n.is_primitive]


def _group_name(func) -> str:
    names = [n.op.name for n in post_order(func.body) if isinstance(n, Call)
             and isinstance(n.op, Op)]
    return "fused_" + "_".join(name.replace(".", "_") for name in names)


def _reference(model, feeds) -> tuple[np.ndarray, str]:
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


def cmd_demo(args) -> int:
    path = light_model_path(args.model)
    model = _load_onnx(path)
    if args.shipped_weights:
        weights = "its shipped constant-fill weights"
    else:
        model = with_random_weights(model, seed=args.seed)
        weights = f"random weights (seed {args.seed})"
    print(f"relayjit demo: {os.path.basename(path)} from the onnx package, with {weights}")
    factory, seconds = _compile(model, {}, args.opt_level, _Progress(not args.quiet))
    print(f"compiled in {seconds:.2f} s")
    gmod = _executor(factory)
    feeds = dummy_inputs(model)
    gmod.run(**feeds)
    out = gmod.get_output(0).numpy()
    expected, source = _reference(model, feeds)
    print(f"reference: {source}")
    if expected.size > 1 and np.ptp(expected) <= 1e-6 * max(1.0, float(np.abs(expected).max())):
        _note(f"warning: the reference output is uniform (every value is "
              f"{float(expected.reshape(-1)[0]):.6g}), so this check cannot tell a right "
              "network from a wrong one")
    result = gmod.benchmark(_cpu(), repeat=5, number=3, **feeds)
    print(_summary("output", out))
    ok = out.shape == expected.shape and np.allclose(out, expected, rtol=1e-3, atol=1e-5)
    error = float(np.max(np.abs(out - expected))) if out.shape == expected.shape else np.inf
    print(f"max |ours - reference| = {error:.3g}: {'MATCH' if ok else 'MISMATCH'}")
    print(f"latency: median {result.median * 1e3:.2f} ms over {len(result.results)} runs")
    return 0 if ok else 1


def _thread_count(text: str) -> int:

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of threads, got {text!r}")
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_THREADS} threads, got {n}")
    return n


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {n}")
    return n


def threads_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--threads", type=_thread_count, metavar="N",
                   help=f"{what} (default: $RELAYJIT_NUM_THREADS, $TVM_NUM_THREADS, or the "
                        "cores this process may use)")


def _apply_threads(args) -> int:
    """Set the kernel thread count from --threads (if given); the count in force."""

    if args.threads is not None:
        threadpool.set_num_threads(args.threads)
    return threadpool.get_num_threads()


def timing_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timing", action="store_true",
                   help="print where the compile time went: frontend, each pass, lowering, "
                        "LLVM stages, kernel loading, memory planning; kernel and cache counts")


MODEL_HELP = "the ONNX model (.onnx) or a module written by `relayjit compile` (.rjit)"
INPUT_HELP = ("an input value: NAME=FILE.npy, or FILE.npz holding arrays named after the "
              "inputs (repeatable); inputs not given are invented (arange(n)/n) and announced")


def _json_option(p: argparse.ArgumentParser, keys: str) -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print one JSON object on stdout instead of text; keys: {keys}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relayjit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"relayjit {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, shapes=True, target=True):
        if shapes:
            p.add_argument("--shape", action="append", metavar="NAME=D1,D2,...",
                           help="static shape of an input (repeatable)")
        p.add_argument("--opt-level", type=int, default=3, choices=range(4),
                       help="optimisation level of the build, as PassContext(opt_level) "
                            "(default: 3)")
        if target:
            p.add_argument("--target", default="llvm",
                           help='compile for this target: "llvm" (the host CPU, the default) '
                                'or a TVM-style string such as "llvm -mcpu=x86-64-v3"')
        p.add_argument("-q", "--quiet", action="store_true",
                       help="no progress display and no notes on stderr")

    p = sub.add_parser("compile", help="compile an ONNX model to a .rjit file")
    p.add_argument("model", help="the ONNX model (.onnx)")
    p.add_argument("-o", "--output", help="the module file to write (default: the model's path "
                                          "with .rjit)")
    timing_option(p)
    common(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run a .rjit or .onnx model once")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy|FILE.npz", help=INPUT_HELP)
    p.add_argument("--output", help="where outputs go: a FILE.npz (every output, by name) or a "
                                    "prefix for PREFIX_0.npy, PREFIX_1.npy, ... (default: "
                                    "<model>_output)")
    p.add_argument("--top-k", type=_positive, metavar="K",
                   help="also print each output's K largest values and their indices per batch "
                        "row (for classifiers)")
    _json_option(p, "model, invented_inputs, outputs [{name, shape, dtype, min, max, mean, "
                    "file, top_k}], run_ms")
    threads_option(p, "kernel threads")
    common(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="latency of a model, beside onnxruntime")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy|FILE.npz", help=INPUT_HELP)
    p.add_argument("--repeat", type=_positive, default=10,
                   help="measurements to take; each is the mean of --number runs (default: 10)")
    p.add_argument("--number", type=_positive, default=3,
                   help="runs averaged per measurement (default: 3)")
    threads_option(p, "kernel threads, relayjit's and onnxruntime's alike")
    p.add_argument("--no-ort", action="store_true",
                   help="skip the onnxruntime reference figure")
    _json_option(p, "model, threads, repeat, number, invented_inputs, relayjit_ms {median, "
                    "min, max}, onnxruntime_ms (same keys, or null)")
    timing_option(p)
    common(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("profile", help="time every fused kernel of a model (slowest first)")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy|FILE.npz", help=INPUT_HELP)
    p.add_argument("--repeat", type=_positive, default=10,
                   help="timing rounds; a node's time is its median over rounds (default: 10)")
    p.add_argument("--number", type=_positive,
                   help="calls of each kernel per round (default: enough for ~20 ms rounds)")
    p.add_argument("--top", type=_positive, metavar="N", help="show only the N slowest nodes")
    p.add_argument("--trace", metavar="FILE.json",
                   help="also write a Chrome/Perfetto trace (traceEvents, one per node)")
    threads_option(p, "kernel threads")
    _json_option(p, "model, threads, invented_inputs, trace, nodes [{name, kernel, ops, "
                    "input_shapes, output_shapes, median_ms, min_ms, max_ms, share, flops, "
                    "gflops_per_s, bytes, gbytes_per_s}], total_ms, whole_run_ms, repeat, "
                    "number")
    common(p)
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("inspect", help="inputs, outputs, ops and fused groups of a model; its "
                                       "IR, kernels and a picture of the fused graph")
    p.add_argument("model", help="the ONNX model (.onnx)")
    p.add_argument("--print-ir", action="store_true", help="print the module after each pass")
    p.add_argument("--print-ir-after", action="append", metavar="PASS",
                   help="print the module after the pass named PASS, e.g. FuseOps (repeatable)")
    p.add_argument("--dump", choices=("tir", "llvm", "asm"),
                   help="print the kernels as loop-nest IR (tir), optimised LLVM IR (llvm) or "
                        "host assembly (asm)")
    p.add_argument("--graph", metavar="FILE.svg",
                   help="draw the fused graph: one box per kernel with its ops and params, "
                        "edges labelled with shapes (needs pip install 'relayjit[viz]')")
    p.add_argument("--profile", action="store_true",
                   help="with --graph: build, run and time the model, and shade each box by "
                        "its time")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy|FILE.npz",
                   help="with --profile: " + INPUT_HELP)
    _json_option(p, "model, opset, inputs, outputs [{name, shape}], onnx_ops, fused_groups, "
                    "num_fused_groups, graph (when drawn)")
    common(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("demo", help="compile a model shipped with onnx and check it against "
                                    "onnxruntime (or the reference interpreter)")
    p.add_argument("--model", default="squeezenet", choices=LIGHT_MODELS, metavar="NAME",
                   help=f"one of {', '.join(LIGHT_MODELS)} (default: squeezenet)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random weights (default: 0)")
    p.add_argument("--shipped-weights", action="store_true",
                   help="keep the model's shipped weights (constant fills: every output is "
                        "the same, so the check is weak)")
    common(p, shapes=False, target=False)
    p.set_defaults(func=cmd_demo)

    add_serve_parser(sub)
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
