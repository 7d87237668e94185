"""relay.build: optimise a Relay program, lower its fused functions, JIT them, emit the graph.

The driver (TVM's relay.build with the graph executor):

1. Accept an IRModule or a Function; bind `params` by name into `main`.
2. Under the current PassContext run InferType, SimplifyInference,
   FakeQuantizationToInteger (QDQ regions as integer QNN ops; config
   relayjit.fake_quantization_to_integer turns it off), FoldScaleAxis,
   AlterOpLayout, PackConstantWeights (constant weights packed for the schedules from
   opt_level 2 on), FoldConstant, EliminateCommonSubexpr, FoldTransposeIntoBatchMatmul,
   FuseLayerNorm, FuseOps, InlineQuantizationScalars, InferType (each gated by its
   opt_level).
3. Every Primitive function called from `main` is lowered by the backend's
   lower_primitive_function to a codegen PrimFunc (tuple parameters are flattened first).
   Structurally equal functions share one kernel; names read like TVM's
   (`tvmgen_default_fused_nn_conv2d_add_nn_relu`, uniquified with `_1`, `_2`...).
   Reshape-only functions become "__nop" and concatenations of whole byte runs "__concat"
   (graph_codegen lays their inputs out inside their output); neither compiles a kernel.
4. All kernels compile into one library (codegen.jit.build_library), whose object code is
   cached in memory and on disk (codegen.cache) by the kernels' name-free structural key.
5. graph_codegen plans memory and writes the graph JSON; constants become params p0, p1...

The result is a runtime GraphExecutorFactoryModule; its `memory_stats` attribute reports the
planned storage (intermediate_bytes is the peak intermediate memory of the static plan), its
`build_timing` attribute where the time went (compiler.driver.build_timing.BuildTiming: seconds per
pass and per compile stage, kernel counts, compile-cache outcomes; print it for a table).

Progress: within `with build_progress(report):` the build calls report(message) at each
stage (each pass, lowering, LLVM, memory planning) and, unless detail=False, for each fused
function it lowers.
"""
from __future__ import annotations

import gc
import os
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Mapping

from codegen import cache as disk_cache
from codegen import jit
from codegen.compile_stats import record_compile_stats
from codegen.options import VECTOR_WIDTHS, CodegenOptions
from codegen.parallel import ParallelPolicy
from compiler.backend.graph_codegen import CONCAT, NOP, GraphCodegen, function_calls
from compiler.backend.kernel_table import KernelTable, kernel_name_for
from compiler.driver import build_cache
from compiler.driver.build_timing import PipelineInstrument, TimingRecorder
from compiler.driver.executor_runtime import check_executor_runtime
from compiler.errors import CompilerError
from compiler.ir.expr import Constant, Function
from compiler.ir.module import IRModule
from compiler.ir.type_infer import infer_module
from compiler.ir.types import is_dynamic_type
from compiler.passes.alter_op_layout import AlterOpLayout, PackConstantWeights
from compiler.passes.bind_params import bind_params_by_name
from compiler.passes.convert_blocked_layout import (BLOCKED_LAYOUT, BLOCKED_LAYOUT_GUARD,
                                                    ConvertBlockedLayout)
from compiler.passes.dynamic_to_static import DynamicToStatic, has_dyn_ops
from compiler.passes.eliminate_common_subexpr import EliminateCommonSubexpr
from compiler.passes.fake_quantization_to_integer import FakeQuantizationToInteger
from compiler.passes.fold_constant import FoldConstant
from compiler.passes.fold_scale_axis import FoldScaleAxis
from compiler.passes.fold_batch_matmul_axes import FoldTransposeIntoBatchMatmul
from compiler.passes.fuse_conv_pool import FuseConvMaxPool
from compiler.passes.fuse_layer_norm import FuseLayerNorm
from compiler.passes.fuse_ops import FuseOps
from compiler.passes.inline_quantization_scalars import InlineQuantizationScalars
from compiler.passes.simplify_inference import SimplifyInference
from compiler.target import Target, cpu_target, resolve as resolve_target
from compiler.transform import PassContext, Sequential, register_pass_config
from compiler.transform.pass_infra import InferType
from runtime import threadpool
from runtime.factory import GraphExecutorFactoryModule

__all__ = ["build", "optimize", "lower_module", "kernel_name_for", "build_progress",
           "codegen_options_for", "build_target", "current_options", "cpu_target"]

_PROGRESS: ContextVar[tuple[Callable[[str], None], bool] | None] = \
    ContextVar("build_progress", default=None)


@contextmanager
def build_progress(report: Callable[[str], None], detail: bool = True):
    """Within this block, relay.build reports each stage (and, with detail, each fused
    function it lowers) to `report(message)`."""
    token = _PROGRESS.set((report, detail))
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _report(message: str, detail: bool = False) -> None:
    progress = _PROGRESS.get()
    if progress is not None and (progress[1] or not detail):
        progress[0](message)


