"""Sliding-window helpers shared by the conv and pool ops of every rank (2-D, 3-D).

TVM's Python wrappers normalise their window attributes the same way for every rank (an int
stands for all spatial dims; padding is begin values then end values), and the type relations
check channels, layouts and output sizes the same way; keeping one copy here means conv2d and
conv3d (and max_pool2d and max_pool3d) cannot drift apart.
"""
from __future__ import annotations

import itertools

import numpy as np

from compiler.ir.types import TensorType
from .type_relations import (check_arity, dims_agree, divides, fail, holds, int_tuple, known,
                             shapes_agree, tensor_arg)


def ntuple(value, n: int) -> tuple:
    """An int stands for all n spatial dims; a sequence is kept (as TVM's wrappers do)."""
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    return tuple(int(v) for v in value)


def pair(value) -> tuple:
    """An int becomes (v, v); sequences are kept."""
    return ntuple(value, 2)


def triple(value) -> tuple:
    """An int becomes (v, v, v); sequences are kept."""
    return ntuple(value, 3)


def pad_tuple(padding, nd: int) -> tuple:
    """TVM's get_pad_tuple{2,3}d: p -> 2*nd x p; nd values -> begins then the same ends."""
    if isinstance(padding, (int, np.integer)):
        return (int(padding),) * (2 * nd)
    padding = tuple(int(p) for p in padding)
    if len(padding) == 1:
        return padding * (2 * nd)
    if len(padding) == nd:
        return padding * 2
    if len(padding) == 2 * nd:
        return padding
    raise ValueError(f"padding must have 1, {nd} or {2 * nd} values, got {padding}")


def pad_tuple2d(padding) -> tuple:
    """p -> (p,p,p,p); (ph, pw) -> (ph, pw, ph, pw); 4 values kept."""
    return pad_tuple(padding, 2)


def pad_tuple3d(padding) -> tuple:
    """p -> 6 x p; (d, h, w) -> (d, h, w, d, h, w); 6 values kept."""
    return pad_tuple(padding, 3)


def acc_dtype(dtype: str) -> np.dtype:
    """The accumulator of a reference product: float64 for floats, int64 for integers."""
    return np.dtype(np.float64 if np.dtype(dtype).kind == "f" else np.int64)


def check_layout(op: str, name: str, value: str, allowed: tuple) -> None:
    """Only the layouts the compute rules implement are accepted."""
    if value not in allowed:
        raise fail(op, f"{name}={value!r} is not supported; expected one of {allowed}")


def conv_args(op: str, types, attrs, data_layout: str, kernel_layout: str) -> tuple:
    """(data, weight) of a convolution, checked for arity, layouts and rank."""
    check_arity(op, types, 2)
    data, weight = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    check_layout(op, "data_layout", attrs.data_layout, (data_layout,))
    check_layout(op, "kernel_layout", attrs.kernel_layout, (kernel_layout,))
    check_layout(op, "out_layout", attrs.out_layout, ("", data_layout))
    rank = len(data_layout)
    if data.ndim != rank or weight.ndim != rank:
        raise fail(op, f"data and weight must be {rank}-D ({data_layout}, {kernel_layout}), "
                       f"got {data.shape} and {weight.shape}")
    return data, weight


def window_attrs(op: str, attrs, nd: int) -> tuple:
    """(strides, dilation, padding) checked for rank and sign."""
    strides = int_tuple(op, attrs.strides, "strides", nd)
    dilation = int_tuple(op, attrs.dilation, "dilation", nd)
    padding = int_tuple(op, attrs.padding, "padding", 2 * nd)
    if min(strides) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise fail(op, f"strides {strides} and dilation {dilation} must be >= 1 and padding "
                       f"{padding} >= 0")
    return strides, dilation, padding


def window_out_dim(op: str, size: int, k: int, s: int, d: int, pad: int,
                   ceil_mode: bool = False, axis: str = "") -> int:
    """Output length of a window over one axis; ceil_mode adds stride - 1 (TVM's Pool2DRel)."""
    span = d * (k - 1) + 1
    out = (size + pad - span + (s - 1 if ceil_mode else 0)) // s + 1
    if not holds(op, "gt", out, 0, f"the window must fit the input {axis or 'size'}"):
        what = f"output {axis}" if axis else "output size"
        raise fail(op, f"{what} would be {out}: the dilated window {span} does not fit "
                       f"input size {size} with padding {pad}")
    return out


