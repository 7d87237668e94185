"""The model at the shapes of its inputs, for run, bench, profile and inspect.

The inputs come first: --input files, --shape pins and, for the rest, invented values whose
dynamic dims take a stated default (inputs.feeds). Their shapes are checked against the
model's signature (a fixed dim, a symbol given two values: the same error compiler.load
gives), then the module is built for exactly those shapes, as compiler.load builds a
specialisation: a graph module, or a VM program when the model has control flow. An exported
module runs as it is; a dynamic artefact (`relayjit compile` of a dynamic model) is
specialised with the options it was compiled with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import runtime
from compiler.tools.session import is_exported_module
from compiler.tools.specialise import model_from_bytes, onnx_signature
from runtime.dynamic_module import DynamicModule
from runtime.specialised import bind_signature, module_specs
from .common import (CliError, Progress, check_model_file, compile_model, load_onnx,
                     parse_shapes)
from .inputs import feeds

__all__ = ["Prepared", "prepare", "onnx_feeds"]


@dataclass
class Prepared:
    """A module ready for the given feeds."""

    module: Any  # runtime GraphExecutorFactoryModule or runtime.vm Executable
    model: Any  # the ONNX model when there is one (onnxruntime's reference), else None
    feeds: dict[str, np.ndarray]
    invented: list[str]
    output_names: list[str]  # may be empty (a VM program's: output_0, ... once it runs)
    compiled: bool  # built now (its build_timing says how)


def prepare(args) -> Prepared:
    """The module for args.model at the shapes of its inputs (see the module docstring)."""
    check_model_file(args.model)
    pins = parse_shapes(args.shape)
    if is_exported_module(args.model):
        module = runtime.load_module(args.model)
        if isinstance(module, DynamicModule):
            model = model_from_bytes(module.source, args.model)
            return _build(args, model, {**module.shape, **pins}, module.opt_level,
                          module.target)
        if pins:
            raise CliError(f"--shape: {args.model} is compiled for fixed shapes; --shape "
                           "applies to ONNX models and dynamic artefacts")
        inputs, outputs = module_specs(module)
        values, invented = feeds(args, inputs)
        bind_signature(inputs, values)
        return Prepared(module, None, values, invented, [o.name for o in outputs], False)
    return _build(args, load_onnx(args.model), pins, args.opt_level, args.target)


def onnx_feeds(args, model, pins, announce_static: bool = True
               ) -> tuple[dict[str, np.ndarray], list[str]]:
    """(feeds, invented names) for an ONNX model, checked against its signature; inputs of
    static shape are invented silently unless announce_static."""
    inputs, _ = onnx_signature(model, pins)
    values, invented = feeds(args, inputs,
                             announce_static or not all(s.is_static for s in inputs))
    bind_signature(inputs, values)
    return values, invented


def _build(args, model, pins, opt_level: int, target: str) -> Prepared:
    values, invented = onnx_feeds(args, model, pins)
    shapes = {name: np.shape(value) for name, value in values.items()}
    module, _ = compile_model(model, shapes, opt_level, Progress(not args.quiet), target)
    names = [o.name for o in model.graph.output]
    return Prepared(module, model, values, invented, names, True)
