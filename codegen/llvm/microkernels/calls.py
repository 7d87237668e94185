"""The TIR hook: a kernel's `relayjit.ukr.*` calls become calls of an external declaration
(`emit_call`), checked against the descriptor the symbol names; `define` emits a descriptor's
definition (codegen.microkernel_objects compiles each in a module of its own)."""
from __future__ import annotations

from llvmlite import ir

from ...tir.expr import Call, Load
from ..types import I32, I64
from .common import llvm_args
from .conv import conv_kernel, conv_rows_kernel
from .descriptors import (PREFIX, PTR, Conv, ConvBlocked, ConvRows, Gemm, GemmRows, Gemv,
                          Int8Dot, Interleave4, Microkernel, by_symbol)
from .gemm import gemm_kernel, gemv_kernel
from .int8 import int8_dot_kernel, interleave4_kernel

# descriptor type -> the function emitting its definition
DEFINITIONS = {Gemm: gemm_kernel, GemmRows: gemm_kernel, Gemv: gemv_kernel, Conv: conv_kernel,
               ConvBlocked: conv_kernel, ConvRows: conv_rows_kernel, Int8Dot: int8_dot_kernel,
               Interleave4: interleave4_kernel}


def define(module: ir.Module, kernel: Microkernel) -> ir.Function:
    """Emit the micro-kernel `kernel` describes into module (internal linkage; once)."""
    return DEFINITIONS[type(kernel)](module, kernel)


def declare(module: ir.Module, kernel: Microkernel) -> ir.Function:
    """An external declaration of the micro-kernel in a kernel's module, typed as its
    descriptor declares.

    Why not the definition: codegen.jit compiles each micro-kernel in a module of its own,
    once per target CPU (cached in memory and on disk), and links it into the kernel
    modules that call it; emitting and optimising it with every kernel set (and in every
    parallel compile job) was most of a CNN's LLVM time. argmemonly lets the optimiser keep
    values in registers across the call, as it did when it could see the body.
    """
    fn = module.globals.get(kernel.symbol)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), llvm_args(kernel)),
                         kernel.symbol)
        for attr in ("argmemonly", "nounwind", "norecurse"):
            fn.attributes.add(attr)
    return fn


def emit_call(emitter, e: Call) -> ir.Value:
    """Emit a `relayjit.ukr.*` TIR call: its descriptor's declared pointer arguments are Loads,
    passed as their addresses; the others integer values, passed as i64."""
    try:
        kernel = by_symbol(e.name)
    except KeyError:
        raise emitter.fail(f"unknown micro-kernel {e.name}") from None
    if len(e.args) != len(kernel.args):
        raise emitter.fail(f"micro-kernel {e.name}: expected {len(kernel.args)} arguments, "
                           f"got {len(e.args)}")
    bld = emitter.builder
    args = []
    for k, (a, declared) in enumerate(zip(e.args, kernel.args)):
        if (type(a) is Load) != (declared == PTR):
            raise emitter.fail(f"micro-kernel {e.name}: argument {k} is declared {declared}, "
                               f"called with {'an address' if type(a) is Load else 'a value'}")
        if type(a) is Load:
            args.append(emitter.address(a.buffer, a.indices))
        else:
            v = emitter.expr(a)
            if v.type != I64:
                v = bld.zext(v, I64) if v.type.width == 1 else bld.sext(v, I64)
            args.append(v)
    bld.call(declare(bld.module, kernel), args)
    for scope in emitter.memo:  # the kernel wrote memory: loads emitted before are stale
        scope.clear()
    return ir.Constant(I32, 0)


__all__ = ["DEFINITIONS", "PREFIX", "declare", "define", "emit_call"]