def conv_out_dims(op: str, data: TensorType, weight: TensorType, attrs) -> tuple:
    """Spatial output of a convolution (NC... data, ..HW kernel) after checking the attrs."""
    nd = data.ndim - 2
    strides, dilation, pad = window_attrs(op, attrs, nd)
    names = ("depth", "height", "width")[-nd:] if nd <= 3 else ("",) * nd
    return tuple(window_out_dim(op, data.shape[2 + a], weight.shape[2 + a], strides[a],
                                dilation[a], pad[a] + pad[nd + a], axis=names[a])
                 for a in range(nd))


def conv_out_dim(op: str, size: int, kernel: int, stride: int, dilation: int, pad: int,
                 axis: str) -> int:
    """window_out_dim for a convolution axis named in the message ("height", "width")."""
    return window_out_dim(op, size, kernel, stride, dilation, pad, axis=axis)


def check_conv_weight(op: str, data: TensorType, weight: TensorType, attrs) -> int:
    """Channels/groups/channels=/kernel_size= of an OI... weight; returns the output channels."""
    c, (o, i), groups = data.shape[1], weight.shape[:2], attrs.groups
    if groups < 1 or not dims_agree(op, c, i * groups, "data channels must equal the "
                                    "weight's input channels times groups") or \
            not divides(op, o, groups, "groups must divide the output channels"):
        raise fail(op, f"channels do not match: data has {c} channels, weight {weight.shape} "
                       f"with groups={groups} expects {i * groups} input channels and an "
                       f"output channel count divisible by {groups}")
    if attrs.channels is not None:
        if not dims_agree(op, attrs.channels, o, "channels must equal the weight's outputs"):
            raise fail(op, f"channels={attrs.channels} but weight has {o} output channels")
        o = known(o, attrs.channels)
    if attrs.kernel_size is not None and not shapes_agree(
            op, tuple(attrs.kernel_size), weight.shape[2:], "kernel_size must match the weight"):
        raise fail(op, f"kernel_size={attrs.kernel_size} but weight kernel is {weight.shape[2:]}")
    return o


def check_conv_transpose_weight(op: str, data: TensorType, weight: TensorType, attrs) -> int:
    """Channels/groups of an IO... weight; returns the output channels (O per group x groups)."""
    c, i, groups = data.shape[1], weight.shape[0], attrs.groups
    if groups < 1 or not dims_agree(op, c, i, "data channels must equal the weight's input "
                                    "channels") or \
            not divides(op, c, groups, "groups must divide the data channels"):
        raise fail(op, f"data has {c} channels but weight {weight.shape} has {i} input "
                       f"channels (groups={groups})")
    o = weight.shape[1] * groups
    if attrs.channels is not None:
        if not dims_agree(op, attrs.channels, o, "channels must equal the weight's outputs"):
            raise fail(op, f"channels={attrs.channels} but weight gives {o} output channels")
        o = known(o, attrs.channels)
    return o


def conv_rel(op: str, data_layout: str, kernel_layout: str):
    """The type relation of a convolution with an OI... weight (conv2d, conv3d)."""
    def rel(types, attrs):
        data, weight = conv_args(op, types, attrs, data_layout, kernel_layout)
        o = check_conv_weight(op, data, weight, attrs)
        return TensorType((data.shape[0], o) + conv_out_dims(op, data, weight, attrs),
                          attrs.out_dtype or data.dtype)
    return rel


def conv_transpose_rel(op: str, data_layout: str, kernel_layout: str):
    """The type relation of a transposed convolution with an IO... weight."""
    def rel(types, attrs):
        data, weight = conv_args(op, types, attrs, data_layout, kernel_layout)
        o = check_conv_transpose_weight(op, data, weight, attrs)
        nd = data.ndim - 2
        window_attrs(op, attrs, nd)
        int_tuple(op, attrs.output_padding, "output_padding", nd)
        out = transpose_out_dims(data.shape, weight.shape, attrs)
        if not all([holds(op, "gt", d, 0, "the output size must be positive") for d in out]):
            raise fail(op, f"output size would be {out}; padding {attrs.padding} is too large")
        return TensorType((data.shape[0], o) + out, attrs.out_dtype or data.dtype)
    return rel


def transpose_out_dims(data_shape, weight_shape, attrs) -> tuple:
    """Spatial output of a transposed convolution (the inverse of the conv output length)."""
    nd = len(data_shape) - 2
    return tuple((data_shape[2 + a] - 1) * attrs.strides[a] - attrs.padding[a]
                 - attrs.padding[nd + a] + attrs.dilation[a] * (weight_shape[2 + a] - 1)
                 + attrs.output_padding[a] + 1 for a in range(nd))


