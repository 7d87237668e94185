"""Kernels to optimised LLVM modules: compile units, emission and LLVM's O-level pipeline.

A compile unit is a kernel, or a family of kernels that differ only in an extent, emitted as
one body (codegen.kernel_families). Each kernel gets the pipeline pipeline_for picks: kernels
that call micro-kernels are hand-scheduled and get a cheaper one. The micro-kernels they call
are only declared here (codegen.microkernel_objects compiles them on their own).
"""
from __future__ import annotations

from typing import NamedTuple

import llvmlite.binding as llvm
from llvmlite import ir

from runtime.target import TargetInfo, target_machine

from .compile_stats import timed
from .errors import CodegenError
from .kernel_families import Family, emit_family, find_families
from .llvm.emit import emit_module
from .microkernel_objects import MICROKERNEL_CALL
from .tir.stmt import PrimFunc
from .tir.structural import kernel_text


def target_machine_for(cpu: TargetInfo, opt_level: int) -> llvm.TargetMachine:
    """The (cached) target machine for `cpu` at opt_level."""
    return target_machine(cpu, opt=opt_level)


Unit = PrimFunc | Family  # what one compile unit is: a kernel, or a family of them


def compile_units(funcs: list[PrimFunc], families: bool) -> list[Unit]:
    """The kernels as compile units: families where they form, when families are on
    (CodegenOptions.kernel_families)."""
    return find_families(funcs) if families else list(funcs)


def lead(unit: Unit) -> PrimFunc:
    """The kernel whose text stands for the unit (a family's members share their pipeline
    and the micro-kernels they call)."""
    return unit.members[0] if isinstance(unit, Family) else unit


def emit_units(units: list[Unit]) -> ir.Module:
    """One LLVM module: each kernel, and each family's body with its members' wrappers."""
    module = emit_module([u for u in units if isinstance(u, PrimFunc)])
    for unit in units:
        if isinstance(unit, Family):
            emit_family(module, unit)
    return module


class Pipeline(NamedTuple):
    """LLVM's O-level pipeline as a kernel gets it (loop unrolling always off)."""

    speed_level: int
    loop_vectorization: bool = True
    slp_vectorization: bool = True


# Kernels that call micro-kernels are hand-scheduled: their hot loops are the micro-kernels
# (compiled on their own, codegen.microkernel_objects); what the pipeline sees is loop control,
# packing, padding and epilogue loops. O1 with the vectorisers runs them as fast as O3 (one
# thread, CPU time, same-process A/B: ResNet-50 x0.99-1.00, DenseNet-121 x0.99-1.00) for a
# fifth less LLVM time. Without the vectorisers they run 4-21% slower (their padding and
# epilogue loops).
HAND_SCHEDULED_SPEED_LEVEL = 1


def pipeline_for(func: PrimFunc, opt_level: int) -> Pipeline:
    """The pipeline kernel `func` is optimised with at opt_level (without LLVM's vectorisers
    when its attrs say "vectorize": False, codegen.lower's mark of a build without vectors)."""
    if func.attrs.get("vectorize", True) is False:
        return Pipeline(opt_level, loop_vectorization=False, slp_vectorization=False)
    if MICROKERNEL_CALL.search(kernel_text(func)):
        return Pipeline(min(opt_level, HAND_SCHEDULED_SPEED_LEVEL))
    return Pipeline(opt_level)


def optimised_kernels(units: list[Unit], opt_level: int, cpu: TargetInfo
                      ) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """The kernels alone optimised at opt_level for `cpu` (the micro-kernels they call only
    declared): one module per pipeline (pipeline_for), linked into one."""
    tm = target_machine_for(cpu, opt_level)
    groups: dict[Pipeline, list[Unit]] = {}
    for unit in units:
        groups.setdefault(pipeline_for(lead(unit), opt_level), []).append(unit)
    if not groups:  # no kernels (a graph of reshapes and constants): one empty module
        groups[Pipeline(opt_level)] = []
    mods = [_optimised_group(group, tm, pipeline) for pipeline, group in groups.items()]
    with timed("link"):
        for other in mods[1:]:
            mods[0].link_in(other)
    return mods[0], tm


def _optimised_group(units: list[Unit], tm: llvm.TargetMachine,
                     pipeline: Pipeline) -> llvm.ModuleRef:
    """The kernels in one module, through `pipeline`."""
    with timed("emit_ir"):
        ir_module = emit_units(units)
        ir_module.triple = tm.triple
        ir_module.data_layout = str(tm.target_data)
        text = str(ir_module)
    try:
        with timed("parse_verify"):
            mod = llvm.parse_assembly(text)
            mod.verify()
    except RuntimeError as err:
        names = [u.name for u in units]
        raise CodegenError(f"LLVM rejected the IR for kernels {names}: {err}") from None
    if pipeline.speed_level > 0:
        with timed("optimise"):
            pto = llvm.create_pipeline_tuning_options(speed_level=pipeline.speed_level)
            pto.loop_vectorization = pipeline.loop_vectorization
            pto.slp_vectorization = pipeline.slp_vectorization
            # full unrolling of static-trip loops after vectorisation made 10x larger code
            # and 10x slower compiles for little speed (schedules unroll by hand where it pays)
            pto.loop_unrolling = False
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
    return mod
