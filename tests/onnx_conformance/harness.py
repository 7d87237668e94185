"""ONNX backend node-test conformance: every case through from_onnx and an executor.

Cases come from onnx's own backend test generators, built in memory
(`onnx.backend.test.case.node.collect_testcases`). Each is converted, executed and compared
with the expected outputs (rtol 1e-3, atol 1e-5 as ONNX's runner; NaN positions, dtypes and
shapes must match), then classified as passed / wrong result / unsupported op / other error.

    python -m tests.onnx_conformance.harness [--executor graph|vm|debug] [--as-written]
                                             [-k substring] [-v]

The executor defaults to $RELAYJIT_CONFORMANCE_EXECUTOR or "vm" (relay.vm.compile and the
Relay VM: the same kernels as relay.build, plus control flow, sequences and dynamic shapes);
"graph" runs relay.build and the graph executor; "debug" the numpy-reference interpreter. Without --as-written a
graph input that a converter needs as a constant (a shape, axes, k...) is frozen to the
case's value; with it every input arrives at run time, as a user's would (expected_failures.txt
then also lists the cases marked "as written only", which need an input frozen).
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

PASSED, WRONG, UNSUPPORTED, ERROR = "passed", "wrong result", "unsupported op", "other error"
STATUSES = (PASSED, WRONG, UNSUPPORTED, ERROR)
EXPECTED_FAILURES_FILE = Path(__file__).with_name("expected_failures.txt")
RTOL, ATOL = 1e-3, 1e-5


def default_executor() -> str:
    return os.environ.get("RELAYJIT_CONFORMANCE_EXECUTOR", "vm")


@functools.lru_cache(maxsize=1)
def all_cases() -> tuple:
    """Every ONNX node test case (generated in memory, once per process)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(collect_testcases(None))


def cases_by_name() -> dict:
    return {case.name: case for case in all_cases()}


AS_WRITTEN_ONLY = "as written only:"


def load_expected_failures(path: Path = EXPECTED_FAILURES_FILE,
                           as_written: bool = False) -> dict[str, str]:
    """name -> reason, from lines `test_name — reason` (# comments and blank lines ignored).
    A reason starting "as written only:" is a case that passes once its shape-deciding
    inputs are frozen: listed for --as-written runs only."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" — ")
        if not reason.strip():
            raise ValueError(f"{path.name}: {name!r} has no reason (expected 'name — reason')")
        if as_written or not reason.strip().startswith(AS_WRITTEN_ONLY):
            out[name.strip()] = reason.strip()
    return out


def _input_names(model) -> list:
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def _leaves(value) -> list:
    """The tensors of an output, sequences (tuples, lists, ADTs) flattened in order."""
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        else:
            out.append(item.numpy() if hasattr(item, "numpy") else np.asarray(item))
    return out


def _main_args(mod, params, feeds: dict) -> list:
    main = mod["main"]
    return [params[p.name_hint] if p.name_hint in params else feeds[p.name_hint]
            for p in main.params]


def _run_debug(mod, params, feeds: dict) -> list:
    from compiler.op.interpreter import evaluate
    out = evaluate(mod, _main_args(mod, params, feeds))
    return _leaves(out)


def _run_graph(mod, params, feeds: dict) -> list:
    from compiler import relay
    from runtime import cpu, graph_executor
    lib = relay.build(mod, target="llvm", params=params)
    module = graph_executor.GraphModule(lib["default"](cpu(0)))
    for name, value in feeds.items():
        if isinstance(value, tuple):
            raise TypeError(f"the graph executor takes tensor inputs only; {name!r} is a "
                            "sequence (use --executor vm)")
        module.set_input(name, value)
    module.run()
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


def _run_vm(mod, params, feeds: dict) -> list:
    from compiler import relay
    from runtime import cpu
    from runtime.vm import VirtualMachine
    exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = VirtualMachine(exe, cpu(0))
    names = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    return _leaves(vm.invoke("main", *[feeds[n] for n in names]))


EXECUTORS = {"debug": _run_debug, "graph": _run_graph, "vm": _run_vm}
# executors that need the inputs deciding a shape frozen (the VM until it runs dynamic shapes)
STATIC_SHAPE_EXECUTORS = (_run_graph, _run_vm)


def compare(expected: np.ndarray, got: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> str:
    """'' when equal within tolerance, else what differs."""
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    if expected.shape != got.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype.kind in "biuUSO":
        bad = expected != got
    else:
        e, g = expected.astype(np.float64), got.astype(np.float64)
        nan_e, nan_g = np.isnan(e), np.isnan(g)
        with np.errstate(invalid="ignore"):
            close = (np.abs(e - g) <= atol + rtol * np.abs(e)) | (e == g)
        bad = (nan_e != nan_g) | (~close & ~nan_e)
    if not bad.any():
        return ""
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())}/{bad.size} elements differ; first at {first}: got "
            f"{got[first]!r}, expected {expected[first]!r}")


def _as_array(value) -> np.ndarray:
    """Data sets hold numpy arrays or TensorProtos (e.g. the Cast cases)."""
    from onnx import TensorProto, numpy_helper
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def _as_value(value):
    """A case's input: an array, a tuple of arrays (a sequence) or None (an empty optional)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(_as_array(v) for v in value)
    return _as_array(value)


