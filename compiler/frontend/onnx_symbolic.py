"""Symbolic shape values: what a shape computation holds when some dims are dynamic.

Shape(x) of x: (batch, seq, 768) is no constant, but its value is known symbolically:
[batch, seq, 768], an object array of ints and relay.Any symbols. Shape arithmetic built on
it (Gather, Concat, Unsqueeze, Slice, Add, Mul, Div, Cast ...) is evaluated here over such
arrays, so a Reshape whose target is Concat(Shape(x)[0:2], [12, 64]) sees [batch, seq, 12, 64]
and imports as the static reshape (0, 0, 12, 64), not a dyn.reshape: a model exported with
dynamic axes keeps static kernels wherever its shapes are static in truth.

Injective ops (take, concatenate, reshape, slices: OpDef.pattern up to INJECTIVE) run their
numpy references on the object arrays as they are; arithmetic on dims uses the dims algebra
(compiler.ir.dims); comparisons (a bool result: two symbols that are not provably equal may
still be equal at run time) and every other op make the value unknown (None). Every
expression is evaluated at most once per conversion.
"""
from __future__ import annotations

import operator

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.dims import Any, dim_max, dim_min
from compiler.ir.expr import Call, Constant, Op, RelayExpr, Tuple, TupleGetItem
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType
from compiler.op.interpreter import apply_op
from compiler.op.registry import OpPattern

# elementwise arithmetic on dims: the ops shape subgraphs use (ints of dims are >= 0, so
# truncating and floor division agree)
_DIM_ARITHMETIC = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
                   "divide": operator.floordiv, "floor_divide": operator.floordiv,
                   "trunc_divide": operator.floordiv, "maximum": dim_max, "minimum": dim_min}


def is_symbolic(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


def _settle(value: np.ndarray, dtype: str) -> np.ndarray:
    """An object array with no Any left becomes a plain array of dtype."""
    if is_symbolic(value) and not any(isinstance(v, Any) for v in value.reshape(-1)):
        return value.astype(dtype)
    return value


def _evaluate_call(call: Call, args: list, out_type) -> np.ndarray | None:
    name = call.op.name
    flat = [x for a in args for x in (a if isinstance(a, tuple) else (a,))]
    if not any(is_symbolic(a) for a in flat):
        return apply_op(call, args)
    if name == "cast" and np.dtype(call.attrs.dtype).kind in "iu":
        return args[0]  # dims are integers whatever the integer type
    if name in _DIM_ARITHMETIC:
        with np.errstate(all="ignore"):
            return np.frompyfunc(_DIM_ARITHMETIC[name], 2, 1)(*args).astype(object)
    opdef = call.op.op_def
    if out_type is None or out_type.dtype == "bool" or opdef.pattern > OpPattern.INJECTIVE:
        return None
    return apply_op(call, args)


def symbolic_values(expr: RelayExpr, memo: dict, types: dict, static) -> np.ndarray | None:
    """The value of expr as an int array, or an object array with Any where a dim is known
    only at run time; None when it depends on data. memo caches every node's result;
    types is the frontend's type table, static(expr) its constant evaluator."""
    if expr in memo:
        return memo[expr]
    for node in post_order(expr, visited=memo, expand=_needs_children):
        memo[node] = _value_of(node, memo, types, static)
    return memo[expr]


def _needs_children(node: RelayExpr) -> bool:
    """shape_of reads only its argument's type: the argument's subgraph is not evaluated."""
    return not (type(node) is Call and type(node.op) is Op and node.op.name == "shape_of")


def _value_of(node: RelayExpr, memo: dict, types: dict, static):
    kind = type(node)
    if kind is Constant:
        return node.data.numpy()
    if kind is Op:
        return None
    if kind is Call and type(node.op) is Op and node.op.name == "shape_of":
        ty = types.get(node.args[0])
        if isinstance(ty, TensorType):
            dtype = node.attrs.dtype if node.attrs is not None else "int32"
            return _settle(np.array(list(ty.shape), dtype=object), dtype)
        return None
    if kind is Call and type(node.op) is Op:
        args = [memo.get(a) for a in node.args]
        if any(a is None for a in args):
            return None
        ty = types.get(node)
        try:
            value = _evaluate_call(node, args, ty if isinstance(ty, TensorType) else None)
        except (CompilerError, TypeError, ValueError, IndexError, ZeroDivisionError,
                OverflowError):
            return None
        if value is None:
            return None
        return _settle(np.asarray(value), ty.dtype) if isinstance(ty, TensorType) else value
    if kind is Tuple:
        fields = [memo.get(f) for f in node.fields]
        return None if any(f is None for f in fields) else tuple(fields)
    if kind is TupleGetItem:
        value = memo.get(node.tuple_value)
        return value[node.index] if isinstance(value, tuple) else None
    return static(node)
