"""relay.nn normalisation (batch/layer/instance/group norm, lrn), dropout, pad, flatten."""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import RelayExpr, TupleGetItem, TupleWrapper, const
from compiler.ir.types import TensorType, TupleType
from .registry import OpDef, OpPattern, make_call, register, static_or_expr
from .type_relations import (check_arity, divides, fail, holds, is_dyn, known, normalize_axis,
                             same_dtype, shapes_agree, tensor_arg)

__all__ = ["batch_norm", "layer_norm", "instance_norm", "group_norm", "lrn", "dropout",
           "dropout_raw", "pad", "batch_flatten"]

_NORM_ATTRS = {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True}


def _vector_args(op: str, types, data: TensorType, axis: int, names: tuple):
    """gamma/beta/mean/var must be [data.shape[axis]] of data's dtype; returns that dim
    (static when some vector knows it)."""
    want = (data.shape[axis],)
    dim = want[0]
    for index, name in enumerate(names, start=1):
        vec = tensor_arg(op, types, index, name)
        if not shapes_agree(op, vec.shape, want, f"{name} must match axis {axis} of data"):
            raise fail(op, f"{name} must have shape {want} (axis {axis} of data {data.shape}), "
                           f"got {vec.shape}")
        same_dtype(op, data, vec, ("data", name))
        dim = known(dim, vec.shape[0])
    return dim


def _affine(out: np.ndarray, gamma, beta, attrs, axis: int) -> np.ndarray:
    shape = [1] * out.ndim
    shape[axis] = -1
    if attrs.scale:
        out = out * gamma.astype(np.float64).reshape(shape)
    if attrs.center:
        out = out + beta.astype(np.float64).reshape(shape)
    return out


def _batch_norm_rel(types, attrs):
    op = "nn.batch_norm"
    check_arity(op, types, 5)
    data = tensor_arg(op, types, 0, "data")
    axis = normalize_axis(op, attrs.axis, data.ndim)
    channels = _vector_args(op, types, data, axis, ("gamma", "beta", "moving_mean",
                                                    "moving_var"))
    vec = TensorType((channels,), data.dtype)
    return TupleType([data, vec, vec])


def _batch_norm_ref(inputs, attrs):
    """Inference form: normalise with the moving statistics; they are returned unchanged."""
    data, gamma, beta, mean, var = inputs
    axis = attrs.axis % data.ndim
    shape = [1] * data.ndim
    shape[axis] = -1
    x = data.astype(np.float64)
    out = (x - mean.astype(np.float64).reshape(shape)) / np.sqrt(
        var.astype(np.float64).reshape(shape) + attrs.epsilon)
    out = _affine(out, gamma, beta, attrs, axis)
    return (out.astype(data.dtype), mean.copy(), var.copy())


register(OpDef(name="nn.batch_norm", num_inputs=5, type_rel=_batch_norm_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_batch_norm_ref,
               attrs=dict(_NORM_ATTRS), attrs_type_key="relay.attrs.BatchNormAttrs"))


def batch_norm(data, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5, center=True,
               scale=True):
    """relay.nn.batch_norm: a TupleWrapper of (out, mean, var); [0] is the normalised data."""
    call = make_call("nn.batch_norm", [data, gamma, beta, moving_mean, moving_var],
                     axis=int(axis), epsilon=float(epsilon), center=bool(center),
                     scale=bool(scale))
    return TupleWrapper(call, 3)


def _stat_norm_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 3)
        data = tensor_arg(op, types, 0, "data")
        axis = normalize_axis(op, attrs.axis, data.ndim)
        if op == "nn.instance_norm" and data.ndim < 3:
            raise fail(op, f"data must have rank >= 3, got {data.shape}")
        if op == "nn.group_norm" and not divides(op, data.shape[axis], attrs.num_groups,
                                                 "num_groups must divide the channels"):
            raise fail(op, f"{data.shape[axis]} channels cannot be split into "
                           f"num_groups={attrs.num_groups} groups")
        dim = _vector_args(op, types, data, axis, ("gamma", "beta"))
        if is_dyn(data.shape[axis]) and not is_dyn(dim):  # gamma tells the channel count
            data = TensorType(data.shape[:axis] + (dim,) + data.shape[axis + 1:], data.dtype)
        return data
    return rel


def _normalise(x: np.ndarray, axes: tuple, eps: float) -> np.ndarray:
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def _layer_norm_ref(inputs, attrs):
    data, gamma, beta = inputs
    axis = attrs.axis % data.ndim
    out = _normalise(data.astype(np.float64), (axis,), attrs.epsilon)
    return _affine(out, gamma, beta, attrs, axis).astype(data.dtype)


def _instance_norm_ref(inputs, attrs):
    data, gamma, beta = inputs
    axis = attrs.axis % data.ndim
    axes = tuple(i for i in range(1, data.ndim) if i != axis)
    out = _normalise(data.astype(np.float64), axes, attrs.epsilon)
    return _affine(out, gamma, beta, attrs, axis).astype(data.dtype)