def _stage_reporter() -> Callable[[str], None] | None:
    progress = _PROGRESS.get()
    return progress[0] if progress is not None else None


# PassContext(config={"relayjit.disable_disk_cache": True}): compile without the persistent
# compile cache (codegen.cache; RELAYJIT_CACHE_DIR="" turns it off for the whole process).
DISABLE_DISK_CACHE = "relayjit.disable_disk_cache"


register_pass_config(DISABLE_DISK_CACHE, False)
# PassContext(config={"relayjit.blocked_layout": False}): activations stay NCHW between packed
# convs (passes/convert_blocked_layout.py carries them in NCHW<x>c)
register_pass_config(BLOCKED_LAYOUT, True)
# PassContext(config={"relayjit.blocked_layout_guard": {"max_transform_elements_per_flop":
# 1.0}}): fields of ConvertBlockedLayout's BlockedLayoutGuard, given instead of its defaults
register_pass_config(BLOCKED_LAYOUT_GUARD, None)
# PassContext(config={"relayjit.schedule_config": {"conv2d_nchw.direct": {"pixel_major":
# False}}}): fields of the named implementations' configurations, given instead of their
# default (compiler.op.strategy; tests and A/B measurements)
SCHEDULE_CONFIG = "relayjit.schedule_config"
register_pass_config(SCHEDULE_CONFIG, None)
# PassContext(config={"relayjit.fake_quantization_to_integer": False}): keep QDQ regions
# (dequantize -> float ops -> quantize) in float instead of rewriting them as integer QNN ops
FAKE_QUANTIZATION_TO_INTEGER = "relayjit.fake_quantization_to_integer"
register_pass_config(FAKE_QUANTIZATION_TO_INTEGER, True)
# The environment overrides relay.build reads (here, once a build; nothing below does):
# micro-kernel vector width (8 or 16 floats; default: the target CPU's) and kernel families
VECTOR_WIDTH_ENV = "RELAYJIT_VECTOR_WIDTH"
FAMILIES_ENV = "RELAYJIT_KERNEL_FAMILIES"
# TVM's PassContext(config={"tir.disable_vectorize": True}): no vector code
# (CodegenOptions.vectorize False)
DISABLE_VECTORIZE = "tir.disable_vectorize"


def codegen_options_for(target: Target) -> CodegenOptions:
    """What a build under `target` and the current PassContext compiles for: the target's CPU
    (cpu_target), $RELAYJIT_VECTOR_WIDTH, $RELAYJIT_KERNEL_FAMILIES (0: off), the config's
    relayjit.schedule_config overrides and tir.disable_vectorize, and the thread pool's
    count now (runtime.threadpool, from $RELAYJIT_NUM_THREADS): the parallel split it aims
    for (ParallelPolicy.pool_threads)."""
    width = os.environ.get(VECTOR_WIDTH_ENV, "").strip()
    if width and width not in tuple(map(str, VECTOR_WIDTHS)):
        raise CompilerError(f"environment variable {VECTOR_WIDTH_ENV} must be one of "
                            f"{', '.join(map(str, VECTOR_WIDTHS))} (floats per micro-kernel "
                            f"vector), got {width!r}")
    families = os.environ.get(FAMILIES_ENV, "1").strip()
    if families not in ("0", "1"):
        raise CompilerError(f"environment variable {FAMILIES_ENV} must be 0 or 1, got "
                            f"{families!r}")
    ctx = PassContext.current()
    overrides = ctx.get_config(SCHEDULE_CONFIG, None) or {}
    try:
        return CodegenOptions.for_cpu(cpu_target(target), int(width) if width else None,
                                      families == "1", overrides,
                                      ParallelPolicy(pool_threads=threadpool.get_num_threads()),
                                      vectorize=not ctx.get_config(DISABLE_VECTORIZE))
    except TypeError as err:
        raise CompilerError(f"PassContext config {SCHEDULE_CONFIG!r}: {err}") from None


def current_options() -> CodegenOptions:
    """The current target's CodegenOptions (entered by relay.build or build_target), else
    codegen_options_for the current target or "llvm"."""
    current = Target.current()
    if current is not None and current.codegen is not None:
        return current.codegen
    return codegen_options_for(resolve_target(current))


@contextmanager
def build_target(target: Target, options: CodegenOptions | None = None):
    """Enter `target` carrying the build's CodegenOptions (codegen_options_for, unless given),
    as relay.build does around its passes and lowering; yields the options."""
    options = codegen_options_for(target) if options is None else options
    with target.with_codegen_options(options):
        yield options


