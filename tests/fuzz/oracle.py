"""One ONNX case through every engine, and the verdict.

Engines: onnx.reference.ReferenceEvaluator (the oracle), onnxruntime (a second opinion, never
the judge), relayjit at opt_level 0 and 3 (relay.build + graph executor), and on the Relay VM
(dynamic.py): "vm" as generated, "vm-dynamic" with the inputs' leading (and last) dims
declared dynamic, so through shape programs and kernels specialised at run time (cases with
If and Loop run only there: relay.build refuses run-time control flow). The verdict:

    pass         every relayjit engine that ran the case agrees with the reference (the
                 others refused it as unsupported)
    unsupported  every relayjit engine refused with a clear error (OpNotImplemented, or a
                 compiler error that names the op/dtype/attribute as unsupported); not a
                 failure
    mismatch     an output differs in dtype, shape, value or NaN position    (failure)
    crash        a raw exception (numpy, protobuf, KeyError...), a kernel error on valid
                 input, or (seen from the parent process) a dead worker      (failure)
    rejected     a compiler error on a valid model that does not say "unsupported" (failure)
    hang         (parent) the worker did not answer in time                  (failure)
    invalid      the generator's declared shapes disagree with the reference: a fuzzer bug
    ref_error    the reference itself failed; the case says nothing about relayjit

Tolerances: ints and bools exact (a quantized value computed from inexact floats within the
generator's error estimate, counted in integer steps); floats |got - want| <= atol + rtol * |want| with
float32 rtol 1e-4 / atol 1e-5 and float16 rtol 1e-2 / atol 1e-3, atol raised to twice
the generator's error estimate for that value (long reductions, exp, division...). NaN
positions must agree; infinities must be equal.
"""
from __future__ import annotations

import re
import time
import traceback
from pathlib import Path

import numpy as np

from .dynamic import run_relayjit_vm
from .reference import run_reference

PASS, UNSUPPORTED, MISMATCH, CRASH, REJECTED, HANG, INVALID, REF_ERROR = (
    "pass", "unsupported", "mismatch", "crash", "rejected", "hang", "invalid", "ref_error")
FAILURES = (MISMATCH, CRASH, REJECTED, HANG)
LEVELS = (0, 3, "vm", "vm-dynamic")
BASE_TOL = {"float32": (1e-4, 1e-5), "float16": (1e-2, 1e-3), "float64": (1e-7, 1e-9)}
_UNSUPPORTED = re.compile(r"not supported|unsupported|not implemented|no converter|"
                          r"only supports?|does not support|cannot (?:be )?(?:lower|handle)|"
                          r"requires? (?:a )?static|needs static|not yet|is supported (?:for|only)|"
                          r"supported only", re.I)


def tolerance(dtype: str, err: float) -> tuple:
    rtol, atol = BASE_TOL.get(dtype, (0.0, 0.0))
    return rtol, max(atol, 2.0 * float(err)) if rtol else 0.0


def compare(want: np.ndarray, got: np.ndarray, err: float = 0.0) -> str:
    """'' when got matches want within the dtype's tolerance, else what differs."""
    want, got = np.asarray(want), np.asarray(got)
    if want.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.shape != got.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind not in "fc":  # exact, or within err steps (a quantize of inexact math)
        bad = np.abs(want.astype(np.int64) - got.astype(np.int64)) > err if err and \
            want.dtype.kind in "iu" else want != got
        worst = ""
    else:
        rtol, atol = tolerance(want.dtype.name, err)
        w, g = want.astype(np.float64), got.astype(np.float64)
        nan_w, nan_g = np.isnan(w), np.isnan(g)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(w - g)
            close = (diff <= atol + rtol * np.abs(w)) | (w == g)
        bad = (nan_w != nan_g) | (~close & ~nan_w)
        finite = ~nan_w & ~nan_g & np.isfinite(diff)
        worst = (f"; max abs diff {diff[finite].max():.3g} (atol {atol:.3g}, rtol {rtol:g})"
                 if finite.any() else "")
    if not bad.any():
        return ""
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())}/{bad.size} elements differ; first at {list(first)}: got "
            f"{got[first]!r}, expected {want[first]!r}{worst}")


def classify_error(err: BaseException, dynamic: bool = False) -> str:
    """UNSUPPORTED / REJECTED / CRASH for an exception relayjit raised on a valid model.
    With `dynamic` (the case's dynamic variant, whose static form converted), the frontend
    refusing a node by name is unsupported: a converter that needs static dims there."""
    from codegen.errors import CodegenError
    from compiler.errors import CompilerError, OpNotImplemented
    from compiler.frontend.onnx_ops.common import FrontendError
    if isinstance(err, OpNotImplemented) or (dynamic and isinstance(err, FrontendError)):
        return UNSUPPORTED
    if isinstance(err, (CompilerError, CodegenError)):
        return UNSUPPORTED if _UNSUPPORTED.search(str(err)) else REJECTED
    return CRASH


