"""How the VM compiler sees Relay types: a parameter's type as the runtime checks it, the
tensors of a (tuple) type in the order kernels take them, and whether a primitive function
has dynamic (Any) shapes."""
from __future__ import annotations

from compiler.errors import CompilerError
from compiler.ir.expr import Function
from compiler.ir.types import TensorType, TupleType, Type, is_dynamic_type
from runtime.vm.program import ANY, TENSOR, TUPLE


def param_type(ty: Type | None) -> tuple:
    """The runtime's description of a parameter type (runtime.vm.program)."""
    if isinstance(ty, TensorType):
        return (TENSOR, tuple(d if isinstance(d, int) else None for d in ty.shape), ty.dtype)
    if isinstance(ty, TupleType):
        return (TUPLE, tuple(param_type(f) for f in ty.fields))
    return (ANY,)


def tensor_types(ty: Type, where: str) -> list[TensorType]:
    """The tensors of a (nested) tuple type, in order."""
    out, stack = [], [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TensorType):
            out.append(t)
        elif isinstance(t, TupleType):
            stack.extend(reversed(t.fields))
        else:
            raise CompilerError(f"relay.vm.compile: {where} has type {t}; a primitive "
                                f"function takes and returns tensors and tuples of tensors")
    return out


def is_dynamic(func: Function) -> bool:
    """Whether a primitive function's parameters or result have Any dims."""
    ret = func.ret_type or func.body.checked_type
    return is_dynamic_type(ret) or any(is_dynamic_type(p.checked_type) for p in func.params)
