"""`relayjit inspect model.onnx`: inputs, outputs, ops and fused groups of a model; its IR
after chosen passes, its kernels (loop IR, LLVM IR, assembly) and a picture of the fused
graph (of every function of a program with control flow, which runs on the Relay VM)."""
from __future__ import annotations

import json
import os
from collections import Counter

import runtime
from codegen import jit
from codegen.printer import primfunc_str
from compiler import relay, transform
from compiler.backend.graph_codegen import GraphCodegen
from compiler.driver.build import build_target, lower_module, optimize
from compiler.ir.expr import Call, Function, Op
from compiler.ir.traversal import post_order
from compiler.passes.bind_params import bind_params_by_name
from compiler.target import Target
from compiler.backend.vm.kernels import module_kernels
from compiler.tools.program_graph import draw_program
from compiler.tools.specialise import needs_vm
from compiler.tools.visualize import draw_graph, require_layout_library
from compiler.transform import PassInstrument
from runtime import debug_executor
from runtime.vm import VirtualMachineProfiler
from .common import CliError, Progress, check_writable, compile_model, load_onnx, parse_shapes
from .prepare import onnx_feeds
from .options import build_options, input_option, json_option


def add_parser(sub) -> None:
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
    input_option(p, "with --profile: ")
    json_option(p, "model, opset, inputs, outputs [{name, shape}], onnx_ops, fused_groups, "
                   "num_fused_groups, graph (when drawn)")
    build_options(p)
    p.set_defaults(func=command)


def _dims(value) -> list:
    return [d.dim_value or d.dim_param for d in value.type.tensor_type.shape.dim]


def command(args) -> int:
    if args.json and (args.print_ir or args.print_ir_after or args.dump):
        raise CliError("--json cannot be combined with --print-ir, --print-ir-after or --dump "
                       "(they print text)")
    if args.profile and not args.graph:
        raise CliError("--profile shades the boxes of the --graph picture; give --graph "
                       "FILE.svg too")
    if args.graph:
        check_writable(args.graph, "--graph")
        require_layout_library()
    model = load_onnx(args.model)
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
    # a dynamic model is inspected at one specialisation: the shapes of --input, --shape
    # and the stated defaults
    values, _ = onnx_feeds(args, model, parse_shapes(args.shape), announce_static=args.profile)
    shapes = {name: value.shape for name, value in values.items()}
    mod, params = relay.frontend.from_onnx(model, shape=shapes)
    mod["main"] = bind_params_by_name(mod["main"], params)
    printer = _PrintIR(args.print_ir_after if not args.print_ir else None)
    instruments = [printer] if args.print_ir or args.print_ir_after else []
    ctx = transform.PassContext(opt_level=args.opt_level, instruments=instruments)
    with ctx, build_target(Target(args.target)) as options:
        mod = optimize(mod)
    missing = sorted(set(args.print_ir_after or ()) - printer.ran)
    if missing:
        raise CliError(f"bad --print-ir-after {missing[0]!r}: no such pass ran; the passes that "
                       f"ran are {sorted(printer.ran)}")
    groups = Counter(_group_name(f) for func in mod.functions.values()
                     for f in _primitive_functions(func))
    info["fused_groups"] = dict(groups.most_common())
    info["num_fused_groups"] = sum(groups.values())
    vm_program = needs_vm(mod)  # control flow: the kernels as relay.vm.compile makes them
    with build_target(Target(args.target), options):  # the kernels as relay.build makes them
        kernel_names, prim_funcs = (None, None) if not (args.dump or args.graph) else \
            module_kernels(mod, options) if vm_program else \
            lower_module(mod["main"], options=options)
        dump = _dump(prim_funcs, args.dump, options) if args.dump else None
    if args.graph:
        info["graph"] = args.graph
        if vm_program:
            _write_program_graph(args, mod, kernel_names, model, values)
        else:
            _write_graph(args, mod, kernel_names, model, values)
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


def _write_graph(args, mod, kernel_names, model, values) -> None:
    """--graph: the fused graph as SVG; with --profile, built, run and timed first."""
    node_times = None
    if args.profile:
        shapes = {name: value.shape for name, value in values.items()}
        factory, _ = compile_model(model, shapes, args.opt_level, Progress(not args.quiet))
        gmod = debug_executor.GraphModuleDebug(factory["default"](runtime.cpu()))
        report = gmod.profile(repeat=5, **values)
        node_times = {n.name: n.median for n in report.nodes}
        graph_json, params = factory.get_graph_json(), factory.get_params()
    else:
        result = GraphCodegen(mod["main"], kernel_names).run()
        graph_json, params = result.graph_json, result.params
    svg = draw_graph(graph_json, params, node_times, title=os.path.basename(args.model))
    with open(args.graph, "w") as f:
        f.write(svg)


def _write_program_graph(args, mod, kernel_of, model, values) -> None:
    """--graph of a program with control flow (the Relay VM's): every global function, its
    kernels shaded by their time in one VM profile with --profile."""
    kernel_times = None
    if args.profile:
        shapes = {name: value.shape for name, value in values.items()}
        exe, _ = compile_model(model, shapes, args.opt_level, Progress(not args.quiet))
        report = VirtualMachineProfiler(exe, runtime.cpu()).profile(repeat=5, **values)
        kernel_times = {}
        for n in report.nodes:  # a kernel's time at all its shapes
            kernel_times[n.kernel] = kernel_times.get(n.kernel, 0.0) + n.median
    svg = draw_program(mod, kernel_of, kernel_times, title=os.path.basename(args.model))
    with open(args.graph, "w") as f:
        f.write(svg)


def _dump(prim_funcs, kind: str, options) -> str:
    """The kernels as loop-nest IR, optimised LLVM IR or host assembly (TVM's get_source)."""
    if kind == "tir":
        return "\n\n".join(primfunc_str(f) for f in prim_funcs)
    if kind == "llvm":
        return jit.get_llvm_ir(prim_funcs, options=options)
    return jit.get_assembly(prim_funcs, options=options)


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
