"""Elementwise and broadcast tensor ops: math, comparisons, logic, cast, where, clip, *_like."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from compiler.ir.types import TensorType
from runtime.memory import aligned_empty
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import (broadcast_rel, broadcast_shape, check_arity, fail, identity_rel,
                             same_dtype, tensor_arg, unary_rel)

__all__ = [
    # unary math
    "negative", "abs", "exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
    "floor", "ceil", "round", "trunc", "sign", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "asinh", "acosh", "atanh", "fast_exp", "fast_tanh", "fast_erf",
    "isnan", "isinf", "isfinite", "logical_not", "bitwise_not", "copy",
    # binary
    "add", "subtract", "multiply", "divide", "floor_divide", "trunc_divide", "floor_mod",
    "mod", "trunc_mod", "power", "maximum", "minimum", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    # others
    "clip", "cast", "cast_like", "where", "zeros_like", "ones_like", "full_like",
]


def _same(fn: Callable) -> Callable:
    """A reference that applies fn and keeps the first input's dtype (numpy may promote).

    A ufunc on one dtype writes straight into aligned storage, which FoldConstant keeps
    without a copy (folding BatchNorm into ResNet-50's weights copied 100 MB otherwise)."""
    def reference(inputs, attrs):
        dtype = inputs[0].dtype
        with np.errstate(all="ignore"):
            if type(fn) is np.ufunc and all(x.dtype == dtype for x in inputs):
                out = aligned_empty(np.broadcast_shapes(*(x.shape for x in inputs)), dtype)
                try:
                    return fn(*inputs, out=out)
                except TypeError:  # numpy's loop for this dtype returns another one
                    pass
            return np.asarray(fn(*inputs)).astype(dtype, copy=False)
    return reference


def _to(dtype: str, fn: Callable) -> Callable:
    """A reference with a fixed output dtype."""
    def reference(inputs, attrs):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*inputs)).astype(dtype, copy=False)
    return reference


def _is_int(x: np.ndarray) -> bool:
    return x.dtype.kind in "iub"


def _trunc_div(a, b):
    """C division: integers truncate toward zero (TVM's divide and truncdiv), floats divide."""
    if not _is_int(a):
        return a / b
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.abs(a64) // np.abs(safe)
    return np.where(b64 == 0, 0, np.where((a64 < 0) != (safe < 0), -q, q))


def _floor_div(a, b):
    if not _is_int(a):
        return np.floor(a / b)
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe))


def _floor_mod(a, b):
    if not _is_int(a):
        return _float_mod(a, b)
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.mod(a, safe))


def _float_mod(a, b):
    """np.mod for floats spelled out: fmod, plus b when the signs differ, zero signed as b.

    (a - floor(a/b)*b, used before, gave NaN for an infinite b and lost the sign of zero.)
    """
    mod = np.fmod(a, b)
    out = np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
    return np.where(mod == 0, np.copysign(np.zeros_like(out), b), out)


def _trunc_mod(a, b):
    if not _is_int(a):
        return np.fmod(a, b)
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.fmod(a, safe))


_erf = np.frompyfunc(math.erf, 1, 1)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


# name -> (numpy function, float-only input)
_UNARY: dict[str, tuple[Callable, bool]] = {
    "negative": (np.negative, False), "abs": (np.abs, False), "exp": (np.exp, True),
    "log": (np.log, True), "log2": (np.log2, True), "log10": (np.log10, True),
    "sqrt": (np.sqrt, True), "rsqrt": (lambda x: 1.0 / np.sqrt(x.astype(np.float64)), True),
    "tanh": (np.tanh, True), "sigmoid": (_sigmoid, True),
    "erf": (lambda x: _erf(x.astype(np.float64)).astype(np.float64), True),
    "floor": (np.floor, False), "ceil": (np.ceil, False),
    "round": (np.round, False),  # half to even, as nearbyint (TVM lowers round to it)
    "trunc": (np.trunc, False), "sign": (np.sign, False), "sin": (np.sin, True),
    "cos": (np.cos, True), "tan": (np.tan, True), "asin": (np.arcsin, True),
    "acos": (np.arccos, True), "atan": (np.arctan, True), "sinh": (np.sinh, True),
    "cosh": (np.cosh, True), "asinh": (np.arcsinh, True), "acosh": (np.arccosh, True),
    "atanh": (np.arctanh, True), "fast_exp": (np.exp, True), "fast_tanh": (np.tanh, True),
    "fast_erf": (lambda x: _erf(x.astype(np.float64)).astype(np.float64), True),
    "logical_not": (np.logical_not, False), "bitwise_not": (np.invert, False),
    "copy": (np.copy, False),
}

_BINARY: dict[str, Callable] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": _trunc_div,
    "floor_divide": _floor_div, "trunc_divide": _trunc_div, "floor_mod": _floor_mod,
    "trunc_mod": _trunc_mod, "mod": _trunc_mod, "power": np.power, "maximum": np.maximum,
    "minimum": np.minimum,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}