def describe_error(err: BaseException) -> str:
    tb = traceback.extract_tb(err.__traceback__)
    where = f" [{Path(tb[-1].filename).name}:{tb[-1].lineno}]" if tb else ""
    return f"{type(err).__name__}: {str(err)[:600]}{where}"


def run_onnxruntime(model, feeds: dict) -> list:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]


def run_relayjit(model, feeds: dict, opt_level: int) -> list:
    import runtime
    from compiler import relay, transform
    from runtime import graph_executor
    mod, params = relay.frontend.from_onnx(model)
    with transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target="llvm", params=params)
    module = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    if feeds:
        module.set_input(**feeds)
    module.run()
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


def _declared(model) -> list:
    from onnx import helper
    out = []
    for info in model.graph.output:
        t = info.type.tensor_type
        dims = tuple(d.dim_value for d in t.shape.dim) if t.HasField("shape") else None
        out.append((info.name, helper.tensor_dtype_to_np_dtype(t.elem_type).name, dims))
    return out


def check_outputs(outputs: list, want: list, names: list, errs: dict) -> str:
    if len(outputs) != len(want):
        return f"{len(outputs)} outputs, expected {len(want)}"
    for name, w, g in zip(names, want, outputs):
        problem = compare(w, g, errs.get(name, 0.0))
        if problem:
            return f"output {name!r}: {problem}"
    return ""


def evaluate(model, feeds: dict, levels=LEVELS, use_ort: bool = True,
             progress=lambda stage: None) -> dict:
    """The verdict on one case: {"status", "detail", "engines": {name: {...}}, "time"}.

    `progress(stage)` is called before each engine runs, so a parent process can tell which
    engine killed the worker; onnxruntime runs last (it has segfaulted on valid models).
    """
    from .generate import errors_of
    start = time.perf_counter()
    errs = errors_of(model)
    declared = _declared(model)
    names = [n for n, _, _ in declared]
    engines: dict = {}
    progress("reference")
    try:
        want = run_reference(model, feeds)
        engines["reference"] = {"status": PASS}
    except Exception as err:  # noqa: BLE001 - the reference failing is recorded, not raised
        return {"status": REF_ERROR, "detail": describe_error(err), "engines": engines,
                "time": time.perf_counter() - start}
    for (name, dtype, dims), w in zip(declared, want):
        if w.dtype.name != dtype or (dims is not None and tuple(w.shape) != dims):
            return {"status": INVALID, "detail": f"output {name!r}: the reference gives "
                    f"{w.shape} {w.dtype}, the model declares {dims} {dtype}",
                    "engines": engines, "time": time.perf_counter() - start}
    for level in levels:
        key = f"relayjit-O{level}" if isinstance(level, int) else f"relayjit-{level}"
        progress(key)
        try:
            with np.errstate(all="ignore"):
                got = run_relayjit(model, feeds, level) if isinstance(level, int) else \
                    run_relayjit_vm(model, feeds, dynamic=level == "vm-dynamic")
        except Exception as err:  # noqa: BLE001 - classified
            engines[key] = {"status": classify_error(err, level == "vm-dynamic"),
                            "detail": describe_error(err), "error_type": type(err).__name__}
            continue
        problem = check_outputs(got, want, names, errs)
        engines[key] = {"status": MISMATCH, "detail": problem} if problem else {"status": PASS}
    if use_ort:
        progress("onnxruntime")
        try:
            problem = check_outputs(run_onnxruntime(model, feeds), want, names, errs)
            engines["onnxruntime"] = ({"status": "disagrees", "detail": problem} if problem
                                      else {"status": PASS})
        except Exception as err:  # noqa: BLE001
            engines["onnxruntime"] = {"status": "error", "detail": describe_error(err)}
    result = verdict(engines, time.perf_counter() - start)
    if result["status"] == MISMATCH and engines.get("onnxruntime", {}).get("status") == \
            "disagrees":
        result["note"] = "onnxruntime disagrees with the reference too"
    return result


def verdict(engines: dict, elapsed: float) -> dict:
    """The worst relayjit failure over the engines; with none, pass when an engine ran the
    case and agreed with the reference (the others unsupported: the graph executor meeting
    run-time control flow, the frontend meeting a dynamic dim it cannot convert yet), else
    unsupported."""
    ours = {k: v for k, v in engines.items() if k.startswith("relayjit")}
    for rank_status in (CRASH, HANG, REJECTED, MISMATCH, PASS, UNSUPPORTED):
        hits = [(k, v) for k, v in ours.items() if v["status"] == rank_status]
        if hits:
            shown = hits if rank_status != PASS else \
                [(k, v) for k, v in ours.items() if v["status"] == UNSUPPORTED]
            detail = "; ".join(f"{k}: {v.get('detail', '')}" for k, v in shown)
            return {"status": rank_status, "detail": detail, "engines": engines,
                    "time": elapsed}
    return {"status": PASS, "detail": "", "engines": engines, "time": elapsed}
