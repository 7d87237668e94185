"""Elementwise and broadcasting ops: one table of unary intrinsics, one broadcast helper."""
from __future__ import annotations

import math
from typing import Callable

from codegen.tir.dtype import bits as nbits, max_value, min_value

from . import bits
from .common import (Expr, bcast, const_of, fail, is_bool, is_float, rule, scalar,
                     te, tensor_name, tir, to_bool)


def _same(x: Expr) -> Expr:
    return x


def _float_or_same(name: str) -> Callable[[Expr], Expr]:
    """floor/ceil/round/trunc: identity on integers (numpy's result casts back unchanged)."""
    return lambda x: tir.call(name, x) if is_float(x.dtype) else x


def _logical_not(x: Expr) -> Expr:
    return tir.cast(tir.logical_not(to_bool(x)), x.dtype)


def _bitwise_not(x: Expr) -> Expr:
    return tir.logical_not(x) if is_bool(x.dtype) else bits.bit_not(x)


def _intrinsic(name: str) -> Callable[[Expr], Expr]:
    return lambda x: tir.call(name, x)


UNARY: dict[str, Callable[[Expr], Expr]] = {
    "negative": tir.neg, "abs": tir.abs, "sign": tir.sign, "copy": _same,
    "annotation.stop_fusion": _same,
    "fast_exp": _intrinsic("exp"), "fast_tanh": _intrinsic("tanh"), "fast_erf": _intrinsic("erf"),
    **{n: _float_or_same(n) for n in ("floor", "ceil", "round", "trunc")},
    **{n: _intrinsic(n) for n in (
        "exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos",
        "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")},
    "logical_not": _logical_not, "bitwise_not": _bitwise_not,
}


def _unary(name: str, fn: Callable[[Expr], Expr]) -> None:
    @rule(name)
    def _(inputs, attrs, out_type):
        (x,) = inputs
        return te.compute(x.shape, lambda *i: tir.cast(fn(x[i]), out_type.dtype),
                          name=tensor_name(name))


for _n, _f in UNARY.items():
    _unary(_n, _f)


def _float_class(name: str) -> None:
    @rule(name)
    def _(inputs, attrs, out_type):
        (x,) = inputs
        if not is_float(x.dtype):  # integers are never nan/inf: a constant, as the reference
            return te.compute(x.shape, lambda *i: tir.const(int(name == "isfinite"), "bool"),
                              name=tensor_name(name))
        return te.compute(x.shape, lambda *i: tir.call(name, x[i]), name=tensor_name(name))


for _n in ("isnan", "isinf", "isfinite"):
    _float_class(_n)


# --- binary ------------------------------------------------------------------------------


def _int_power(shape: tuple, a: te.Tensor, b: te.Tensor, out_dtype: str) -> te.Tensor:
    """a ** b for integers by squaring over the exponent's bits (wrapping, as numpy).

    The squares a**(2**k) are materialized stages: as one expression the repeated `base * base`
    would be a DAG whose printed form (the JIT cache key) doubles with every bit."""
    result = te.compute(shape, lambda *i: tir.const(1, out_dtype), name="T_power")
    base = te.compute(shape, lambda *i: bcast(a, shape, i), name="T_power_base")
    for k in range(nbits(out_dtype)):
        def step(*i, r=result, s=base, k=k):
            e = bcast(b, shape, i)
            odd = tir.eq(tir.floormod(tir.floordiv(e, tir.const(1 << k, e.dtype)), 2),
                         tir.const(1, e.dtype)) if k < nbits(out_dtype) - 1 else \
                tir.lt(e, tir.const(0, e.dtype))
            return r[i] * tir.select(odd, s[i], tir.const(1, out_dtype))
        result = te.compute(shape, step, name="T_power")
        base = te.materialize(te.compute(shape, lambda *i, s=base: s[i] * s[i],
                                         name="T_power_base"))
    return result


def _floor_mod(a: Expr, b: Expr) -> Expr:
    """numpy.mod for floats and ints (x % 0 is 0 for ints): tir.floormod is exactly that."""
    return tir.floormod(a, b)


def _trunc_mod(a: Expr, b: Expr) -> Expr:
    return tir.truncmod(a, b)


def _bool_arith(kind: str) -> Callable[[Expr, Expr], Expr]:
    return {"add": tir.logical_or, "multiply": tir.logical_and, "maximum": tir.logical_or,
            "minimum": tir.logical_and}[kind]


def _logic(fn: Callable[[Expr, Expr], Expr]) -> Callable[[Expr, Expr], Expr]:
    return lambda a, b: fn(to_bool(a), to_bool(b))


BINARY: dict[str, Callable[[Expr, Expr], Expr]] = {
    "add": tir.add, "subtract": tir.sub, "multiply": tir.mul, "divide": tir.div,
    "trunc_divide": tir.truncdiv, "floor_divide": tir.floordiv, "floor_mod": _floor_mod,
    "trunc_mod": _trunc_mod, "mod": _trunc_mod,
    "power": tir.pow,
    "maximum": tir.max, "minimum": tir.min,
    "logical_and": _logic(tir.logical_and), "logical_or": _logic(tir.logical_or),
    "logical_xor": _logic(tir.ne),
    "bitwise_and": lambda a, b: tir.logical_and(a, b) if is_bool(a.dtype) else
    bits.bitwise("and", a, b),
    "bitwise_or": lambda a, b: tir.logical_or(a, b) if is_bool(a.dtype) else
    bits.bitwise("or", a, b),
    "bitwise_xor": lambda a, b: tir.ne(a, b) if is_bool(a.dtype) else bits.bitwise("xor", a, b),
    "left_shift": bits.shift_left, "right_shift": bits.shift_right,
    "equal": tir.eq, "not_equal": tir.ne, "less": tir.lt, "less_equal": tir.le,
    "greater": tir.gt, "greater_equal": tir.ge,
}


