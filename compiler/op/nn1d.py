"""relay.nn 1-D convolutions: conv1d and conv1d_transpose (NCW data, TVM's names and attrs).

They share the N-d relations and references of window.py with conv2d/conv3d; padding is two
values (left, right) as TVM's get_pad_tuple1d gives. conv1d also takes NWC/WIO and the other
permutation layouts (conv_layout.py).
"""
from __future__ import annotations

from .conv_layout import any_layout_ref, any_layout_rel
from .registry import OpDef, OpPattern, make_call, register
from .window import conv_ref, conv_rel, conv_transpose_ref, conv_transpose_rel, ntuple, pad_tuple

__all__ = ["conv1d", "conv1d_transpose"]


def _single(value) -> tuple:
    return ntuple(value, 1)


register(OpDef(name="nn.conv1d", num_inputs=2,
               type_rel=any_layout_rel("nn.conv1d", "NCW", "OIW",
                                       conv_rel("nn.conv1d", "NCW", "OIW")),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               reference=any_layout_ref("NCW", "OIW", conv_ref),
               attrs={"strides": (1,), "padding": (0, 0), "dilation": (1,), "groups": 1,
                      "channels": None, "kernel_size": None, "data_layout": "NCW",
                      "kernel_layout": "OIW", "out_layout": "", "out_dtype": ""},
               attrs_type_key="relay.attrs.Conv1DAttrs"))


def conv1d(data, weight, strides=1, padding=0, dilation=1, groups=1, channels=None,
           kernel_size=None, data_layout="NCW", kernel_layout="OIW", out_layout="",
           out_dtype=""):
    """relay.nn.conv1d (NCW data, OIW weight by default)."""
    return make_call("nn.conv1d", [data, weight], strides=_single(strides),
                     padding=pad_tuple(padding, 1), dilation=_single(dilation),
                     groups=int(groups), channels=channels,
                     kernel_size=None if kernel_size is None else _single(kernel_size),
                     data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


register(OpDef(name="nn.conv1d_transpose", num_inputs=2,
               type_rel=conv_transpose_rel("nn.conv1d_transpose", "NCW", "IOW"),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=conv_transpose_ref,
               attrs={"channels": None, "kernel_size": None, "strides": (1,),
                      "padding": (0, 0), "output_padding": (0,), "dilation": (1,),
                      "groups": 1, "data_layout": "NCW", "kernel_layout": "IOW",
                      "out_layout": "", "out_dtype": ""},
               attrs_type_key="relay.attrs.Conv1DTransposeAttrs"))


def conv1d_transpose(data, weight, strides=(1,), padding=(0,), dilation=(1,), groups=1,
                     channels=None, kernel_size=None, data_layout="NCW", kernel_layout="IOW",
                     out_layout="", output_padding=(0,), out_dtype=""):
    """relay.nn.conv1d_transpose (NCW data, IOW weight)."""
    return make_call("nn.conv1d_transpose", [data, weight], channels=channels,
                     kernel_size=None if kernel_size is None else _single(kernel_size),
                     strides=_single(strides), padding=pad_tuple(padding, 1),
                     output_padding=_single(output_padding), dilation=_single(dilation),
                     groups=int(groups), data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)
