"""relay.op.op: defining new operators from Python, as tvm.relay.op.op.

A user op is an ordinary registry entry (compiler.op.registry): `register` creates it,
Op.set_num_inputs / Op.add_type_rel describe its inputs and type, `register_pattern` tells
FuseOps how it fuses and `register_compute` gives the te rule relay.build lowers it with.
"""
from __future__ import annotations

from typing import Callable

from compiler.errors import CompilerError
from compiler.op.registry import (OpPattern, get_op as get, register_op as register,  # noqa: F401
                                  register_op_attr)
from compiler.op.shape_func import register_shape_func  # noqa: F401
from compiler.passes.fq2i_types import register_fake_quantization_to_integer  # noqa: F401

__all__ = ["OpPattern", "get", "register", "register_op_attr", "register_stateful",
           "register_pattern", "register_compute", "register_shape_func",
           "register_fake_quantization_to_integer"]


def register_stateful(op_name: str, stateful: bool, level: int = 10) -> None:
    """Mark an op stateful (FoldConstant and DeadCodeElimination then leave its calls alone)."""
    register_op_attr(op_name, "TOpIsStateful", bool(stateful), level)


def register_pattern(op_name: str, pattern: OpPattern | int, level: int = 10) -> None:
    """Set the op's fusion pattern (OpPattern.ELEMWISE ... OPAQUE)."""
    register_op_attr(op_name, "TOpPattern", OpPattern(pattern), level)


def _compute_rule(op_name: str, fcompute: Callable) -> Callable:
    """TVM's fcompute(attrs, inputs, out_type) -> [te.Tensor] as this registry's rule."""
    def rule(inputs, attrs, out_type):
        outs = fcompute(attrs, list(inputs), out_type)
        if not isinstance(outs, (list, tuple)) or not outs:
            raise CompilerError(f"the compute of {op_name!r} returned {type(outs).__name__}, "
                                "expected a non-empty list of te tensors")
        return outs[0] if len(outs) == 1 else tuple(outs)
    rule.__name__ = getattr(fcompute, "__name__", "compute")
    return rule


def register_compute(op_name: str, compute: Callable | None = None, level: int = 10):
    """Give an op its lowering: compute(attrs, inputs, out_type) returns a list of te tensors
    (codegen.te); a decorator when compute is omitted."""
    def add(fn: Callable) -> Callable:
        register_op_attr(op_name, "FTVMCompute", _compute_rule(op_name, fn), level)
        return fn
    return add if compute is None else add(compute)