def specialize(model, values: dict):
    """A copy of model whose graph inputs named in `values` are initializers with those values.

    ONNX's node tests often pass shapes, axes or scales as runtime inputs. Unless the case
    runs as written, the harness fixes exactly the inputs a converter asked for
    (StaticInputRequired), which is what a user does with `freeze_params` on a real model.
    """
    import onnx
    from onnx import numpy_helper
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for name, value in values.items():
        copy.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return copy


def _structure(model, feeds: dict) -> dict:
    """shape= for the sequence and optional graph inputs: each sequence's element shapes, None
    for an empty optional (a sequence's length is static after import; see
    compiler/frontend/onnx_ops/sequence.py). Tensor inputs keep the model's own shapes."""
    shape = {}
    for info in model.graph.input:
        kind = info.type.WhichOneof("value")
        if kind not in ("sequence_type", "optional_type") or info.name not in feeds:
            continue
        value = feeds[info.name]
        if value is None:
            shape[info.name] = None
        elif isinstance(value, tuple):
            shape[info.name] = [v.shape for v in value]
        else:
            shape[info.name] = value.shape
    return shape


def _convert(case, inputs: list, as_written: bool, static_only: bool = False):
    """from_onnx on the case's model (unless as_written, specializing inputs that must be
    static, and for a static-shape executor the inputs that decide a shape); also the feeds
    and the names of the inputs fixed."""
    from compiler.frontend import from_onnx
    from compiler.frontend.onnx_ops.common import StaticInputRequired
    names = _input_names(case.model)
    feeds = dict(zip(names, inputs))
    shape = _structure(case.model, feeds)
    fixed: dict = {}
    while True:
        model = specialize(case.model, fixed) if fixed else case.model
        try:
            mod, params = from_onnx(model, shape=shape, freeze_params=bool(fixed))
        except StaticInputRequired as err:
            if as_written or err.value_name not in feeds or err.value_name in fixed:
                raise
            fixed[err.value_name] = feeds[err.value_name]
            continue
        wanted = set() if as_written or not static_only else \
            _shape_value_inputs(mod) & set(feeds) - set(fixed)
        if not wanted:
            return mod, params, {n: v for n, v in feeds.items()
                                 if n not in fixed and v is not None}, fixed
        fixed.update({n: feeds[n] for n in wanted})


def _shape_value_inputs(mod) -> set:
    """Graph inputs whose values decide a shape (the value inputs of dyn.* ops and other ops
    with a declared shape function): a static-shape executor needs them frozen."""
    from compiler.ir.expr import Call, Op, Var
    from compiler.ir.traversal import post_order
    names = set()
    for node in post_order(mod["main"].body):
        if type(node) is Call and type(node.op) is Op and node.op.op_def.shape_func is not None:
            for i, arg in enumerate(node.args):
                if node.op.op_def.shape_func.reads_value(i):
                    names |= {v.name_hint for v in post_order(arg) if type(v) is Var}
    return names


