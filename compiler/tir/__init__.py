"""compiler.tir: the part of tvm.tir that Relay programs name (`tvm.tir.Any` for a dynamic
dim, IntImm for a static one); the loop-level IR itself is codegen.tir."""
from compiler.ir.dims import Any, IntImm  # noqa: F401

__all__ = ["Any", "IntImm"]