_BITWISE: dict[str, Callable] = {
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift,
}
_COMPARE: dict[str, Callable] = {
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
}


def _isfloat_ref(fn: Callable) -> Callable:
    """isnan/isinf on integer tensors are constant, as in TVM."""
    def reference(inputs, attrs):
        x = inputs[0]
        if x.dtype.kind in "iub":
            return np.full(x.shape, fn is np.isfinite, dtype=bool)
        return fn(x).astype(bool)
    return reference


# numpy and LLVM both round these correctly (IEEE 754): float results agree bit for bit
_CORRECTLY_ROUNDED = ("add", "subtract", "multiply", "divide", "negative", "sqrt")

for _name, (_fn, _float_only) in _UNARY.items():
    register(OpDef(name=_name, num_inputs=1, type_rel=identity_rel(_name, _float_only),
                   pattern=OpPattern.ELEMWISE, reference=_same(_fn),
                   exact_reference="float" if _name in _CORRECTLY_ROUNDED else ""))
for _name, _fn in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
    register(OpDef(name=_name, num_inputs=1, type_rel=unary_rel(_name, "bool"),
                   pattern=OpPattern.ELEMWISE, reference=_isfloat_ref(_fn)))
for _name, _fn in _BINARY.items():
    register(OpDef(name=_name, num_inputs=2, type_rel=broadcast_rel(_name),
                   pattern=OpPattern.BROADCAST, reference=_same(_fn),
                   exact_reference="float" if _name in _CORRECTLY_ROUNDED else ""))
for _name, _fn in _BITWISE.items():
    register(OpDef(name=_name, num_inputs=2, type_rel=broadcast_rel(_name, int_only=True),
                   pattern=OpPattern.BROADCAST, reference=_same(_fn)))
for _name, _fn in _COMPARE.items():
    register(OpDef(name=_name, num_inputs=2, type_rel=broadcast_rel(_name, "bool"),
                   pattern=OpPattern.BROADCAST, reference=_to("bool", _fn)))


def _unary_ctor(name: str) -> Callable:
    def ctor(data):
        return make_call(name, [data])
    ctor.__name__ = ctor.__qualname__ = name
    ctor.__doc__ = f"relay.{name}(data): elementwise {name}."
    return ctor


def _binary_ctor(name: str) -> Callable:
    def ctor(lhs, rhs):
        return make_call(name, [lhs, rhs])
    ctor.__name__ = ctor.__qualname__ = name
    ctor.__doc__ = f"relay.{name}(lhs, rhs): broadcasting {name}."
    return ctor


negative, abs, exp, log = (_unary_ctor(n) for n in ("negative", "abs", "exp", "log"))
log2, log10, sqrt, rsqrt = (_unary_ctor(n) for n in ("log2", "log10", "sqrt", "rsqrt"))
tanh, sigmoid, erf, floor = (_unary_ctor(n) for n in ("tanh", "sigmoid", "erf", "floor"))
ceil, round, trunc, sign = (_unary_ctor(n) for n in ("ceil", "round", "trunc", "sign"))
sin, cos, tan, asin, acos = (_unary_ctor(n) for n in ("sin", "cos", "tan", "asin", "acos"))
atan, sinh, cosh, asinh = (_unary_ctor(n) for n in ("atan", "sinh", "cosh", "asinh"))
acosh, atanh = (_unary_ctor(n) for n in ("acosh", "atanh"))
fast_exp, fast_tanh, fast_erf = (_unary_ctor(n) for n in ("fast_exp", "fast_tanh", "fast_erf"))
isnan, isinf, isfinite = (_unary_ctor(n) for n in ("isnan", "isinf", "isfinite"))
logical_not, bitwise_not, copy = (_unary_ctor(n)
                                  for n in ("logical_not", "bitwise_not", "copy"))

add, subtract, multiply, divide = (_binary_ctor(n)
                                   for n in ("add", "subtract", "multiply", "divide"))
floor_divide, trunc_divide = _binary_ctor("floor_divide"), _binary_ctor("trunc_divide")
floor_mod, trunc_mod = _binary_ctor("floor_mod"), _binary_ctor("trunc_mod")
power, maximum, minimum = (_binary_ctor(n) for n in ("power", "maximum", "minimum"))
logical_and, logical_or, logical_xor = (_binary_ctor(n)
                                        for n in ("logical_and", "logical_or", "logical_xor"))
bitwise_and, bitwise_or, bitwise_xor = (_binary_ctor(n)
                                        for n in ("bitwise_and", "bitwise_or", "bitwise_xor"))