def _to_module(mod_or_func: Any) -> IRModule:
    if isinstance(mod_or_func, IRModule):
        return mod_or_func.shallow_copy()
    if isinstance(mod_or_func, Function):
        return IRModule.from_expr(mod_or_func)
    raise TypeError(f"relay.build expects an IRModule or a relay Function, got "
                    f"{type(mod_or_func).__name__}")


def optimize(mod: IRModule, timing: TimingRecorder | None = None) -> IRModule:
    """The build pipeline under the current PassContext (TVM's OptimizeImpl, graph path), for
    the current target (its CodegenOptions; outside relay.build, build_target's resolution of
    Target.current() or "llvm").

    Each pass is timed (into `timing`, when given) and announced to build_progress.
    """
    current = Target.current()
    if current is None or current.codegen is None:
        with build_target(resolve_target(current)):
            return optimize(mod, timing)
    seq = _pipeline()
    ctx = PassContext.current()
    enabled = [p for p in seq.passes if ctx.pass_enabled(p.info)]
    with record_compile_stats() as compiled:  # FoldConstant's kernels
        instrument = PipelineInstrument(enabled, _stage_reporter(), compiled)
        # The pipeline runs under a copy of the context with our instrument added. The copy
        # is never entered: entering it would enter the caller's instruments a second time,
        # and their exit would reset them (a PassTimingInstrument would lose its figures).
        run_ctx = PassContext(opt_level=ctx.opt_level, required_pass=ctx.required_pass,
                              disabled_pass=ctx.disabled_pass, config=ctx.config,
                              instruments=[*ctx.instruments, instrument], trace=ctx.trace)
        mod = seq._run(mod, run_ctx)
    if timing is not None:
        for stage in instrument.stages():
            timing.add(stage)
        timing.constant_kernels = compiled
    return mod


def _pipeline() -> Sequential:
    """relay.build's passes, in order (each gated by its opt_level)."""
    fq2i = [FakeQuantizationToInteger()] * bool(
        PassContext.current().get_config(FAKE_QUANTIZATION_TO_INTEGER, True))
    return Sequential([InferType(), SimplifyInference(), *fq2i, FoldScaleAxis(), AlterOpLayout(),
                       PackConstantWeights(), ConvertBlockedLayout(), FoldConstant(),
                       EliminateCommonSubexpr(), FoldTransposeIntoBatchMatmul(),
                       FuseLayerNorm(), FuseConvMaxPool(), FuseOps(),
                       InlineQuantizationScalars(), InferType()],
                      name="relay.build")


def lower_module(main: Function, mod_name: str = "default",
                 options: CodegenOptions | None = None) -> tuple[dict, list]:
    """Lower every primitive function main calls: ({id(func): kernel name}, [PrimFunc]), for
    `options` (default: current_options())."""
    table = KernelTable(mod_name, options if options is not None else current_options())
    calls = function_calls(main)
    _report(f"lowering {len(calls)} fused function calls")
    for i, (_, func) in enumerate(calls):
        if not func.is_primitive:
            raise CompilerError("relay.build: main calls a non-primitive function (a loop or "
                                "recursion: run-time control flow), which the graph executor "
                                "does not support; compile it with relay.vm.compile")
        _report(f"lowering fused functions {i + 1}/{len(calls)}", detail=True)
        table.add(func)
    return table.names, table.prim_funcs


def build(ir_mod: Any, target: Any = None, target_host: Any = None,
          params: Mapping[str, Any] | None = None, mod_name: str = "default",
          executor: Any = None, runtime: Any = None):
    """Compile a Relay module or function for the target's CPU; returns a factory module.

    `target` is a Target or anything Target() takes (None: Target.current(), else "llvm");
    the build runs with it as Target.current() and the factory keeps it as `.target`."""
    check_executor_runtime(executor, runtime)
    with _collector_paused():
        return _build(ir_mod, target, target_host, params, mod_name)


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off for the build: a build allocates millions of
    short-lived IR and LLVM-text objects, and the collector's passes over them took 6-8% of a
    cold ResNet-50 build's CPU time. Cycles the build leaves are collected once it is back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def refuse_dynamic(main: Function) -> None:
    """The graph executor runs static shapes only: a clear error for a model with Any dims."""
    ret = main.checked_type.ret_type
    dynamic = [f"{p.name_hint!r} {p.checked_type}" for p in main.params
               if is_dynamic_type(p.checked_type)]
    if dynamic or is_dynamic_type(ret):
        what = f"inputs {', '.join(dynamic)}" if dynamic else f"output type {ret}"
        raise CompilerError(f"relay.build: the model has dynamic shapes ({what}); relay.build "
                            "makes a graph-executor module, which needs static shapes. Run it "
                            "on the VM (relay.vm.compile, or compiler.load), or give static "
                            "input shapes (from_onnx(..., shape={name: (...)})).")


