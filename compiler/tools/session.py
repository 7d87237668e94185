"""One call from a model file to numpy outputs, the way onnxruntime users work.

    sess = compiler.load("model.onnx")            # compiles once (kernels via the compile cache)
    probs, = sess.run(None, {"data": x})          # onnxruntime's form: a list, in output order
    probs = sess.run({"data": x})["prob"]         # or a dict by output name
    sess.get_inputs()[0].shape                    # (1, 3, 224, 224)

An ONNX file is imported and built with relay.build (whose kernel objects are cached on disk
by codegen.cache, so loading the same model again mostly skips LLVM); an exported .rjit
module is loaded as it is. ONNX outputs keep their graph names; an exported module's
outputs are named output_0, output_1, ...
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import runtime
from compiler.driver.build import build
from compiler.errors import CompilerError
from compiler.frontend.onnx import from_onnx
from compiler.transform import PassContext
from runtime.export import MAGIC
from runtime.graph_executor import GraphModule

__all__ = ["InferenceSession", "TensorInfo", "load", "is_exported_module", "read_onnx"]


@dataclass(frozen=True)
class TensorInfo:
    """An input's or output's name, static shape and dtype (onnxruntime's NodeArg)."""

    name: str
    shape: tuple[int, ...]
    dtype: str


def is_exported_module(path: str) -> bool:
    """Whether `path` starts like a module written by export_library."""
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


class InferenceSession:
    """A compiled model ready to run; `run` takes and returns numpy arrays by name."""

    def __init__(self, path: str | os.PathLike, shape: Mapping[str, Sequence[int]] | None = None,
                 opt_level: int = 3, target: Any = "llvm") -> None:
        path = os.fspath(path)
        if os.path.isdir(path):
            raise CompilerError(f"{path} is a directory; expected an .onnx or .rjit file")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such model file: {path}")
        self.path = path
        if is_exported_module(path):
            self.factory = runtime.load_module(path)
            onnx_outputs = None
        else:
            self.factory, onnx_outputs = _build_onnx(path, shape, opt_level, target)
        self._gmod = GraphModule(self.factory["default"](runtime.cpu()))
        shapes, dtypes = self._gmod.get_input_info()
        self._inputs = [TensorInfo(n, tuple(shapes[n]), dtypes[n]) for n in shapes]
        plan = self._gmod.module.plan
        names = onnx_outputs or [f"output_{i}" for i in range(len(plan.outputs))]
        self._outputs = [TensorInfo(name, tuple(plan.shapes[e]), plan.dtypes[e])
                         for name, e in zip(names, plan.outputs)]

    def get_inputs(self) -> list[TensorInfo]:
        """The inputs to feed (bound params excluded)."""
        return list(self._inputs)

    def get_outputs(self) -> list[TensorInfo]:
        """The outputs, in order."""
        return list(self._outputs)

    def run(self, output_names: Sequence[str] | Mapping[str, Any] | None,
            input_feed: Mapping[str, Any] | None = None) -> list[np.ndarray] | dict:
        """run(None | [names], feeds) -> list of arrays (onnxruntime's form);
        run(feeds) -> {output name: array}."""
        as_dict = input_feed is None and isinstance(output_names, Mapping)
        feeds = output_names if as_dict else input_feed
        if not isinstance(feeds, Mapping):
            raise TypeError(f"run: expected the inputs as a dict of name -> array, got "
                            f"{type(feeds).__name__}")
        self._feed(feeds)
        self._gmod.run()
        names = [o.name for o in self._outputs]
        wanted = names if as_dict or output_names is None else list(output_names)
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise KeyError(f"run: unknown output(s) {unknown}; the model's outputs are {names}")
        results = {n: self._gmod.get_output(names.index(n)).numpy() for n in wanted}
        return results if as_dict else [results[n] for n in wanted]

    def _feed(self, feeds: Mapping[str, Any]) -> None:
        expected = {i.name for i in self._inputs}
        unknown = sorted(set(feeds) - expected)
        if unknown:
            raise KeyError(f"run: unknown input(s) {unknown}; the model's inputs are "
                           f"{sorted(expected)}")
        missing = sorted(expected - set(feeds))
        if missing:
            raise ValueError(f"run: missing input(s) {missing}; the model's inputs are "
                             f"{[(i.name, i.shape, i.dtype) for i in self._inputs]}")
        for name, value in feeds.items():
            self._gmod.set_input(name, value if isinstance(value, runtime.NDArray)
                                 else np.asarray(value))

    def __repr__(self) -> str:
        return (f"InferenceSession({self.path!r}, inputs={self._inputs}, "
                f"outputs={self._outputs})")


def read_onnx(path: str):
    """The ONNX model in `path`; CompilerError naming the file when it is not one."""
    import onnx  # as in the frontend: only models from files pay for importing onnx
    try:
        model = onnx.load(path)
    except Exception as err:  # protobuf raises several unrelated types
        raise CompilerError(f"{path} is not an ONNX model ({type(err).__name__}: {err})") \
            from None
    if not model.graph.node:
        raise CompilerError(f"{path} is not an ONNX model (it has no graph nodes)")
    return model


def _build_onnx(path: str, shape, opt_level: int, target: Any):
    """(factory, output names) of an ONNX file built now."""
    model = read_onnx(path)
    mod, params = from_onnx(model, shape=dict(shape) if shape else None)
    with PassContext(opt_level=opt_level):
        factory = build(mod, target=target, params=params)
    return factory, [o.name for o in model.graph.output]


def load(path: str | os.PathLike, shape: Mapping[str, Sequence[int]] | None = None,
         opt_level: int = 3, target: Any = "llvm") -> InferenceSession:
    """Compile (an .onnx file) or load (an exported .rjit module) once: an InferenceSession."""
    return InferenceSession(path, shape=shape, opt_level=opt_level, target=target)
