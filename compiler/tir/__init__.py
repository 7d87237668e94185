"""compiler.tir: the part of tvm.tir that Relay programs and custom op computes name
(`tvm.tir.Any` for a dynamic dim, IntImm for a static one, the scalar intrinsics and
if_then_else of te compute rules); the loop-level IR itself is codegen.tir."""
from codegen.tir.ops import (abs, ceil, const, erf, exp, floor, if_then_else, log,  # noqa: F401
                             round, sigmoid, sqrt, tanh)
from compiler.ir.dims import Any, IntImm  # noqa: F401
from runtime.unsupported import missing_names

__all__ = ["Any", "IntImm", "const", "if_then_else", "exp", "log", "sqrt", "tanh", "sigmoid",
           "erf", "floor", "ceil", "round", "abs"]

__getattr__ = missing_names(__name__, {
    name: "relayjit lowers Relay to its own loop IR (codegen.tir) inside relay.build; "
          "TensorIR scheduling and PrimFunc building are not exposed"
    for name in ("PrimFunc", "Schedule", "transform", "stmt_functor", "decl_buffer",
                 "ir_builder", "build")})