def _binary(name: str, fn: Callable[[Expr, Expr], Expr]) -> None:
    @rule(name)
    def _(inputs, attrs, out_type):
        a, b = inputs
        shape = out_type.shape
        f = fn
        if is_bool(a.dtype) and name in ("add", "multiply", "maximum", "minimum"):
            f = _bool_arith(name)
        elif is_bool(a.dtype) and name in ("left_shift", "right_shift", "power", "subtract"):
            raise fail(name, f"{name} on bool tensors is not supported")
        elif name == "power" and not is_float(a.dtype):
            return _int_power(shape, a, b, out_type.dtype)
        return te.compute(shape, lambda *i: tir.cast(f(bcast(a, shape, i), bcast(b, shape, i)),
                                                     out_type.dtype), name=tensor_name(name))


for _n, _f in BINARY.items():
    _binary(_n, _f)


# --- clip, cast, where, *_like, activations -------------------------------------------------


def clip_expr(x: Expr, a_min: float, a_max: float) -> Expr:
    """numpy.clip(x, a_min, a_max) cast back to x's dtype (max first, then min, as numpy)."""
    dt = x.dtype
    if is_float(dt):
        return tir.min(tir.max(x, tir.const(a_min, dt)), tir.const(a_max, dt))
    if is_bool(dt):
        raise fail("clip", "clip on bool tensors is not supported")
    lo_t, hi_t = min_value(dt), max_value(dt)
    # for an integer x: x < a_min  <=>  x < ceil(a_min);  x > a_max  <=>  x > floor(a_max)
    low_val = const_of(_trunc(min(a_min, a_max)), dt)   # numpy gives min(a_min, a_max) here
    high_val = const_of(_trunc(a_max), dt)
    out = x
    if not math.isnan(a_max) and a_max < hi_t:
        out = tir.select(tir.gt(x, const_of(math.floor(a_max), dt)), high_val, out)
    if not math.isnan(a_min) and a_min > lo_t:
        out = tir.select(tir.lt(x, const_of(math.ceil(a_min), dt)), low_val, out)
    return out


def _trunc(v: float) -> float:
    return math.trunc(v) if math.isfinite(v) else v


@rule("clip")
def _clip(inputs, attrs, out_type):
    (x,) = inputs
    return te.compute(x.shape, lambda *i: clip_expr(x[i], float(attrs.a_min), float(attrs.a_max)),
                      name="T_clip")


@rule("cast", "cast_like")
def _cast(inputs, attrs, out_type):
    x = inputs[0]
    return te.compute(x.shape, lambda *i: tir.cast(x[i], out_type.dtype), name="T_cast")


@rule("where")
def _where(inputs, attrs, out_type):
    c, x, y = inputs
    shape = out_type.shape
    return te.compute(shape, lambda *i: tir.select(to_bool(bcast(c, shape, i)), bcast(x, shape, i),
                                                   bcast(y, shape, i)), name="T_where")


def _const_fill(name: str, value: int) -> None:
    @rule(name)
    def _(inputs, attrs, out_type):
        return te.compute(out_type.shape, lambda *i: tir.const(value, out_type.dtype),
                          name=tensor_name(name))


for _n, _v in (("zeros_like", 0), ("ones_like", 1), ("zeros", 0), ("ones", 1)):
    _const_fill(_n, _v)


@rule("full_like", "full")
def _full(inputs, attrs, out_type):
    fill = inputs[-1]
    return te.compute(out_type.shape, lambda *i: tir.cast(scalar(fill), out_type.dtype),
                      name="T_full")


@rule("nn.relu")
def _relu(inputs, attrs, out_type):
    (x,) = inputs
    if is_bool(x.dtype):
        return te.compute(x.shape, lambda *i: x[i], name="T_relu")
    return te.compute(x.shape, lambda *i: tir.max(x[i], tir.const(0, x.dtype)), name="T_relu")


def _scale(x: Expr, alpha: float | Expr) -> Expr:
    """x * alpha in x's float type, or in float64 truncated back for integers (the reference)."""
    if isinstance(alpha, Expr):
        return x * alpha
    if is_float(x.dtype):
        return x * tir.const(alpha, x.dtype)
    return tir.cast(tir.cast(x, "float64") * tir.const(alpha, "float64"), x.dtype)


@rule("nn.leaky_relu")
def _leaky_relu(inputs, attrs, out_type):
    (x,) = inputs
    zero = tir.const(0, x.dtype)
    return te.compute(x.shape, lambda *i: tir.select(tir.lt(x[i], zero),
                                                     _scale(x[i], float(attrs.alpha)), x[i]),
                      name="T_leaky_relu")


def _channel(vec: te.Tensor, axis: int, ndim: int, idx: tuple) -> Expr:
    return vec[idx[axis % ndim]]


@rule("nn.prelu")
def _prelu(inputs, attrs, out_type):
    x, alpha = inputs
    zero = tir.const(0, x.dtype)
    return te.compute(x.shape, lambda *i: tir.select(
        tir.lt(x[i], zero), x[i] * _channel(alpha, attrs.axis, x.ndim, i), x[i]),
        name="T_prelu")


@rule("nn.bias_add")
def _bias_add(inputs, attrs, out_type):
    x, bias = inputs
    return te.compute(x.shape, lambda *i: x[i] + _channel(bias, attrs.axis, x.ndim, i),
                      name="T_bias_add")
