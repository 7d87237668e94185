"""DynamicToStatic: dyn.* calls whose shape-like inputs are constants become the static ops.

Algorithm (TVM's pass, iterated to a fixed point): fold constants (so a shape computed from
shape_of of a static tensor, or from arithmetic on constants, becomes a Constant), then
rewrite, bottom-up, every call of a dyn.* op whose value inputs are all Constants into its
static op (compiler.op.dyn describes each pair), and re-infer types. A rewrite can make
more shapes static downstream (a shape_of of the new static result folds), so the two steps
repeat until nothing changes; each round rewrites at least one call, so there are at most as
many rounds as dyn calls. Calls with computed value inputs stay dynamic.
"""
from __future__ import annotations

from compiler.ir.expr import Call, Constant, Function, Op
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order, rewrite_post_order
from compiler.ir.type_infer import InferTypeLocal, infer_module, infer_type_local
from compiler.ir.types import is_dynamic_type
from compiler.op.dyn import dyn_op_of, static_call
from compiler.transform import FunctionPass, function_pass, register_pass
from .fold_constant import fold_constant

__all__ = ["DynamicToStatic", "dynamic_to_static", "has_dyn_ops"]


def _to_static(func: Function) -> tuple[Function, int]:
    """One bottom-up rewrite; (new function, number of calls made static)."""
    count = 0

    def rewrite(old, new):
        nonlocal count
        if type(new) is not Call or type(new.op) is not Op:
            return new
        dyn = dyn_op_of(new.op.name)
        if dyn is None or any(type(new.args[i]) is not Constant for i in dyn.values):
            return new
        count += 1
        values = [new.args[i].data.numpy() for i in dyn.values]
        return static_call(dyn, new, values)
    return rewrite_post_order(func, rewrite), count


def _is_dyn_call(call: Call) -> bool:
    return type(call.op) is Op and dyn_op_of(call.op.name) is not None


def has_dyn_ops(expr) -> bool:
    return any(type(n) is Op and dyn_op_of(n.name) is not None for n in post_order(expr))


def dynamic_to_static(func: Function, mod: IRModule | None = None) -> Function:
    """func with every dyn.* call whose shape-like inputs fold to constants made static (the
    same function when it has no dyn.* call)."""
    if not has_dyn_ops(func):
        return func
    declared = func.ret_type
    if mod is not None:
        infer_module(mod)  # types the module's global functions once
    while True:
        InferTypeLocal(func)  # types in place: folding reads them
        func = fold_constant(func, keep=_is_dyn_call)  # the shapes fold, the dyn calls stay
        InferTypeLocal(func)
        func, changed = _to_static(func)
        if not changed:
            break
    if declared is None or is_dynamic_type(declared):  # the result may be static now
        func = Function(func.params, func.body, None, func.type_params, func.attrs, func.span)
    return infer_type_local(func)


@register_pass
def DynamicToStatic() -> FunctionPass:  # noqa: N802  (TVM's pass name)
    """Turn dyn.* ops with constant shape inputs into static ops (opt_level 3, as TVM's)."""

    def transform(func: Function, mod, ctx) -> Function:
        return dynamic_to_static(func, mod)

    return function_pass(transform, opt_level=3, name="DynamicToStatic")
