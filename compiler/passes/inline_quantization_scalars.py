"""InlineQuantizationScalars: a fused function with QNN ops gets the scalar constants it is
called with (scales, zero points) inside it, not as parameters, so its kernel knows them.

FuseOps makes a constant that other groups also read a parameter of each group (TVM's
behaviour, kept: its tests compare fused functions with TVM's). A QDQ model's quantization
parameters are such shared scalars (the scale one layer quantizes to is the scale the next
dequantizes with), so a requantisation epilogue read them at run time and, to be exact for
every possible int32 zero point, worked in float64. Known, a zero point of 0 drops out and
the saturation bounds are constants (the compute rules of compiler/op/compute/qnn.py read
them: `known`), in float32 vectors.

Algorithm: one bottom-up rewrite of each function (explicit stack); a call of a primitive
function whose body calls an op of the QNN dialect (qnn.*) and whose arguments include
scalar constants of the simple dtypes gets a copy of the function with those parameters
bound to them (compiler.passes.bind), called with the remaining arguments. Calls of one
function with the same constants share one copy. The copies differ per value, so layers
that shared a kernel only through parameters now get one each: QNN functions only.
"""
from __future__ import annotations

from compiler.ir.expr import Call, Constant, Function, Op, RelayExpr
from compiler.ir.traversal import post_order, rewrite_post_order
from compiler.transform import function_pass, register_pass
from .bind import bind

__all__ = ["InlineQuantizationScalars", "inline_quantization_scalars"]

SIMPLE_DTYPES = ("int32", "int64", "float32", "float64")
QNN_PREFIX = "qnn."


def _has_qnn_op(func: Function) -> bool:
    return any(type(n) is Op and n.name.startswith(QNN_PREFIX) for n in post_order(func.body))


def _scalar(arg: RelayExpr) -> bool:
    return type(arg) is Constant and arg.data.ndim == 0 and str(arg.data.dtype) in SIMPLE_DTYPES


def inline_quantization_scalars(func: Function) -> Function:
    """func with its calls of QNN primitive functions specialised to their scalar constants."""
    qnn: dict = {}  # primitive function -> whether it has a QNN op
    copies: dict = {}  # (function, constants by position) -> the specialised function

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if type(new) is not Call or type(new.op) is not Function or not new.op.is_primitive:
            return new
        fn = new.op
        if fn not in qnn:
            qnn[fn] = _has_qnn_op(fn)
        scalars = [i for i, a in enumerate(new.args) if _scalar(a)]
        if not qnn[fn] or not scalars:
            return new
        key = (fn, tuple((i, new.args[i]) for i in scalars))
        if key not in copies:
            bound = bind(fn, {fn.params[i]: new.args[i] for i in scalars})
            copies[key] = Function(bound.params, bound.body, fn.ret_type, fn.type_params,
                                   fn.attrs, fn.span)
        rest = [a for i, a in enumerate(new.args) if i not in scalars]
        return Call(copies[key], rest, new.attrs, new.type_args, new.span)

    return rewrite_post_order(func, rewrite)


@register_pass
def InlineQuantizationScalars():  # noqa: N802
    """Copy the scalar constants a fused QNN function is called with into it."""

    @function_pass(opt_level=2, name="InlineQuantizationScalars")  # needs no types
    def inline_pass(func: Function, mod, ctx) -> Function:
        return inline_quantization_scalars(func)

    return inline_pass
