"""SimplifyExpr: the part of TVM's simplify_expr.cc that a frontend's output most often needs,
in one bottom-up walk (rewrite_post_order, explicit stack) over a typed function:

- a chain of reshape-like ops (reshape, squeeze, expand_dims, nn.batch_flatten) becomes one
  reshape to the chain's static output shape;
- transpose(transpose(x)) becomes one transpose, or x when the axes compose to identity;
- cast(x, dtype) of an x already of that dtype becomes x.

TVM's other rewrites (consecutive adds, clip chains, *_like ops, rsqrt, argmax of dequantize)
are not done. InferType must have run (it is required): the rules read checked types.
"""
from __future__ import annotations

from compiler.ir.dims import is_static_shape
from compiler.ir.expr import Call, Function, Op, RelayExpr
from compiler.ir.traversal import rewrite_post_order
from compiler.ir.types import TensorType
from compiler.op.transform import reshape, transpose
from compiler.transform import function_pass, register_pass

_RESHAPE_LIKE = frozenset({"reshape", "squeeze", "expand_dims", "nn.batch_flatten"})


def _op_name(expr: RelayExpr) -> str | None:
    return expr.op.name if type(expr) is Call and isinstance(expr.op, Op) else None


def _axes(call: Call, rank: int) -> list[int]:
    axes = call.attrs.axes
    if not axes:
        return list(reversed(range(rank)))
    return [int(a) % rank for a in axes]


def transpose_of(x: RelayExpr, axes: list[int]) -> RelayExpr:
    """transpose(x, axes), merged with x when x is itself a transpose (x's input when the two
    cancel); identity axes give x."""
    if axes == list(range(len(axes))):
        return x
    if _op_name(x) == "transpose":
        composed = [_axes(x, len(axes))[a] for a in axes]
        return x.args[0] if composed == list(range(len(axes))) else transpose(x.args[0],
                                                                              composed)
    return transpose(x, axes)


def _simplify(old: RelayExpr, new: RelayExpr) -> RelayExpr:
    name = _op_name(new)
    if name is None or not isinstance(old.checked_type, TensorType):
        return new
    out_type = old.checked_type
    arg = new.args[0] if new.args else None
    if name in _RESHAPE_LIKE and _op_name(arg) in _RESHAPE_LIKE \
            and is_static_shape(out_type.shape):
        return reshape(arg.args[0], [int(d) for d in out_type.shape])
    if name == "transpose" and _op_name(arg) == "transpose":
        return transpose_of(arg, _axes(new, len(out_type.shape)))
    if name == "cast" and isinstance(old.args[0].checked_type, TensorType) \
            and old.args[0].checked_type.dtype == out_type.dtype:
        return arg
    return new


@register_pass
def SimplifyExpr():
    """Fold reshape chains, transpose pairs and identity casts (see the module doc)."""

    @function_pass(opt_level=0, name="SimplifyExpr", required=["InferType"])
    def simplify_expr(func: Function, mod, ctx) -> Function:
        return rewrite_post_order(func, _simplify)
    return simplify_expr
