"""One call from a model file to numpy outputs, the way onnxruntime users work.

    sess = compiler.load("model.onnx")            # compiles once (kernels via the compile cache)
    probs, = sess.run(None, {"data": x})          # onnxruntime's form: a list, in output order
    probs = sess.run({"data": x})["prob"]         # or a dict by output name
    sess.get_inputs()[0].shape                    # (1, 3, 224, 224), or ('batch', 'sequence')

A model with dynamic axes (ONNX dim_param or unknown dims) runs at any valid shape; the
policy is `dynamic=`:

- "specialize" (the default): the first time a concrete input-shape signature is seen, the
  model is imported with those shapes and built with relay.build (static kernels, blocked
  layouts, the graph executor's native run loop: what a static model gets) and the executor
  is kept in a least-recently-used set of at most `max_specializations` (default 8);
  relay.build's build cache keeps the module on disk, so a new process meets a known shape
  warm. Programs the graph executor cannot run (a run-time If, a Loop, data-dependent
  shapes) are compiled per signature with relay.vm.compile instead.
- "vm": one relay.vm.compile of the model with its symbolic dims; the VM specialises its
  kernels per shape itself (relay.vm's compile hook).

A call whose shapes break the model's signature (a fixed dim that differs, a symbol such as
"batch" given two values, a wrong rank or dtype) is a ValueError naming the input, the
symbolic shape and the shape given, before anything is compiled (runtime.specialised).

A new shape is compiled before its call returns: nothing serves it symbolically meanwhile.
On this 2-core machine a compile competes with the run for the same cores, the first call
at a new shape already fits in the 2 s budget (benchmarks/models.py --dynamic), and a run
through the VM while compiling would be a slower second copy of every kernel to keep
correct; "vm" is the choice for workloads where every call has a new shape.

An exported module is loaded as it is: a graph module (static), a VM executable, or a
dynamic artefact (`relayjit compile` of a dynamic model: the ONNX model with the build
options, specialised here as above). ONNX outputs keep their graph names; an exported
static module's outputs are named output_0, output_1, ...
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import runtime
from compiler.errors import CompilerError
from compiler.target import cpu_target, resolve as resolve_target
from runtime.export import MAGIC
from runtime.factory import GraphExecutorFactoryModule
from runtime.dynamic_module import DynamicModule
from runtime.specialised import (DEFAULT_MAX_SPECIALIZATIONS, SpecialisedModel, TensorSpec,
                                 model_of, module_specs)
from .specialise import POLICIES, OnnxSpecialiser, model_from_bytes, onnx_signature

__all__ = ["InferenceSession", "TensorInfo", "load", "load_model", "is_exported_module",
           "read_onnx"]

TensorInfo = TensorSpec  # the name this module gave it first


def is_exported_module(path: str) -> bool:
    """Whether `path` starts like a module written by export_library."""
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


class InferenceSession:
    """A model ready to run; `run` takes and returns numpy arrays by name."""

    def __init__(self, path: str | os.PathLike, shape: Mapping[str, Sequence[int]] | None = None,
                 opt_level: int = 3, target: Any = "llvm", dynamic: str = "specialize",
                 max_specializations: int = DEFAULT_MAX_SPECIALIZATIONS) -> None:
        path = os.fspath(path)
        if os.path.isdir(path):
            raise CompilerError(f"{path} is a directory; expected an .onnx or .rjit file")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such model file; expected an .onnx or .rjit "
                                    "file")
        if dynamic not in POLICIES:
            raise ValueError(f"dynamic must be one of {list(POLICIES)}, got {dynamic!r}")
        self.path = path
        self.dynamic = dynamic
        if is_exported_module(path):
            self.model = _load_exported(path, shape, max_specializations)
        else:
            self.model = _onnx_model(read_onnx(path), shape, opt_level, target, dynamic,
                                     max_specializations)

    @property
    def factory(self) -> GraphExecutorFactoryModule | None:
        """The graph module of a static model (None while a dynamic one has none)."""
        modules = self.model.modules()
        return modules[-1] if len(modules) == 1 and \
            isinstance(modules[-1], GraphExecutorFactoryModule) else None

    def get_inputs(self) -> list[TensorSpec]:
        """The inputs to feed (bound params excluded); dynamic dims by name, or None."""
        return list(self.model.inputs)

    def get_outputs(self) -> list[TensorSpec]:
        """The outputs, in order."""
        return list(self.model.outputs)

    def run(self, output_names: Sequence[str] | Mapping[str, Any] | None,
            input_feed: Mapping[str, Any] | None = None) -> list[np.ndarray] | dict:
        """run(None | [names], feeds) -> list of arrays (onnxruntime's form);
        run(feeds) -> {output name: array}."""
        as_dict = input_feed is None and isinstance(output_names, Mapping)
        feeds = output_names if as_dict else input_feed
        names = [o.name for o in self.model.outputs]
        wanted = names if as_dict or output_names is None else list(output_names)
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise KeyError(f"run: unknown output(s) {unknown}; the model's outputs are {names}")
        results = dict(zip(names, self.model.run(feeds)))
        return {n: results[n] for n in wanted} if as_dict else [results[n] for n in wanted]

    def __repr__(self) -> str:
        return (f"InferenceSession({self.path!r}, inputs={self.model.inputs}, "
                f"outputs={self.model.outputs})")


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


def _onnx_model(model, shape, opt_level: int, target: Any, dynamic: str,
                max_specializations: int) -> SpecialisedModel:
    """A SpecialisedModel over an ONNX model; a static one is built now (as before dynamic
    shapes: errors at load), a dynamic one at each new shape."""
    inputs, outputs = onnx_signature(model, shape)
    specialiser = OnnxSpecialiser(model, opt_level, target)
    cpu = cpu_target(resolve_target(target))
    if dynamic == "vm":
        exe = specialiser.symbolic(shape)
        result = SpecialisedModel(inputs, outputs, lambda shapes: exe, max_specializations,
                                  per_shape=False, target=cpu)
        result.add((), exe)
        return result
    result = SpecialisedModel(inputs, outputs, specialiser, max_specializations, target=cpu)
    if all(spec.is_static for spec in inputs):
        signature = tuple(spec.shape for spec in inputs)
        result.add(signature, specialiser(dict(zip(result.names, signature))))
        result.outputs = _built_outputs(result.modules()[0], outputs)
    return result


def _built_outputs(module, declared: list[TensorSpec]) -> list[TensorSpec]:
    """Output specs with the shapes and dtypes a static graph module computes (the ONNX
    graph's declared outputs may lack them), named as `declared` names them."""
    if not isinstance(module, GraphExecutorFactoryModule):
        return declared
    built = module_specs(module)[1]
    if len(built) != len(declared):
        return built
    return [TensorSpec(d.name, b.shape, b.dtype) for d, b in zip(declared, built)]


def _load_exported(path: str, shape, max_specializations: int) -> SpecialisedModel:
    """A SpecialisedModel over a module written by export_library or `relayjit compile`."""
    module = runtime.load_module(path)
    if not isinstance(module, DynamicModule):
        return model_of(module, max_specializations, path)
    pins = {**module.shape, **dict(shape or {})}
    model = _onnx_model(model_from_bytes(module.source, path), pins, module.opt_level,
                        module.target, "specialize", max_specializations)
    model.target = module.target_info
    return model


def load_model(path: str | os.PathLike) -> SpecialisedModel:
    """The SpecialisedModel of a model file (what runtime.serving runs; a dynamic artefact
    included, which runtime.specialised.load_model alone cannot build)."""
    return InferenceSession(path).model


def load(path: str | os.PathLike, shape: Mapping[str, Sequence[int]] | None = None,
         opt_level: int = 3, target: Any = "llvm", dynamic: str = "specialize",
         max_specializations: int = DEFAULT_MAX_SPECIALIZATIONS) -> InferenceSession:
    """Compile (an .onnx file) or load (an exported .rjit module): an InferenceSession. A
    model with dynamic axes is compiled per input-shape signature as calls meet them (see
    the module docstring for `dynamic` and `max_specializations`)."""
    return InferenceSession(path, shape=shape, opt_level=opt_level, target=target,
                            dynamic=dynamic, max_specializations=max_specializations)