def _group_norm_ref(inputs, attrs):
    data, gamma, beta = inputs
    axis = attrs.axis % data.ndim
    groups = attrs.num_groups
    shape = data.shape
    grouped = data.astype(np.float64).reshape(
        shape[:axis] + (groups, shape[axis] // groups) + shape[axis + 1:])
    axes = tuple(range(axis + 1, grouped.ndim))
    out = _normalise(grouped, axes, attrs.epsilon).reshape(shape)
    return _affine(out, gamma, beta, attrs, axis).astype(data.dtype)


for _name, _ref, _axis, _key in (
        ("nn.layer_norm", _layer_norm_ref, -1, "LayerNormAttrs"),
        ("nn.instance_norm", _instance_norm_ref, 1, "InstanceNormAttrs")):
    register(OpDef(name=_name, num_inputs=3, type_rel=_stat_norm_rel(_name),
                   pattern=OpPattern.OPAQUE, reference=_ref,
                   attrs={**_NORM_ATTRS, "axis": _axis}, attrs_type_key=f"relay.attrs.{_key}"))
register(OpDef(name="nn.group_norm", num_inputs=3, type_rel=_stat_norm_rel("nn.group_norm"),
               pattern=OpPattern.OPAQUE, reference=_group_norm_ref,
               attrs={"num_groups": 0, **_NORM_ATTRS},
               attrs_type_key="relay.attrs.GroupNormAttrs"))


def layer_norm(data, gamma, beta, axis=-1, epsilon=1e-5, center=True, scale=True):
    """relay.nn.layer_norm: normalise over one axis."""
    return make_call("nn.layer_norm", [data, gamma, beta], axis=int(axis),
                     epsilon=float(epsilon), center=bool(center), scale=bool(scale))


def instance_norm(data, gamma, beta, axis=1, epsilon=1e-5, center=True, scale=True):
    """relay.nn.instance_norm: normalise each (sample, channel) over the spatial axes."""
    return make_call("nn.instance_norm", [data, gamma, beta], axis=int(axis),
                     epsilon=float(epsilon), center=bool(center), scale=bool(scale))


def group_norm(data, gamma, beta, num_groups, axis=1, epsilon=1e-5, center=True, scale=True):
    """relay.nn.group_norm: normalise over groups of channels and the spatial axes."""
    return make_call("nn.group_norm", [data, gamma, beta], num_groups=int(num_groups),
                     axis=int(axis), epsilon=float(epsilon), center=bool(center),
                     scale=bool(scale))


def _lrn_rel(types, attrs):
    check_arity("nn.lrn", types, 1)
    data = tensor_arg("nn.lrn", types, 0, "data")
    normalize_axis("nn.lrn", attrs.axis, data.ndim)
    if attrs.size < 1:
        raise fail("nn.lrn", f"size must be >= 1, got {attrs.size}")
    return data


def _lrn_ref(inputs, attrs):
    """TVM's formula: x / (bias + alpha / size * sum(x^2 over [c - size//2, + size)))^beta."""
    data = inputs[0]
    axis, size = attrs.axis % data.ndim, attrs.size
    sq = data.astype(np.float64) ** 2
    widths = [(0, 0)] * data.ndim
    widths[axis] = (size // 2, size // 2)
    padded = np.pad(sq, widths)
    total = np.zeros_like(sq)
    n = data.shape[axis]
    for r in range(size):
        total += np.take(padded, np.arange(r, r + n), axis=axis)
    out = data / (attrs.bias + attrs.alpha * total / size) ** attrs.beta
    return out.astype(data.dtype)


register(OpDef(name="nn.lrn", num_inputs=1, type_rel=_lrn_rel, pattern=OpPattern.OPAQUE,
               reference=_lrn_ref, attrs={"size": 5, "axis": 1, "bias": 2.0, "alpha": 1e-5,
                                          "beta": 0.75},
               attrs_type_key="relay.attrs.LRNAttrs"))


def lrn(data, size=5, axis=1, bias=2, alpha=0.00001, beta=0.75):
    """relay.nn.lrn: local response normalisation across axis."""
    return make_call("nn.lrn", [data], size=int(size), axis=int(axis), bias=float(bias),
                     alpha=float(alpha), beta=float(beta))


def _dropout_rel(types, attrs):
    check_arity("nn.dropout", types, 1)
    data = tensor_arg("nn.dropout", types, 0, "data")
    return TupleType([data, data])


register(OpDef(name="nn.dropout", num_inputs=1, type_rel=_dropout_rel, pattern=OpPattern.OPAQUE,
               reference=lambda ins, attrs: (ins[0].copy(), np.ones_like(ins[0])),
               attrs={"rate": 0.5}, attrs_type_key="relay.attrs.DropoutAttrs", stateful=True))


def dropout(data, rate=0.5):
    """relay.nn.dropout: TupleGetItem(dropout_call, 0); the reference is inference (identity)."""
    return TupleGetItem(make_call("nn.dropout", [data], rate=float(rate)), 0)


def dropout_raw(data, rate=0.5):
    """The dropout call itself (both outputs), as TVM's dropout_raw."""
    return TupleWrapper(make_call("nn.dropout", [data], rate=float(rate)), 2)


_PAD_MODES = ("constant", "edge", "reflect")


def _pad_rel(types, attrs):
    op = "nn.pad"
    check_arity(op, types, 2)
    data = tensor_arg(op, types, 0, "data")
    value = tensor_arg(op, types, 1, "pad_value")
    if value.shape:
        raise fail(op, f"pad_value must be a scalar, got shape {value.shape}")
    if attrs.pad_mode not in _PAD_MODES:
        raise fail(op, f"pad_mode must be one of {_PAD_MODES}, got {attrs.pad_mode!r}")
    widths = attrs.pad_width
    if len(widths) != data.ndim or any(len(w) != 2 for w in widths):
        raise fail(op, f"pad_width must hold one (before, after) pair per axis of data "
                       f"{data.shape}, got {widths}")
    out = []
    for axis, (dim, (before, after)) in enumerate(zip(data.shape, widths)):
        kept = dim + min(before, 0) + min(after, 0)  # a negative width crops first
        if not holds(op, "ge", kept, 0, f"pad_width on axis {axis} crops more than the dim"):
            raise fail(op, f"pad_width {(before, after)} on axis {axis} crops more than its "
                           f"{dim} values")
        padded = before > 0 or after > 0
        if attrs.pad_mode != "constant" and padded and \
                not holds(op, "gt", kept, 0, f"{attrs.pad_mode} padding needs values on axis "
                                             f"{axis}"):
            raise fail(op, f"{attrs.pad_mode} padding {(before, after)} on axis {axis} needs "
                           "values to copy, but the axis is empty (as onnxruntime, only "
                           "constant mode pads an empty axis)")
        if attrs.pad_mode == "reflect" and padded and \
                not holds(op, "gt", kept, max(before, after), f"reflect padding on axis {axis} "
                                                              "needs a larger dim"):
            raise fail(op, f"reflect padding {(before, after)} on axis {axis} needs a "
                           f"dimension larger than the padding, got {kept}")
        out.append(dim + before + after)
    return TensorType(tuple(out), data.dtype)


def _pad_ref(inputs, attrs):
    data, value = inputs
    widths = [tuple(w) for w in attrs.pad_width]
    data = data[tuple(slice(max(-b, 0), data.shape[i] - max(-a, 0))  # crop negative widths
                      for i, (b, a) in enumerate(widths))]
    widths = [(max(b, 0), max(a, 0)) for b, a in widths]
    if attrs.pad_mode == "constant":
        return np.pad(data, widths, constant_values=value.astype(data.dtype))
    return np.pad(data, widths, mode=attrs.pad_mode)


register(OpDef(name="nn.pad", num_inputs=2, type_rel=_pad_rel, pattern=OpPattern.INJECTIVE,
               reference=_pad_ref, attrs={"pad_width": (), "pad_mode": "constant"},
               attrs_type_key="relay.attrs.PadAttrs", exact_reference="values"))


def pad(data, pad_width, pad_value=0, pad_mode="constant"):
    """relay.nn.pad: pad_width is ((before, after), ...) per axis (negative crops); pad_value
    is an argument."""
    if not isinstance(pad_value, RelayExpr):
        pad_value = const(pad_value)
    pad_width, dynamic = static_or_expr(pad_width)
    if dynamic is not None:  # a computed [ndim, 2] tensor
        return make_call("dyn.nn.pad", [data, dynamic, pad_value], pad_mode=pad_mode)
    widths = tuple((int(b), int(a)) for b, a in np.asarray(pad_width).reshape(-1, 2).tolist())
    return make_call("nn.pad", [data, pad_value], pad_width=widths, pad_mode=pad_mode)


def _batch_flatten_rel(types, attrs):
    check_arity("nn.batch_flatten", types, 1)
    data = tensor_arg("nn.batch_flatten", types, 0, "data")
    if data.ndim < 1:
        raise fail("nn.batch_flatten", "data must have rank >= 1, got a scalar")
    rest = 1
    for d in data.shape[1:]:
        rest = rest * d
    return TensorType((data.shape[0], rest), data.dtype)


register(OpDef(name="nn.batch_flatten", num_inputs=1, type_rel=_batch_flatten_rel,
               pattern=OpPattern.INJECTIVE,
               reference=lambda ins, attrs: ins[0].reshape(ins[0].shape[0], -1),
               reshape_only=True))


def batch_flatten(data):
    """relay.nn.batch_flatten: [N, ...] -> [N, prod(...)]."""
    return make_call("nn.batch_flatten", [data])
