"""Ops that make tensors from attributes: full, zeros, ones, arange, shape_of, ndarray_size."""
from __future__ import annotations

import math

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.dims import Any
from compiler.ir.expr import Constant, RelayExpr, const
from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, ShapeFuncDef, make_call, register, static_or_expr
from .type_relations import check_arity, fail, int_tuple, tensor_arg

__all__ = ["full", "zeros", "ones", "arange", "shape_of", "ndarray_size"]


def _dtype_or(op: str, dtype: str, fallback: str) -> str:
    try:
        return TensorType((), dtype or fallback).dtype
    except TypeError:
        raise fail(op, f"dtype {dtype!r} is not a known data type") from None


def _full_rel(types, attrs):
    check_arity("full", types, 1)
    fill = tensor_arg("full", types, 0, "fill_value")
    if fill.shape:
        raise fail("full", f"fill_value must be a scalar, got shape {fill.shape}")
    return TensorType(int_tuple("full", attrs.shape, "shape"),
                      _dtype_or("full", attrs.dtype, fill.dtype))


def _full_ref(inputs, attrs):
    dtype = attrs.dtype or inputs[0].dtype
    return np.full(attrs.shape, inputs[0], dtype=dtype)


register(OpDef(name="full", num_inputs=1, type_rel=_full_rel, pattern=OpPattern.ELEMWISE,
               reference=_full_ref, attrs={"shape": (), "dtype": ""},
               attrs_type_key="relay.attrs.InitOpAttrs"))


def _shape(op: str, shape) -> tuple:
    if isinstance(shape, np.ndarray):
        shape = shape.reshape(-1).tolist()
    return int_tuple(op, shape, "shape")


def full(fill_value, shape=(), dtype=""):
    """relay.full: a tensor of `shape` filled with the scalar fill_value (its dtype by default);
    dyn.full for a computed shape tensor."""
    if not isinstance(fill_value, RelayExpr):
        fill_value = const(fill_value, dtype or None)
    shape, dynamic = static_or_expr(shape)
    if dynamic is not None:
        return make_call("dyn.full", [fill_value, dynamic], dtype=dtype)
    return make_call("full", [fill_value], shape=_shape("full", shape), dtype=dtype)


def _const_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 0)
        return TensorType(int_tuple(op, attrs.shape, "shape"), _dtype_or(op, attrs.dtype, ""))
    return rel


for _name, _value in (("zeros", 0), ("ones", 1)):
    register(OpDef(name=_name, num_inputs=0, type_rel=_const_rel(_name),
                   pattern=OpPattern.ELEMWISE,
                   reference=lambda ins, attrs, v=_value: np.full(attrs.shape, v, attrs.dtype),
                   attrs={"shape": (), "dtype": "float32"},
                   attrs_type_key="relay.attrs.InitOpAttrs"))


def zeros(shape, dtype):
    """relay.zeros(shape, dtype) (dyn.zeros for a computed shape tensor)."""
    shape, dynamic = static_or_expr(shape)
    if dynamic is not None:
        return make_call("dyn.zeros", [dynamic], dtype=str(dtype))
    return make_call("zeros", [], shape=_shape("zeros", shape), dtype=str(dtype))


def ones(shape, dtype):
    """relay.ones(shape, dtype) (dyn.ones for a computed shape tensor)."""
    shape, dynamic = static_or_expr(shape)
    if dynamic is not None:
        return make_call("dyn.ones", [dynamic], dtype=str(dtype))
    return make_call("ones", [], shape=_shape("ones", shape), dtype=str(dtype))


def arange_length(start: float, stop: float, step: float) -> int:
    """ceil((stop - start) / step), at least 0, as TVM's ArangeRel."""
    if step == 0:
        raise fail("arange", "step must not be 0")
    return max(0, int(math.ceil((stop - start) / step)))


def _arange_rel(types, attrs):
    check_arity("arange", types, 3)
    for i, name in enumerate(("start", "stop", "step")):
        if tensor_arg("arange", types, i, name).shape:
            raise fail("arange", f"{name} must be a scalar")
    dtype = _dtype_or("arange", attrs.dtype, "float32")
    if attrs.start is None:  # bounds read from the inputs at run time: the shape function
        return TensorType((Any(),), dtype)
    return TensorType((arange_length(attrs.start, attrs.stop, attrs.step),), dtype)


def arange_bounds(inputs, attrs) -> tuple:
    """(start, stop, step): the attributes, or the inputs' values when the bounds are
    computed (attrs None)."""
    if attrs.start is None:
        return tuple(np.asarray(x).reshape(-1)[0].item() for x in inputs)
    return attrs.start, attrs.stop, attrs.step


def _arange_ref(inputs, attrs):
    start, stop, step = arange_bounds(inputs, attrs)
    n = arange_length(start, stop, step)
    values = start + step * np.arange(n, dtype=np.float64)
    return values.astype(attrs.dtype)


register(OpDef(name="arange", num_inputs=3, type_rel=_arange_rel, pattern=OpPattern.INJECTIVE,
               reference=_arange_ref,
               attrs={"start": 0, "stop": 0, "step": 1,
                      "dtype": "float32"},
               attrs_type_key="relay.attrs.ArangeAttrs",
               shape_func=ShapeFuncDef("arange", (True, True, True))))


def _scalar_value(name: str, value, dtype: str):
    """(Python number or None when computed, expression) of an arange bound."""
    if isinstance(value, Constant):
        array = value.data.numpy()
        if array.shape:
            raise CompilerError(f"arange: {name} must be a scalar constant, got shape "
                                f"{array.shape}")
        return array.item(), value
    if isinstance(value, RelayExpr):
        return None, value
    return value, const(value, dtype)


def arange(start, stop=None, step=None, dtype="float32"):
    """relay.arange: values start, start + step, ... below stop. Constant bounds give a static
    length; computed (tensor) bounds a dynamic one, read at run time."""
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    (v0, e0), (v1, e1), (v2, e2) = (_scalar_value(n, v, dtype) for n, v in
                                    (("start", start), ("stop", stop), ("step", step)))
    if None in (v0, v1, v2):
        v0 = v1 = v2 = None
    return make_call("arange", [e0, e1, e2], start=v0, stop=v1, step=v2, dtype=str(dtype))


def _size_rel(op: str, scalar: bool):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        return TensorType(() if scalar else (data.ndim,), _dtype_or(op, attrs.dtype, "int32"))
    return rel


register(OpDef(name="shape_of", num_inputs=1, type_rel=_size_rel("shape_of", False),
               pattern=OpPattern.INJECTIVE,
               reference=lambda ins, attrs: np.array(ins[0].shape, dtype=attrs.dtype),
               attrs={"dtype": "int32"}, attrs_type_key="relay.attrs.ShapeOfAttrs"))
register(OpDef(name="ndarray_size", num_inputs=1, type_rel=_size_rel("ndarray_size", True),
               pattern=OpPattern.INJECTIVE,
               reference=lambda ins, attrs: np.array(ins[0].size, dtype=attrs.dtype),
               attrs={"dtype": "int32"}, attrs_type_key="relay.attrs.NdarraySizeAttrs"))


def shape_of(data, dtype="int32"):
    """relay.shape_of: the static shape as a 1-D tensor."""
    return make_call("shape_of", [data], dtype=dtype)


def ndarray_size(data, dtype="int32"):
    """relay.ndarray_size: the element count as a scalar."""
    return make_call("ndarray_size", [data], dtype=dtype)
