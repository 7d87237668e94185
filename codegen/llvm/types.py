"""Mapping of TIR dtypes to LLVM types (registers vs memory) and intrinsic declarations."""
from __future__ import annotations

from llvmlite import ir

from ..errors import CodegenError
from ..tir.dtype import FLOAT_BITS, bits, is_bool, is_float

F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
I1, I8, I16, I32, I64 = (ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32),
                         ir.IntType(64))
PTR = ir.PointerType()


def reg_type(dtype: str) -> ir.Type:
    """Type of a value in registers (bool is i1; a bfloat16 is its 16 bits, an i16: every
    operation widens it to float32 first, codegen/llvm/emit_expr.py)."""
    if dtype == "bfloat16":
        return I16
    if is_float(dtype):
        return {16: F16, 32: F32, 64: F64}[FLOAT_BITS[dtype]]
    return ir.IntType(bits(dtype))


def mem_type(dtype: str) -> ir.Type:
    """Type of an element in memory (bool is stored as i8)."""
    return I8 if is_bool(dtype) else reg_type(dtype)


def llvm_suffix(ty: ir.Type) -> str:
    """Overload suffix of an intrinsic name (f32, f64, i32, ...)."""
    if ty == F16:
        return "f16"
    if ty == F32:
        return "f32"
    if ty == F64:
        return "f64"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    raise CodegenError(f"no intrinsic suffix for LLVM type {ty}")


def get_function(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type],
                 readnone: bool = True) -> ir.Function:
    """Declare (once) an external function or LLVM intrinsic by exact name."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
        fn.attributes.add("nounwind")
        if readnone and name.startswith("llvm."):
            fn.attributes.add("readnone")
    return fn


def intrinsic(builder: ir.IRBuilder, base: str, *args: ir.Value) -> ir.Value:
    """Call llvm.<base>.<suffix>(args) overloaded on the first argument's type."""
    ty = args[0].type
    fn = get_function(builder.module, f"llvm.{base}.{llvm_suffix(ty)}", ty, [a.type for a in args])
    return builder.call(fn, list(args))
