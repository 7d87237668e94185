"""relay.nn 3-D ops: conv3d, conv3d_transpose, max_pool3d, avg_pool3d (NCDHW, TVM's names).

Padding is six values (front, top, left, back, bottom, right) as TVM's get_pad_tuple3d gives.
The references work over any number of spatial dims; the relations check 5-D inputs.
"""
from __future__ import annotations

import itertools

import numpy as np

from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import check_arity, fail, int_tuple, tensor_arg

__all__ = ["conv3d", "conv3d_transpose", "max_pool3d", "avg_pool3d"]


def triple(value) -> tuple:
    """An int becomes (v, v, v); sequences are kept."""
    if isinstance(value, (int, np.integer)):
        return (int(value),) * 3
    return tuple(int(v) for v in value)


def pad_tuple3d(padding) -> tuple:
    """TVM's get_pad_tuple3d: p -> 6 x p; (d, h, w) -> (d, h, w, d, h, w); 6 values kept."""
    if isinstance(padding, (int, np.integer)):
        return (int(padding),) * 6
    padding = tuple(int(p) for p in padding)
    if len(padding) == 1:
        return padding * 6
    if len(padding) == 3:
        return padding * 2
    if len(padding) == 6:
        return padding
    raise ValueError(f"padding must have 1, 3 or 6 values, got {padding}")


def _acc(dtype: str) -> np.dtype:
    return np.dtype(np.float64 if np.dtype(dtype).kind == "f" else np.int64)


