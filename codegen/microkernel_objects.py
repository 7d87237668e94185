"""Micro-kernels as objects of their own: compiled once per target CPU, cached, linked.

The kernels call micro-kernels (codegen.llvm.microkernels) by name; each micro-kernel is
compiled in a module of its own, with external linkage, and kept in memory and in the disk
cache beside the kernel sets, so a build that finds them there emits none. runtime.KernelLibrary
loads them beside the kernel objects that call them; get_llvm_ir and get_assembly link them into
the kernels' module instead (link_microkernels). Every call must match the micro-kernel's
definition (check_calls).

A micro-kernel's object code is a function of its name and the target CPU alone: it is
machine-coded at MICROKERNEL_OPT_LEVEL whatever the opt level of the kernel set that first
needs it. (It used to take the kernel set's target machine: FoldConstant compiles its small
kernels at O0, and a GRU's folding compiled the GEMV micro-kernel gemv_32_2 with O0's fast
register allocator, about twice the instructions, into the disk cache under the same name;
an LSTM built after it ran 0.54 ms instead of 0.25 ms.)
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import NamedTuple

import llvmlite.binding as llvm
from llvmlite import ir

from runtime.target import TargetInfo, target_machine

from . import cache as disk_cache
from .compile_stats import note, timed
from .errors import CodegenError
from .llvm import microkernels
from .tir.stmt import PrimFunc
from .tir.structural import kernel_text

MICROKERNEL_CALL = re.compile(r"call (relayjit\.ukr\.\S+) ")
# LLVM codegen opt level every micro-kernel is machine-coded at (register allocation,
# scheduling): they are the hot loops, so always the full level
MICROKERNEL_OPT_LEVEL = 3


class Microkernel(NamedTuple):
    """A compiled micro-kernel: its object file, the optimised bitcode it was emitted from
    (what get_llvm_ir links in) and its LLVM function type (what every call must match)."""

    object: bytes
    bitcode: bytes
    signature: str


_MICROKERNELS: OrderedDict[tuple[str, TargetInfo], Microkernel] = OrderedDict()
_compiled_count = 0  # micro-kernels compiled in this process (found in no cache)
_lock = threading.Lock()
# Disk cache key of a micro-kernel (the cache adds the target CPU, LLVM and codegen versions).
_MICROKERNEL_KEY = "microkernel\0{name}\0object"


def microkernels_called(funcs: list[PrimFunc]) -> list[str]:
    """Names of the micro-kernels (codegen.llvm.microkernels) the kernels call, in order."""
    names: dict[str, None] = {}
    for f in funcs:
        names.update(dict.fromkeys(MICROKERNEL_CALL.findall(kernel_text(f))))
    return list(names)


def _cached_microkernel(name: str, cpu: TargetInfo) -> Microkernel | None:
    """Micro-kernel `name` for `cpu` from memory or disk."""
    key = (name, cpu)
    with _lock:
        found = _MICROKERNELS.get(key)
    if found is None:
        with timed("cache_lookup"):
            entry = disk_cache.lookup(_MICROKERNEL_KEY.format(name=name), cpu)
        if entry is not None and len(entry.names) == 2 and entry.names[0] == name \
                and len(entry.objects) == 1 and len(entry.bitcodes) == 1:
            found = Microkernel(entry.objects[0], entry.bitcodes[0], entry.names[1])
            with _lock:
                disk_cache.remember(_MICROKERNELS, key, found)
    return found


def compile_microkernel(name: str, cpu: TargetInfo) -> Microkernel:
    """Micro-kernel `name` compiled for `cpu` in a module of its own, with external linkage.

    The micro-kernels come out of codegen.llvm.microkernels unrolled, vectorised and in SSA
    form: on ResNet-50's 24 conv micro-kernels the O3 pipeline gave the same instructions as
    InstCombine alone (one spill slot fewer) for 10x its time, so InstCombine is all they get.
    """
    tm = target_machine(cpu, opt=MICROKERNEL_OPT_LEVEL)
    with timed("emit_ir"):
        try:
            kernel = microkernels.by_symbol(name)
        except KeyError:
            raise CodegenError(f"unknown micro-kernel {name}: no descriptor names it") \
                from None
        module = ir.Module(name=name)
        fn = microkernels.define(module, kernel)
        fn.linkage = ""  # external: the kernel objects' calls resolve to it when loaded
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        text = str(module)
    with timed("parse_verify"):
        mod = llvm.parse_assembly(text)
        mod.verify()
    with timed("optimise"):
        passes = llvm.create_new_module_pass_manager()
        passes.add_instruction_combine_pass()
        passes.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(1)))
    with timed("cache_write"):
        bitcode = mod.as_bitcode()
    with timed("machine_code"):
        obj = tm.emit_object(mod)
    return Microkernel(obj, bitcode, str(mod.get_function(name).global_value_type))


def keep_microkernels(compiled: dict[str, Microkernel], cpu: TargetInfo) -> None:
    """Cache freshly compiled micro-kernels (for `cpu`) in memory and on disk."""
    global _compiled_count
    with timed("cache_write"):
        for name, kernel in compiled.items():
            with _lock:
                disk_cache.remember(_MICROKERNELS, (name, cpu), kernel)
            disk_cache.store(_MICROKERNEL_KEY.format(name=name),
                             disk_cache.Entry((name, kernel.signature), (kernel.object,),
                                              (kernel.bitcode,)), cpu)
    with _lock:
        _compiled_count += len(compiled)
    note(microkernels_compiled=len(compiled))


def find_microkernels(names: list[str], cpu: TargetInfo,
                      compiled: dict[str, Microkernel]) -> dict[str, Microkernel]:
    """The micro-kernels `names` for `cpu`, from the caches or `compiled`, else compiled now
    (and added to `compiled`, for keep_microkernels)."""
    found = {}
    for name in names:
        kernel = compiled.get(name) or _cached_microkernel(name, cpu)
        if kernel is None:
            kernel = compiled[name] = compile_microkernel(name, cpu)
        found[name] = kernel
    return found


def check_calls(mod: llvm.ModuleRef, kernels: dict[str, Microkernel]) -> None:
    """Each micro-kernel mod declares is called as it is defined."""
    with timed("link"):
        for name, kernel in kernels.items():
            try:
                declared = str(mod.get_function(name).global_value_type)
            except NameError:  # the optimiser removed every call
                continue
            if declared != kernel.signature:
                raise CodegenError(f"micro-kernel {name} is called as {declared} but defined "
                                   f"as {kernel.signature}")


def link_microkernels(mod: llvm.ModuleRef, cpu: TargetInfo, names: list[str]
                      ) -> dict[str, Microkernel]:
    """Link the micro-kernels mod calls into it as internal functions (what get_llvm_ir and
    get_assembly show); returns those compiled now (for keep_microkernels)."""
    compiled: dict[str, Microkernel] = {}
    kernels = find_microkernels(names, cpu, compiled)
    check_calls(mod, kernels)
    with timed("link"):
        for name, kernel in kernels.items():
            try:
                mod.get_function(name)
            except NameError:
                continue
            mod.link_in(llvm.parse_bitcode(kernel.bitcode))
            mod.get_function(name).linkage = llvm.Linkage.internal
    return compiled


def compiled_count() -> int:
    """Micro-kernels compiled in this process (found neither in memory nor on disk)."""
    with _lock:
        return _compiled_count


def clear_cache() -> None:
    """Forget the compiled micro-kernels kept in memory."""
    with _lock:
        _MICROKERNELS.clear()