def run_case(case, executor: str | None = None, as_written: bool = False) -> tuple[str, str]:
    """(status, detail) of one case under the executor ("graph", "vm" or "debug"); as_written
    runs the model with every graph input fed at run time (nothing frozen)."""
    from compiler.errors import OpNotImplemented
    run = EXECUTORS[executor or default_executor()]
    try:
        for index, (inputs, expected) in enumerate(case.data_sets):
            mod, params, feeds, fixed = _convert(case, [_as_value(i) for i in inputs],
                                                 as_written, run in STATIC_SHAPE_EXECUTORS)
            with np.errstate(all="ignore"):
                outputs = run(mod, params, feeds)
            expected = _leaves([_as_value(e) for e in expected])
            if len(outputs) != len(expected):
                return WRONG, f"data set {index}: {len(outputs)} outputs, expected {len(expected)}"
            rtol, atol = max(RTOL, case.rtol), max(ATOL, case.atol)
            for i, (want, got) in enumerate(zip(expected, outputs)):
                problem = compare(want, got, rtol, atol)
                if problem:
                    return WRONG, f"data set {index} output {i}: {problem}"
    except OpNotImplemented as err:
        return UNSUPPORTED, str(err)
    except Exception as err:  # classified, not hidden: the detail carries type and message
        where = traceback.extract_tb(err.__traceback__)[-1]
        return ERROR, f"{type(err).__name__}: {err} [{Path(where.filename).name}:{where.lineno}]"
    return PASSED, f"static inputs: {sorted(fixed)}" if fixed else ""


def run_all(executor: str | None = None, pattern: str = "", verbose: bool = False,
            as_written: bool = False) -> dict:
    """name -> (status, detail) for every case whose name contains pattern."""
    results = {}
    for case in all_cases():
        if pattern and pattern not in case.name:
            continue
        results[case.name] = run_case(case, executor, as_written)
        if verbose and results[case.name][0] != PASSED:
            print(f"{case.name}: {results[case.name][0]}: {results[case.name][1][:300]}")
    return results


def totals_table(results: dict, expected: dict | None = None) -> str:
    counts = Counter(status for status, _ in results.values())
    lines = [f"{'status':<16}{'cases':>7}", "-" * 23]
    lines += [f"{s:<16}{counts.get(s, 0):>7}" for s in STATUSES]
    lines += ["-" * 23, f"{'total':<16}{len(results):>7}"]
    specialized = sum(1 for s, d in results.values() if s == PASSED and d.startswith("static"))
    lines.append(f"(of the passed, {specialized} with shape-like inputs fixed to their values)")
    if expected is not None:
        unexpected = [n for n, (s, _) in results.items() if s != PASSED and n not in expected]
        fixed = [n for n, (s, _) in results.items() if s == PASSED and n in expected]
        lines.append(f"{'not listed, failing':<20}{len(unexpected):>3}")
        lines.append(f"{'listed, now passing':<20}{len(fixed):>3}")
    return "\n".join(lines)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=sorted(EXECUTORS), default=default_executor())
    parser.add_argument("-k", "--pattern", default="", help="only cases containing this")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    parser.add_argument("--as-written", action="store_true",
                        help="feed every graph input at run time (freeze none to its value)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = run_all(args.executor, args.pattern, args.verbose, args.as_written)
    expected = load_expected_failures(as_written=args.as_written)
    print(f"ONNX node conformance, executor={args.executor}"
          f"{', as written' if args.as_written else ''}, {time.perf_counter() - start:.1f} s")
    print(totals_table(results, expected))
    unexpected = sorted(n for n, (s, _) in results.items() if s != PASSED and n not in expected)
    for name in unexpected:
        status, detail = results[name]
        print(f"  UNEXPECTED {name}: {status}: {detail[:200]}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
