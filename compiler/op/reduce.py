"""Reductions: sum, mean, max, min, prod, all, any, argmax, argmin, variance, std, logsumexp."""
from __future__ import annotations

from typing import Callable

import builtins

import numpy as np

from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register
from .tensor import exp, log, sqrt
from .transform import squeeze
from .type_relations import (as_axis_list, check_arity, fail, reduce_axes, reduce_rel,
                             reduce_shape, same_dtype, shapes_agree, tensor_arg)

# sum/max/min/all/any below shadow the builtins on purpose (relay.sum, ...); use builtins.*
__all__ = ["sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin", "variance",
           "std", "logsumexp"]

_REDUCE_ATTRS = {"axis": None, "keepdims": False, "exclude": False}


def _axes_of(x: np.ndarray, attrs) -> tuple:
    return tuple(reduce_axes("reduce", x.ndim, attrs.axis, attrs.exclude))


def _reducer(fn: Callable) -> Callable:
    """A reference applying fn over the reduced axes and keeping the input dtype."""
    def reference(inputs, attrs):
        x = inputs[0]
        with np.errstate(all="ignore"):
            out = fn(x, _axes_of(x, attrs), attrs.keepdims)
        return np.asarray(out).astype(x.dtype, copy=False)
    return reference


def _sum(x, axes, keepdims):
    # integers wrap in their own width, as the generated code accumulates in the input dtype
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype if x.dtype.kind in "iu"
                  else np.float64)


def _prod(x, axes, keepdims):
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=x.dtype if x.dtype.kind in "iu"
                   else np.float64)


def _mean(x, axes, keepdims):
    """sum / count; integer means divide with truncation, as TVM's divide does."""
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    total = _sum(x, axes, keepdims)
    if x.dtype.kind in "iu":
        return np.trunc(total.astype(np.float64) / builtins.max(count, 1))
    return total / count


_REDUCERS = {
    "sum": _sum, "prod": _prod, "mean": _mean,
    "max": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "min": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "all": lambda x, a, k: np.all(x, axis=a, keepdims=k),
    "any": lambda x, a, k: np.any(x, axis=a, keepdims=k),
}
for _name, _fn in _REDUCERS.items():
    register(OpDef(name=_name, num_inputs=1, type_rel=reduce_rel(_name),
                   pattern=OpPattern.COMM_REDUCE, reference=_reducer(_fn),
                   attrs=dict(_REDUCE_ATTRS), attrs_type_key="relay.attrs.ReduceAttrs"))


def _reduce_ctor(name: str) -> Callable:
    def ctor(data, axis=None, keepdims=False, exclude=False):
        return make_call(name, [data], axis=as_axis_list(axis), keepdims=bool(keepdims),
                         exclude=bool(exclude))
    ctor.__name__ = ctor.__qualname__ = name
    ctor.__doc__ = f"relay.{name}(data, axis=None, keepdims=False, exclude=False)."
    return ctor


sum, mean, max, min = (_reduce_ctor(n) for n in ("sum", "mean", "max", "min"))
prod, all, any = (_reduce_ctor(n) for n in ("prod", "all", "any"))


# --- argmax / argmin -----------------------------------------------------------------------


def _arg_ref(fn: Callable) -> Callable:
    """Index into the reduced axes flattened in row-major order; first (or last) extremum."""
    def reference(inputs, attrs):
        x = inputs[0]
        axes = _axes_of(x, attrs)
        kept = [i for i in range(x.ndim) if i not in axes]
        moved = x.transpose(kept + list(axes)).reshape([x.shape[i] for i in kept] + [-1])
        if attrs.select_last_index:
            idx = moved.shape[-1] - 1 - fn(moved[..., ::-1], axis=-1)
        else:
            idx = fn(moved, axis=-1)
        shape = reduce_shape(x.shape, list(axes), attrs.keepdims)
        return np.asarray(idx).reshape(shape).astype("int32")
    return reference


for _name, _fn in (("argmax", np.argmax), ("argmin", np.argmin)):
    register(OpDef(name=_name, num_inputs=1, type_rel=reduce_rel(_name, "int32"),
                   pattern=OpPattern.COMM_REDUCE, reference=_arg_ref(_fn),
                   attrs={**_REDUCE_ATTRS, "select_last_index": False},
                   attrs_type_key="relay.attrs.ArgReduceAttrs"))


def argmax(data, axis=None, keepdims=False, exclude=False, select_last_index=False):
    """relay.argmax: int32 indices of the maxima."""
    return make_call("argmax", [data], axis=as_axis_list(axis), keepdims=bool(keepdims),
                     exclude=bool(exclude), select_last_index=bool(select_last_index))


def argmin(data, axis=None, keepdims=False, exclude=False, select_last_index=False):
    """relay.argmin: int32 indices of the minima."""
    return make_call("argmin", [data], axis=as_axis_list(axis), keepdims=bool(keepdims),
                     exclude=bool(exclude), select_last_index=bool(select_last_index))


# --- variance / std / logsumexp ------------------------------------------------------------


def _variance_rel(types, attrs):
    check_arity("variance", types, 2)
    data = tensor_arg("variance", types, 0, "data")
    mean_t = tensor_arg("variance", types, 1, "mean")
    same_dtype("variance", data, mean_t, ("data", "mean"))
    axes = reduce_axes("variance", data.ndim, attrs.axis, attrs.exclude)
    if not shapes_agree("variance", mean_t.shape, reduce_shape(data.shape, axes, True),
                        "mean must have the keepdims-reduced shape of data"):
        raise fail("variance", f"mean must have the keepdims-reduced shape "
                               f"{reduce_shape(data.shape, axes, True)}, got {mean_t.shape}")
    return TensorType(reduce_shape(data.shape, axes, attrs.keepdims), data.dtype)


def _variance_ref(inputs, attrs):
    data, mean_ = inputs
    axes = _axes_of(data, attrs)
    count = int(np.prod([data.shape[a] for a in axes], dtype=np.int64))
    sq = (data.astype(np.float64) - mean_.astype(np.float64)) ** 2
    total = sq.sum(axis=axes, keepdims=attrs.keepdims)
    return (total / (count - 1 if attrs.unbiased else count)).astype(data.dtype)


register(OpDef(name="variance", num_inputs=2, type_rel=_variance_rel,
               pattern=OpPattern.COMM_REDUCE, reference=_variance_ref,
               attrs={**_REDUCE_ATTRS, "unbiased": False},
               attrs_type_key="relay.attrs.VarianceAttrs"))


def variance(data, axis=None, keepdims=False, exclude=False, unbiased=False, with_mean=None):
    """relay.variance: the op takes (data, mean); mean defaults to mean(data, axis, True)."""
    m = mean(data, axis, True, exclude) if with_mean is None else with_mean
    return make_call("variance", [data, m], axis=as_axis_list(axis), keepdims=bool(keepdims),
                     exclude=bool(exclude), unbiased=bool(unbiased))


def std(data, axis=None, keepdims=False, exclude=False, unbiased=False):
    """relay.std: sqrt(variance(...)), composed as TVM does (there is no std op)."""
    return sqrt(variance(data, axis, keepdims, exclude, unbiased))


def logsumexp(data, axis=None, keepdims=False):
    """relay.logsumexp: log(sum(exp(x - max))) + max, composed as TVM does."""
    axis = as_axis_list(axis)
    max_x = max(data, axis, True)
    out = log(sum(exp(data - max_x), axis, True)) + max_x
    return out if keepdims else squeeze(out, axis)
