"""What the subcommands share: one-line errors, loading and compiling a model, build
progress on stderr, and summaries of output arrays."""
from __future__ import annotations

import dataclasses
import os
import sys
import time

import numpy as np

import runtime
from compiler import relay, transform
from compiler.driver.build import build_progress
from compiler.errors import CompilerError
from compiler.tools.session import is_exported_module, read_onnx
from compiler.tools.specialise import needs_vm
from runtime import graph_executor


class CliError(Exception):
    """A user mistake reported as one line, without a traceback."""


def note(message: str) -> None:
    """A one-line notice on stderr (stdout may be JSON)."""
    print(f"relayjit: {message}", file=sys.stderr)


def parse_shapes(items: list[str] | None) -> dict[str, tuple]:
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


def check_model_file(path: str) -> None:
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory; expected an ONNX model file (.onnx) or a "
                       "compiled relayjit module (.rjit)")
    if not os.path.isfile(path):
        raise CliError(f"no such file: {path}")


def load_onnx(path: str):
    check_model_file(path)
    if is_exported_module(path):
        raise CliError(f"{path} is a compiled relayjit module; this command needs the ONNX model")
    try:
        return read_onnx(path)
    except CompilerError as err:
        raise CliError(str(err)) from None


def check_writable(path: str, option: str) -> None:
    """Refuse an output path whose directory is missing before any work is done."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CliError(f"bad {option} {path!r}: it is a directory; give a file path")
    if not os.path.isdir(folder):
        problem = "is not a directory" if os.path.exists(folder) else "does not exist"
        raise CliError(f"bad {option} {path!r}: {folder} {problem}")
    if not os.access(folder, os.W_OK):
        raise CliError(f"bad {option} {path!r}: the directory {folder} is not writable")


class Progress:
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


def compile_model(model, shapes, opt_level: int, progress: Progress, target: str = "llvm"):
    """(module, seconds) for an ONNX model at `shapes`: a graph factory (its build_timing
    includes the frontend), or a VM Executable when the program needs the VM."""
    start = time.perf_counter()
    progress("importing ONNX graph")
    mod, params = relay.frontend.from_onnx(model, shape=shapes or None)
    frontend = time.perf_counter() - start
    with transform.PassContext(opt_level=opt_level), build_progress(progress, detail=progress.tty):
        if needs_vm(mod):
            module = relay.vm.compile(mod, target=target, params=params)
        else:
            module = relay.build(mod, target=target, params=params)
            module.build_timing = dataclasses.replace(module.build_timing, frontend=frontend)
    seconds = time.perf_counter() - start
    progress.done(seconds)
    return module, seconds


def executor(factory) -> graph_executor.GraphModule:
    return graph_executor.GraphModule(factory["default"](runtime.cpu()))


def stats(array: np.ndarray) -> dict:
    info = {"shape": list(array.shape), "dtype": str(array.dtype)}
    if array.size and array.dtype.kind in "fiub":
        data = array.astype(np.float64)
        info.update(min=float(data.min()), max=float(data.max()), mean=float(data.mean()))
    return info


def summary(name: str, array: np.ndarray) -> str:
    info = stats(array)
    text = f"{name}: shape={tuple(array.shape)} dtype={array.dtype}"
    if "min" in info:
        text += f" min={info['min']:.6g} max={info['max']:.6g} mean={info['mean']:.6g}"
        if array.ndim >= 1 and array.dtype.kind == "f":
            text += f" argmax={int(np.argmax(array.reshape(-1)))}"
    return text