def _build(ir_mod: Any, target: Any, target_host: Any, params: Mapping[str, Any] | None,
           mod_name: str):
    started = time.perf_counter()
    timing = TimingRecorder()
    target = resolve_target(target)
    if target_host is not None:
        target = Target(target, host=target_host)
    mod = _to_module(ir_mod)
    if "main" not in mod:
        raise CompilerError("relay.build: the module has no 'main' function")
    with timing.stage("bind params"):
        if params:
            mod["main"] = bind_params_by_name(mod["main"], params)
    no_disk = bool(PassContext.current().get_config(DISABLE_DISK_CACHE, False))
    # FoldConstant's kernels too are built under the target and cache setting
    with build_target(target) as options, disk_cache.disabled(no_disk):
        with timing.stage("build cache lookup") as looked:
            if has_dyn_ops(mod["main"]):  # dyn.* calls whose shape inputs fold are static
                mod = DynamicToStatic()(mod)
            input_mod = infer_module(mod)  # not a pass: the caller's instruments see none
            refuse_dynamic(input_mod["main"])
            key = build_cache.build_key(mod, options, mod_name)
            cached = build_cache.lookup(key) if key is not None else None
            looked.note = "off" if key is None else "hit" if cached is not None else "miss"
        if cached is not None:
            factory, memory_stats = cached
            return _finish(factory, input_mod, target, memory_stats, timing, fused_functions=0,
                           reshape_only=0, build_cache_hits=1)
        mod = optimize(mod, timing)
        main = mod["main"]
        early_params = None if key is None else build_cache.start_params(
            key, [arg.data for call, _ in function_calls(main) for arg in call.args
                  if type(arg) is Constant])
        try:
            names, lib, compiled = _lower_and_compile(main, mod_name, timing, options)
        except BaseException:
            if early_params is not None:
                early_params.discard()
            raise
    stored = False
    try:
        _report("planning memory")
        with timing.stage("graph codegen + memory planning"):
            result = GraphCodegen(main, names, lib.in_place).run()
        factory = GraphExecutorFactoryModule(result.graph_json, lib, result.params,
                                             libmod_name=mod_name)
        if key is not None and time.perf_counter() - started >= build_cache.MIN_BUILD_SECONDS:
            with timing.stage("build cache: params file written"):
                stored = build_cache.store(key, factory, result.memory_stats, early_params)
    finally:
        if early_params is not None and not stored:
            early_params.discard()
    nops = sum(1 for name in names.values() if name == NOP)
    return _finish(factory, input_mod, target, result.memory_stats, timing,
                   fused_functions=len(names), reshape_only=nops,
                   kernels_compiled=compiled.kernels_compiled, compile_jobs=compiled.jobs,
                   cache_memory_hits=compiled.memory_hits,
                   cache_renamed_hits=compiled.renamed_hits,
                   cache_disk_hits=compiled.disk_hits, cache_misses=compiled.misses,
                   constant_kernel_sets=timing.constant_kernels.kernel_sets,
                   constant_kernels_compiled=timing.constant_kernels.kernels_compiled,
                   build_cache_hits=0)


def _lower_and_compile(main: Function, mod_name: str, timing: TimingRecorder,
                       options: CodegenOptions):
    """Lower main's fused functions and compile them: (kernel names, library, compile
    stats)."""
    with timing.stage("lower fused functions to PrimFuncs") as lowering:
        names, prim_funcs = lower_module(main, mod_name, options)
        nops = sum(1 for name in names.values() if name == NOP)
        concats = sum(1 for name in names.values() if name == CONCAT)
        no_kernel = [f"{nops} reshape-only"] * bool(nops) + \
            [f"{concats} concatenations laid out in memory"] * bool(concats)
        lowering.note = (f"{len(names)} fused functions -> {len(prim_funcs)} kernels"
                         + (f" ({', '.join(no_kernel)})" if no_kernel else ""))
    _report(f"compiling {len(prim_funcs)} kernels with LLVM")
    with record_compile_stats() as compiled:
        lib = jit.build_library(prim_funcs, options=options)
    timing.add_compile_stats(compiled)
    return names, lib, compiled


def _finish(factory, input_mod: IRModule, target: Target, memory_stats: dict,
            timing: TimingRecorder, **counts: int):
    """The factory with what relay.build adds to it: `ir_mod` (the module given to build,
    params bound and typed, as TVM's factory keeps it), `target`, `memory_stats` and
    `build_timing`."""
    factory.memory_stats = memory_stats
    factory.ir_mod = input_mod
    factory.target = target
    factory.build_timing = timing.finish({**counts,
                                          "kernels": len(factory.lib.function_names)})
    return factory

