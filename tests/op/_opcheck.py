"""Helpers for op tests: the type a call's relation gives, and its reference's result."""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Call, Constant, Tuple, TupleGetItem, Var
from compiler.ir.types import TensorType, TupleType
from compiler.op.registry import get_def


def arg_type(expr):
    """The static type of a test argument (annotated Var, Constant, Tuple of those)."""
    if isinstance(expr, Var):
        return expr.type_annotation
    if isinstance(expr, Constant):
        data = expr.data.numpy()
        return TensorType(data.shape, data.dtype.name)
    if isinstance(expr, Tuple):
        return TupleType([arg_type(f) for f in expr.fields])
    if isinstance(expr, Call):
        return infer(expr)
    if isinstance(expr, TupleGetItem):
        return arg_type(expr.tuple_value).fields[expr.index]
    raise TypeError(f"no test type for {type(expr).__name__}")


def infer(call: Call):
    """Run the op's type relation on the call's argument types."""
    return get_def(call.op.name).type_rel([arg_type(a) for a in call.args], call.attrs)


def as_call(expr) -> Call:
    """The Call inside a constructor's result (TupleWrapper, TupleGetItem or Call)."""
    if hasattr(expr, "astuple"):
        expr = expr.astuple()
    if isinstance(expr, TupleGetItem):
        expr = expr.tuple_value
    return expr


def reference(call: Call, *inputs):
    """Run the op's numpy reference; a Tuple argument takes a tuple of arrays."""
    return get_def(call.op.name).reference(list(inputs), call.attrs)


def check(expr, *inputs):
    """Type relation and reference agree on shape and dtype; returns the reference result."""
    call = as_call(expr)
    ty = infer(call)
    out = reference(call, *inputs)
    if isinstance(ty, TupleType):
        assert isinstance(out, tuple) and len(out) == len(ty.fields)
        for t, o in zip(ty.fields, out):
            assert (o.shape, o.dtype.name) == (t.shape, t.dtype), (o.shape, o.dtype, t)
    else:
        assert isinstance(out, np.ndarray), type(out)
        assert (out.shape, out.dtype.name) == (ty.shape, ty.dtype), (out.shape, out.dtype, ty)
    return out