def _layout(op: str, name: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        raise fail(op, f"{name}={value!r} is not supported; expected one of {allowed}")


def _window_attrs(op: str, attrs, kernel_name: str = "") -> tuple:
    strides = int_tuple(op, attrs.strides, "strides", 3)
    dilation = int_tuple(op, attrs.dilation, "dilation", 3)
    padding = int_tuple(op, attrs.padding, "padding", 6)
    if min(strides) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise fail(op, f"strides {strides} and dilation {dilation} must be >= 1 and padding "
                       f"{padding} >= 0")
    return strides, dilation, padding


def _out_dim(op: str, size: int, k: int, s: int, d: int, pad: int, ceil: bool = False) -> int:
    span = d * (k - 1) + 1
    out = (size + pad - span + (s - 1 if ceil else 0)) // s + 1
    if out <= 0:
        raise fail(op, f"window {span} does not fit input size {size} with padding {pad}")
    return out


# --- conv3d ---------------------------------------------------------------------------------


def _conv3d_rel(types, attrs):
    op = "nn.conv3d"
    check_arity(op, types, 2)
    data, weight = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    _layout(op, "data_layout", attrs.data_layout, ("NCDHW",))
    _layout(op, "kernel_layout", attrs.kernel_layout, ("OIDHW",))
    _layout(op, "out_layout", attrs.out_layout, ("", "NCDHW"))
    if data.ndim != 5 or weight.ndim != 5:
        raise fail(op, f"data and weight must be 5-D (NCDHW, OIDHW), got {data.shape} and "
                       f"{weight.shape}")
    n, c = data.shape[:2]
    o, i = weight.shape[:2]
    g = attrs.groups
    if g < 1 or c != i * g or o % g:
        raise fail(op, f"channels do not match: data has {c} channels, weight {weight.shape} "
                       f"with groups={g} expects {i * g} input channels and an output channel "
                       f"count divisible by {g}")
    if attrs.channels is not None and attrs.channels != o:
        raise fail(op, f"channels={attrs.channels} but weight has {o} output channels")
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != weight.shape[2:]:
        raise fail(op, f"kernel_size={attrs.kernel_size} but weight kernel is {weight.shape[2:]}")
    strides, dilation, pad = _window_attrs(op, attrs)
    out = tuple(_out_dim(op, data.shape[2 + a], weight.shape[2 + a], strides[a], dilation[a],
                         pad[a] + pad[3 + a]) for a in range(3))
    return TensorType((n, o) + out, attrs.out_dtype or data.dtype)


def _conv_ref(inputs, attrs):
    """N-d grouped convolution as a sum over kernel taps of strided slices."""
    data, weight = inputs
    out_dtype = attrs.out_dtype or data.dtype
    acc = _acc(out_dtype)
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
        for tap in itertools.product(*(range(k) for k in ks)):
            sl = tuple(slice(t * d, t * d + (n - 1) * s + 1, s) for t, d, n, s in
                       zip(tap, attrs.dilation, outs, attrs.strides))
            patch = xs[(slice(None), slice(None)) + sl]
            out[:, g * og:(g + 1) * og] += np.tensordot(ws[(slice(None), slice(None)) + tap],
                                                        patch, axes=([1], [1])).swapaxes(0, 1)
    return out.astype(out_dtype)


register(OpDef(name="nn.conv3d", num_inputs=2, type_rel=_conv3d_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_conv_ref,
               attrs={"strides": (1, 1, 1), "padding": (0,) * 6, "dilation": (1, 1, 1),
                      "groups": 1, "channels": None, "kernel_size": None,
                      "data_layout": "NCDHW", "kernel_layout": "OIDHW", "out_layout": "",
                      "out_dtype": ""},
               attrs_type_key="relay.attrs.Conv3DAttrs"))


def conv3d(data, weight, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1,
           channels=None, kernel_size=None, data_layout="NCDHW", kernel_layout="OIDHW",
           out_layout="", out_dtype=""):
    """relay.nn.conv3d (NCDHW data, OIDHW weight)."""
    return make_call("nn.conv3d", [data, weight], strides=triple(strides),
                     padding=pad_tuple3d(padding), dilation=triple(dilation), groups=int(groups),
                     channels=channels,
                     kernel_size=None if kernel_size is None else triple(kernel_size),
                     data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


# --- conv3d_transpose -----------------------------------------------------------------------


def _transpose_out(data_shape, weight_shape, attrs) -> tuple:
    nd = len(data_shape) - 2
    return tuple((data_shape[2 + a] - 1) * attrs.strides[a] - attrs.padding[a]
                 - attrs.padding[nd + a] + attrs.dilation[a] * (weight_shape[2 + a] - 1)
                 + attrs.output_padding[a] + 1 for a in range(nd))


def _conv3d_transpose_rel(types, attrs):
    op = "nn.conv3d_transpose"
    check_arity(op, types, 2)
    data, weight = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    _layout(op, "data_layout", attrs.data_layout, ("NCDHW",))
    _layout(op, "kernel_layout", attrs.kernel_layout, ("IODHW",))
    _layout(op, "out_layout", attrs.out_layout, ("", "NCDHW"))
    if data.ndim != 5 or weight.ndim != 5:
        raise fail(op, f"data and weight must be 5-D (NCDHW, IODHW), got {data.shape} and "
                       f"{weight.shape}")
    c, i, g = data.shape[1], weight.shape[0], attrs.groups
    if g < 1 or c != i or c % g:
        raise fail(op, f"data has {c} channels but weight {weight.shape} (IODHW) has {i} "
                       f"input channels (groups={g})")
    o = weight.shape[1] * g
    if attrs.channels is not None and attrs.channels != o:
        raise fail(op, f"channels={attrs.channels} but weight gives {o} output channels")
    _window_attrs(op, attrs)
    int_tuple(op, attrs.output_padding, "output_padding", 3)
    out = _transpose_out(data.shape, weight.shape, attrs)
    if min(out) <= 0:
        raise fail(op, f"output size would be {out}; padding {attrs.padding} is too large")
    return TensorType((data.shape[0], o) + out, attrs.out_dtype or data.dtype)


def _conv_transpose_ref(inputs, attrs):
    """Scatter every input tap into a full-size buffer, then crop the padding."""
    data, weight = inputs
    out_dtype = attrs.out_dtype or data.dtype
    acc = _acc(out_dtype)
    nd = data.ndim - 2
    outs = _transpose_out(data.shape, weight.shape, attrs)
    sp, ks = data.shape[2:], weight.shape[2:]
    full = tuple(max((sp[a] - 1) * attrs.strides[a] + attrs.dilation[a] * (ks[a] - 1) + 1,
                     attrs.padding[a] + outs[a]) for a in range(nd))
    ig, og = data.shape[1] // attrs.groups, weight.shape[1]
    buf = np.zeros((data.shape[0], og * attrs.groups) + full, acc)
    x, wgt = data.astype(acc), weight.astype(acc)
    for g in range(attrs.groups):
        xs, ws = x[:, g * ig:(g + 1) * ig], wgt[g * ig:(g + 1) * ig]
        for tap in itertools.product(*(range(k) for k in ks)):
            contrib = np.tensordot(ws[(slice(None), slice(None)) + tap], xs,
                                   axes=([0], [1])).swapaxes(0, 1)
            sl = tuple(slice(t * d, t * d + (n - 1) * s + 1, s) for t, d, n, s in
                       zip(tap, attrs.dilation, sp, attrs.strides))
            buf[(slice(None), slice(g * og, (g + 1) * og)) + sl] += contrib
    crop = tuple(slice(attrs.padding[a], attrs.padding[a] + outs[a]) for a in range(nd))
    return buf[(slice(None), slice(None)) + crop].astype(out_dtype)


register(OpDef(name="nn.conv3d_transpose", num_inputs=2, type_rel=_conv3d_transpose_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_conv_transpose_ref,
               attrs={"channels": None, "kernel_size": None, "strides": (1, 1, 1),
                      "padding": (0,) * 6, "output_padding": (0, 0, 0), "dilation": (1, 1, 1),
                      "groups": 1, "data_layout": "NCDHW", "kernel_layout": "IODHW",
                      "out_layout": "", "out_dtype": ""},
               attrs_type_key="relay.attrs.Conv3DTransposeAttrs"))


def conv3d_transpose(data, weight, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1),
                     groups=1, channels=None, kernel_size=None, data_layout="NCDHW",
                     kernel_layout="IODHW", out_layout="", output_padding=(0, 0, 0),
                     out_dtype=""):
    """relay.nn.conv3d_transpose (NCDHW data, IODHW weight)."""
    return make_call("nn.conv3d_transpose", [data, weight], channels=channels,
                     kernel_size=None if kernel_size is None else triple(kernel_size),
                     strides=triple(strides), padding=pad_tuple3d(padding),
                     output_padding=triple(output_padding), dilation=triple(dilation),
                     groups=int(groups), data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


# --- max_pool3d / avg_pool3d ----------------------------------------------------------------


def _pool3d_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        _layout(op, "layout", attrs.layout, ("NCDHW",))
        _layout(op, "out_layout", attrs.out_layout, ("", "NCDHW"))
        if data.ndim != 5:
            raise fail(op, f"data must be 5-D (NCDHW), got shape {data.shape}")
        if data.dtype == "bool":
            raise fail(op, "pooling of bool tensors is not supported")
        ks = int_tuple(op, attrs.pool_size, "pool_size", 3)
        strides, dilation, pad = _window_attrs(op, attrs)
        out = tuple(_out_dim(op, data.shape[2 + a], ks[a], strides[a], dilation[a],
                             pad[a] + pad[3 + a], attrs.ceil_mode) for a in range(3))
        return TensorType(data.shape[:2] + out, data.dtype)
    return rel


def pool_counts(size: int, k: int, s: int, d: int, begin: int, end: int, out: int,
                include_pad: bool) -> np.ndarray:
    """Taps per output position inside the input (or, with include_pad, the padded input)."""
    lo, hi = (-begin, size + end) if include_pad else (0, size)
    taps = np.arange(out)[:, None] * s - begin + np.arange(k)[None, :] * d
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


def _pool3d_ref(kind: str):
    def reference(inputs, attrs):
        data = inputs[0]
        sp, ks = data.shape[2:], attrs.pool_size
        st, dl, pad = attrs.strides, attrs.dilation, attrs.padding
        outs = tuple((sp[a] + pad[a] + pad[3 + a] - dl[a] * (ks[a] - 1) - 1
                      + (st[a] - 1 if attrs.ceil_mode else 0)) // st[a] + 1 for a in range(3))
        extra = tuple(max(pad[3 + a], (outs[a] - 1) * st[a] + dl[a] * (ks[a] - 1) + 1
                          - sp[a] - pad[a]) for a in range(3))
        widths = ((0, 0), (0, 0)) + tuple((pad[a], extra[a]) for a in range(3))
        if kind == "max":
            low = -np.inf if data.dtype.kind == "f" else np.iinfo(data.dtype).min
            xp = np.pad(data, widths, constant_values=low)
            acc = np.full(data.shape[:2] + outs, low, dtype=data.dtype)
        else:
            xp = np.pad(data.astype(np.float64), widths)
            acc = np.zeros(data.shape[:2] + outs)
        for tap in itertools.product(*(range(k) for k in ks)):
            sl = tuple(slice(t * d, t * d + (n - 1) * s + 1, s) for t, d, n, s in
                       zip(tap, dl, outs, st))
            win = xp[(slice(None), slice(None)) + sl]
            acc = np.maximum(acc, win) if kind == "max" else acc + win
        if kind == "max":
            return acc
        counts = [pool_counts(sp[a], ks[a], st[a], dl[a], pad[a], pad[3 + a], outs[a],
                              attrs.count_include_pad) for a in range(3)]
        count = np.maximum(np.einsum("i,j,k->ijk", *counts), 1)
        acc = acc / count
        if data.dtype.kind in "iu":
            acc = np.trunc(acc)
        return acc.astype(data.dtype)
    return reference


_POOL3D_ATTRS = {"pool_size": (1, 1, 1), "strides": (1, 1, 1), "dilation": (1, 1, 1),
                 "padding": (0,) * 6, "layout": "NCDHW", "out_layout": "", "ceil_mode": False}
register(OpDef(name="nn.max_pool3d", num_inputs=1, type_rel=_pool3d_rel("nn.max_pool3d"),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_pool3d_ref("max"),
               attrs=dict(_POOL3D_ATTRS), attrs_type_key="relay.attrs.MaxPool3DAttrs"))
register(OpDef(name="nn.avg_pool3d", num_inputs=1, type_rel=_pool3d_rel("nn.avg_pool3d"),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_pool3d_ref("avg"),
               attrs={**_POOL3D_ATTRS, "count_include_pad": False},
               attrs_type_key="relay.attrs.AvgPool3DAttrs"))


def max_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1),
               padding=(0, 0, 0), layout="NCDHW", out_layout="", ceil_mode=False):
    """relay.nn.max_pool3d (padding is normalised to 6 values)."""
    return make_call("nn.max_pool3d", [data], pool_size=triple(pool_size),
                     strides=triple(strides), dilation=triple(dilation),
                     padding=pad_tuple3d(padding), layout=layout, out_layout=out_layout,
                     ceil_mode=bool(ceil_mode))


def avg_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1),
               padding=(0, 0, 0), layout="NCDHW", out_layout="", ceil_mode=False,
               count_include_pad=False):
    """relay.nn.avg_pool3d; count_include_pad counts the taps inside the padded input."""
    return make_call("nn.avg_pool3d", [data], pool_size=triple(pool_size),
                     strides=triple(strides), dilation=triple(dilation),
                     padding=pad_tuple3d(padding), layout=layout, out_layout=out_layout,
                     ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad))
