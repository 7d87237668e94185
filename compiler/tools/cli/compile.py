"""`relayjit compile model.onnx -o model.rjit`: build an ONNX model and export it.

A model whose inputs all have static shapes (declared, or pinned with --shape) is built now
and exported as a graph module; with --quantize int8 --calibration DIR it is quantized first
(relay.quantize) and the accuracy change on the calibration data reported. A model with
dynamic axes is exported as a dynamic artefact (runtime.dynamic_module): the model with its
build options, which `relayjit run`, `relayjit serve` and compiler.load specialise per input
shape as they meet them (each through the build cache), since static kernels can only be
built once the shapes are known.
"""
from __future__ import annotations

import os

from compiler.driver.calibrate import CALIBRATE_MODES, WEIGHT_SCALES
from compiler.target import Target, cpu_target
from compiler.tools.specialise import onnx_signature
from runtime.dynamic_module import DynamicModule
from .calibration import accuracy_report, quantize_model
from .common import CliError, Progress, check_writable, compile_model, load_onnx, note, parse_shapes
from .options import build_options, timing_option


def add_parser(sub) -> None:
    p = sub.add_parser("compile", help="compile an ONNX model to a .rjit file (a model with "
                                       "dynamic axes: an artefact specialised per shape when "
                                       "run)")
    p.add_argument("model", help="the ONNX model (.onnx)")
    p.add_argument("-o", "--output", help="the module file to write (default: the model's path "
                                          "with .rjit)")
    p.add_argument("--quantize", choices=["int8"],
                   help="quantize the float model to int8 QNN ops (relay.quantize) on the "
                        "--calibration inputs, and report the accuracy change on them")
    p.add_argument("--calibration", metavar="DIR",
                   help="a folder of calibration inputs: one .npz per sample (arrays by input "
                        "name), or one .npy per sample for a one-input model")
    p.add_argument("--calibrate-mode", default="max", choices=CALIBRATE_MODES,
                   help="how activation ranges are chosen (TVM's calibrate_mode; max is the "
                        "largest magnitude seen; default max)")
    p.add_argument("--weight-scale", default="max", choices=WEIGHT_SCALES,
                   help="weight ranges: the largest magnitude, or it rounded up to a power of "
                        "two (default max)")
    timing_option(p)
    build_options(p)
    p.set_defaults(func=command)


def command(args) -> int:
    model = load_onnx(args.model)
    out = args.output or os.path.splitext(args.model)[0] + ".rjit"
    check_writable(out, "--output")
    if args.calibration and not args.quantize:
        raise CliError("--calibration is for --quantize int8")
    if args.quantize and not args.calibration:
        raise CliError("--quantize int8 needs --calibration DIR (the inputs to calibrate "
                       "the activation ranges on)")
    pins = parse_shapes(args.shape)
    inputs, _ = onnx_signature(model, pins)
    dynamic = [spec for spec in inputs if not spec.is_static]
    if dynamic:
        listed = ", ".join(f"{s.name} {s.shape_text()}" for s in dynamic)
        if args.quantize:
            raise CliError(f"--quantize needs static input shapes; {args.model} has dynamic "
                           f"axes ({listed}): pin them with --shape")
        artefact = DynamicModule(model.SerializeToString(), "onnx", args.opt_level, args.target,
                                 cpu_target(Target(args.target)), pins)
        artefact.export_library(out)
        print(f"{args.model} has dynamic axes ({listed}): wrote {out} ({os.path.getsize(out)} "
              "bytes), the model and its build options; relayjit run/serve and compiler.load "
              "build it for each input shape they meet")
        if args.timing and not args.quiet:
            note("--timing: nothing was built (a dynamic model is built per shape when run)")
        return 0
    shapes = {s.name: s.shape for s in inputs}
    report = None
    if args.quantize:
        if not os.path.isdir(args.calibration):
            raise CliError(f"bad --calibration {args.calibration!r}: not a directory of "
                           ".npy/.npz inputs")
        factory, float_factory, samples, seconds = quantize_model(
            model, shapes, args.opt_level, Progress(not args.quiet),
            args.target, args.calibration, args.calibrate_mode, args.weight_scale)
        report = accuracy_report(factory, float_factory, samples)
    else:
        factory, seconds = compile_model(model, shapes, args.opt_level,
                                         Progress(not args.quiet), args.target)
    factory.export_library(out)
    print(f"compiled {args.model} in {seconds:.2f} s -> {out} ({os.path.getsize(out)} bytes)")
    if report:
        print(report)
    if args.timing and hasattr(factory, "build_timing"):
        print(factory.build_timing.table())
    return 0
