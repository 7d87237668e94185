"""`relayjit compile model.onnx -o model.rjit`: build an ONNX model and export it."""
from __future__ import annotations

import os

from .common import Progress, check_writable, compile_model, load_onnx, parse_shapes
from .options import build_options, timing_option


def add_parser(sub) -> None:
    p = sub.add_parser("compile", help="compile an ONNX model to a .rjit file")
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
    factory, seconds = compile_model(model, parse_shapes(args.shape), args.opt_level,
                                     Progress(not args.quiet), args.target)
    factory.export_library(out)
    print(f"compiled {args.model} in {seconds:.2f} s -> {out} ({os.path.getsize(out)} bytes)")
    if args.timing:
        print(factory.build_timing.table())
    return 0