def pool_counts(size: int, k: int, s: int, d: int, begin: int, end: int, out: int,
                include_pad: bool) -> np.ndarray:
    """Taps per output position inside the input (or, with include_pad, the padded input).

    With include_pad the divisor of an average stops at the end padding: a ceil-mode window
    that reaches past it counts only its taps in [-begin, size + end), as onnxruntime, the ONNX
    reference and TVM do.
    """
    lo, hi = (-begin, size + end) if include_pad else (0, size)
    taps_at = np.arange(out)[:, None] * s - begin + np.arange(k)[None, :] * d
    return ((taps_at >= lo) & (taps_at < hi)).sum(axis=1)


def has_empty_window(size: int, k: int, s: int, d: int, begin: int, out: int) -> bool:
    """Whether some window along one axis covers only padding (no tap inside the input)."""
    return bool((pool_counts(size, k, s, d, begin, 0, out, False) == 0).any())


def lowest_value(dtype) -> float | int:
    """The lowest finite value of a dtype: a max-pool window over padding alone gives it
    (as onnxruntime and TVM do), not -inf."""
    dt = np.dtype(dtype)
    return dt.type(np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min).item()


def taps(kernel: tuple):
    """Every kernel tap (one index per spatial dim)."""
    return itertools.product(*(range(k) for k in kernel))


def tap_slices(tap, dilation, counts, strides) -> tuple:
    """Index of every output position's input for one kernel tap: (all, all, strided...)."""
    return (slice(None), slice(None)) + tuple(
        slice(t * d, t * d + (n - 1) * s + 1, s)
        for t, d, n, s in zip(tap, dilation, counts, strides))


def conv_ref(inputs, attrs):
    """Reference N-d grouped convolution (NC..., OI...): a sum over kernel taps of slices."""
    data, weight = inputs
    out_dtype = attrs.out_dtype or data.dtype
    acc = acc_dtype(out_dtype)
    nd = data.ndim - 2
    pad = attrs.padding
    x = np.pad(data.astype(acc), ((0, 0), (0, 0)) + tuple((pad[a], pad[nd + a])
                                                          for a in range(nd)))
    wgt = weight.astype(acc)
    ks = weight.shape[2:]
    outs = tuple((x.shape[2 + a] - attrs.dilation[a] * (ks[a] - 1) - 1) // attrs.strides[a] + 1
                 for a in range(nd))
    o, ig = weight.shape[:2]
    og = o // attrs.groups
    out = np.zeros((data.shape[0], o) + outs, acc)
    for g in range(attrs.groups):
        xs, ws = x[:, g * ig:(g + 1) * ig], wgt[g * og:(g + 1) * og]
        for tap in taps(ks):
            patch = xs[tap_slices(tap, attrs.dilation, outs, attrs.strides)]
            out[:, g * og:(g + 1) * og] += np.tensordot(ws[(slice(None), slice(None)) + tap],
                                                        patch, axes=([1], [1])).swapaxes(0, 1)
    return out.astype(out_dtype)


def conv_transpose_ref(inputs, attrs):
    """Reference N-d transposed convolution (NC..., IO...): scatter every tap into a
    full-size buffer, then crop the padding."""
    data, weight = inputs
    out_dtype = attrs.out_dtype or data.dtype
    acc = acc_dtype(out_dtype)
    nd = data.ndim - 2
    outs = transpose_out_dims(data.shape, weight.shape, attrs)
    sp, ks = data.shape[2:], weight.shape[2:]
    full = tuple(max((sp[a] - 1) * attrs.strides[a] + attrs.dilation[a] * (ks[a] - 1) + 1,
                     attrs.padding[a] + outs[a]) for a in range(nd))
    ig, og = data.shape[1] // attrs.groups, weight.shape[1]
    buf = np.zeros((data.shape[0], og * attrs.groups) + full, acc)
    x, wgt = data.astype(acc), weight.astype(acc)
    for g in range(attrs.groups):
        xs, ws = x[:, g * ig:(g + 1) * ig], wgt[g * ig:(g + 1) * ig]
        for tap in taps(ks):
            contrib = np.tensordot(ws[(slice(None), slice(None)) + tap], xs,
                                   axes=([0], [1])).swapaxes(0, 1)
            sl = tap_slices(tap, attrs.dilation, sp, attrs.strides)
            buf[(slice(None), slice(g * og, (g + 1) * og)) + sl[2:]] += contrib
    crop = tuple(slice(attrs.padding[a], attrs.padding[a] + outs[a]) for a in range(nd))
    return buf[(slice(None), slice(None)) + crop].astype(out_dtype)
