"""relay.nn 3-D ops: conv3d, conv3d_transpose, max_pool3d, avg_pool3d (NCDHW, TVM's names).

Padding is six values (front, top, left, back, bottom, right) as TVM's get_pad_tuple3d gives.
The references work over any number of spatial dims; the relations check 5-D inputs.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from .conv_layout import any_layout_rel, any_layout_ref
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import check_arity, fail, int_tuple, tensor_arg
from .window import (check_layout, conv_ref, conv_rel, conv_transpose_ref,
                     conv_transpose_rel, lowest_value, pad_tuple3d, pool_counts, tap_slices,
                     taps, triple, window_attrs, window_out_dim)

__all__ = ["conv3d", "conv3d_transpose", "max_pool3d", "avg_pool3d"]


# --- conv3d ---------------------------------------------------------------------------------


register(OpDef(name="nn.conv3d", num_inputs=2,
               type_rel=any_layout_rel("nn.conv3d", "NCDHW", "OIDHW",
                                       conv_rel("nn.conv3d", "NCDHW", "OIDHW")),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               reference=any_layout_ref("NCDHW", "OIDHW", conv_ref),
               attrs={"strides": (1, 1, 1), "padding": (0,) * 6, "dilation": (1, 1, 1),
                      "groups": 1, "channels": None, "kernel_size": None,
                      "data_layout": "NCDHW", "kernel_layout": "OIDHW", "out_layout": "",
                      "out_dtype": ""},
               attrs_type_key="relay.attrs.Conv3DAttrs"))


def conv3d(data, weight, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1,
           channels=None, kernel_size=None, data_layout="NCDHW", kernel_layout="OIDHW",
           out_layout="", out_dtype=""):
    """relay.nn.conv3d (NCDHW data, OIDHW weight by default; NDHWC/DHWIO too; grouped)."""
    return make_call("nn.conv3d", [data, weight], strides=triple(strides),
                     padding=pad_tuple3d(padding), dilation=triple(dilation), groups=int(groups),
                     channels=channels,
                     kernel_size=None if kernel_size is None else triple(kernel_size),
                     data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


# --- conv3d_transpose -----------------------------------------------------------------------


register(OpDef(name="nn.conv3d_transpose", num_inputs=2,
               type_rel=conv_transpose_rel("nn.conv3d_transpose", "NCDHW", "IODHW"),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=conv_transpose_ref,
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
        check_layout(op, "layout", attrs.layout, ("NCDHW",))
        check_layout(op, "out_layout", attrs.out_layout, ("", "NCDHW"))
        if data.ndim != 5:
            raise fail(op, f"data must be 5-D (NCDHW), got shape {data.shape}")
        if data.dtype == "bool":
            raise fail(op, "pooling of bool tensors is not supported")
        ks = int_tuple(op, attrs.pool_size, "pool_size", 3)
        strides, dilation, pad = window_attrs(op, attrs, 3)
        out = tuple(window_out_dim(op, data.shape[2 + a], ks[a], strides[a], dilation[a],
                                   pad[a] + pad[3 + a], attrs.ceil_mode) for a in range(3))
        return TensorType(data.shape[:2] + out, data.dtype)
    return rel


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
        for tap in taps(ks):
            win = xp[tap_slices(tap, dl, outs, st)]
            acc = np.maximum(acc, win) if kind == "max" else acc + win
        if kind == "max":  # a window over padding alone: the lowest finite value
            inside = [pool_counts(sp[a], ks[a], st[a], dl[a], pad[a], 0, outs[a], False)
                      for a in range(3)]
            empty = np.einsum("i,j,k->ijk", *inside) == 0
            return np.where(empty, data.dtype.type(lowest_value(data.dtype)), acc)
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
