"""`relayjit compile model.onnx -o model.rjit`: build an ONNX model and export it.

A model whose inputs all have static shapes (declared, or pinned with --shape) is built now
and exported as a graph module. A model with dynamic axes is exported as a dynamic artefact
(runtime.dynamic_module): the model with its build options, which `relayjit run`, `relayjit
serve` and compiler.load specialise per input shape as they meet them (each through the build
cache), since static kernels can only be built once the shapes are known.
"""
from __future__ import annotations

import os

from compiler.target import Target, cpu_target
from compiler.tools.specialise import onnx_signature
from runtime.dynamic_module import DynamicModule
from .common import Progress, check_writable, compile_model, load_onnx, note, parse_shapes
from .options import build_options, timing_option


def add_parser(sub) -> None:
    p = sub.add_parser("compile", help="compile an ONNX model to a .rjit file (a model with "
                                       "dynamic axes: an artefact specialised per shape when "
                                       "run)")
    p.add_argument("model", help="the ONNX model (.onnx)")
    p.add_argument("-o", "--output", help="the module file to write (default: the model's path "
                                          "with .rjit)")
    timing_option(p)
    build_options(p)
    p.set_defaults(func=command)


def command(args) -> int:
    model = load_onnx(args.model)
    out = args.output or os.path.splitext(args.model)[0] + ".rjit"
    check_writable(out, "--output")
    pins = parse_shapes(args.shape)
    inputs, _ = onnx_signature(model, pins)
    dynamic = [spec for spec in inputs if not spec.is_static]
    if dynamic:
        artefact = DynamicModule(model.SerializeToString(), "onnx", args.opt_level, args.target,
                                 cpu_target(Target(args.target)), pins)
        artefact.export_library(out)
        listed = ", ".join(f"{s.name} {s.shape_text()}" for s in dynamic)
        print(f"{args.model} has dynamic axes ({listed}): wrote {out} ({os.path.getsize(out)} "
              "bytes), the model and its build options; relayjit run/serve and compiler.load "
              "build it for each input shape they meet")
        if args.timing and not args.quiet:
            note("--timing: nothing was built (a dynamic model is built per shape when run)")
        return 0
    module, seconds = compile_model(model, {s.name: s.shape for s in inputs}, args.opt_level,
                                    Progress(not args.quiet), args.target)
    module.export_library(out)
    print(f"compiled {args.model} in {seconds:.2f} s -> {out} ({os.path.getsize(out)} bytes)")
    if args.timing and hasattr(module, "build_timing"):
        print(module.build_timing.table())
    return 0