left_shift, right_shift = _binary_ctor("left_shift"), _binary_ctor("right_shift")
equal, not_equal, less = (_binary_ctor(n) for n in ("equal", "not_equal", "less"))
less_equal, greater = _binary_ctor("less_equal"), _binary_ctor("greater")
greater_equal = _binary_ctor("greater_equal")


mod = _binary_ctor("mod")  # TVM's mod is the truncating remainder (sign follows lhs)


# --- clip, cast, where, *_like ---------------------------------------------------------


def _clip_ref(inputs, attrs):
    x = inputs[0]
    return np.clip(x, attrs.a_min, attrs.a_max).astype(x.dtype, copy=False)


register(OpDef(name="clip", num_inputs=1, type_rel=identity_rel("clip"),
               pattern=OpPattern.ELEMWISE, reference=_clip_ref,
               attrs={"a_min": 0.0, "a_max": 0.0}, attrs_type_key="relay.attrs.ClipAttrs"))


def clip(a, a_min, a_max):
    """relay.clip: clamp to [a_min, a_max] (stored as floats, as TVM's ClipAttrs are doubles)."""
    return make_call("clip", [a], a_min=float(a_min), a_max=float(a_max))


def _cast_rel(types, attrs):
    check_arity("cast", types, 1)
    data = tensor_arg("cast", types, 0, "data")
    try:
        return TensorType(data.shape, attrs.dtype)
    except TypeError:
        raise fail("cast", f"dtype {attrs.dtype!r} is not a known data type") from None


def _cast_ref(inputs, attrs):
    with np.errstate(all="ignore"):
        return inputs[0].astype(attrs.dtype)


register(OpDef(name="cast", num_inputs=1, type_rel=_cast_rel, pattern=OpPattern.ELEMWISE,
               reference=_cast_ref, attrs={"dtype": ""}, attrs_type_key="relay.attrs.CastAttrs"))


def cast(data, dtype):
    """relay.cast: convert elements to dtype (C conversion: float to int truncates)."""
    return make_call("cast", [data], dtype=str(dtype))


def _cast_like_rel(types, attrs):
    check_arity("cast_like", types, 2)
    data = tensor_arg("cast_like", types, 0, "data")
    like = tensor_arg("cast_like", types, 1, "dtype_like")
    return TensorType(data.shape, like.dtype)


def _cast_like_ref(inputs, attrs):
    with np.errstate(all="ignore"):
        return inputs[0].astype(inputs[1].dtype)


register(OpDef(name="cast_like", num_inputs=2, type_rel=_cast_like_rel,
               pattern=OpPattern.ELEMWISE, reference=_cast_like_ref))


def cast_like(data, dtype_like):
    """relay.cast_like: cast data to the dtype of dtype_like."""
    return make_call("cast_like", [data, dtype_like])


def _where_rel(types, attrs):
    check_arity("where", types, 3)
    cond = tensor_arg("where", types, 0, "condition")
    x, y = tensor_arg("where", types, 1, "x"), tensor_arg("where", types, 2, "y")
    same_dtype("where", x, y, ("x", "y"))
    return TensorType(broadcast_shape("where", cond.shape, x.shape, y.shape), x.dtype)


def _where_ref(inputs, attrs):
    cond, x, y = inputs
    return np.where(cond.astype(bool), x, y).astype(x.dtype, copy=False)


register(OpDef(name="where", num_inputs=3, type_rel=_where_rel, pattern=OpPattern.BROADCAST,
               reference=_where_ref))


def where(condition, x, y):
    """relay.where: x where condition is non-zero, else y (all three broadcast)."""
    return make_call("where", [condition, x, y])


def _full_like_rel(types, attrs):
    check_arity("full_like", types, 2)
    data = tensor_arg("full_like", types, 0, "data")
    fill = tensor_arg("full_like", types, 1, "fill_value")
    if fill.shape:
        raise fail("full_like", f"fill_value must be a scalar, got shape {fill.shape}")
    return data


register(OpDef(name="full_like", num_inputs=2, type_rel=_full_like_rel,
               pattern=OpPattern.ELEMWISE,
               reference=lambda ins, attrs: np.full(ins[0].shape, ins[1], dtype=ins[0].dtype)))
register(OpDef(name="zeros_like", num_inputs=1, type_rel=identity_rel("zeros_like"),
               pattern=OpPattern.ELEMWISE, reference=lambda ins, attrs: np.zeros_like(ins[0])))
register(OpDef(name="ones_like", num_inputs=1, type_rel=identity_rel("ones_like"),
               pattern=OpPattern.ELEMWISE, reference=lambda ins, attrs: np.ones_like(ins[0])))


def full_like(data, fill_value):
    """relay.full_like: a tensor like data filled with the scalar fill_value."""
    return make_call("full_like", [data, fill_value])


def zeros_like(data):
    """relay.zeros_like."""
    return make_call("zeros_like", [data])


def ones_like(data):
    """relay.ones_like."""
    return make_call("ones_like", [data])

