"""Layer helpers that create their own parameter vars, as tvm.relay.testing.layers.

`conv2d(data, name="conv1", channels=...)` makes the var `conv1_weight`; create_workload
later initialises each var by its suffix. As in TVM the vars carry no type unless the caller
says what the data holds: pass `in_channels=` (conv), `in_units=` (dense) or
`num_features=` (batch norm) and the vars are annotated, so the network type-checks without
solving for unannotated parameters.
"""
from __future__ import annotations

from compiler.ir.expr import var as _var
from compiler.op import nn as _nn
from compiler.ir.type_infer import InferTypeLocal

__all__ = ["batch_norm_infer", "conv2d", "conv2d_transpose", "dense_add_bias",
           "conv_kernel_layout", "infer_shape"]


def _param(name: str, shape, dtype: str):
    """A parameter var: annotated when its shape is known, left to inference otherwise."""
    return _var(name) if shape is None else _var(name, shape=shape, dtype=dtype)


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def batch_norm_infer(data, gamma=None, beta=None, moving_mean=None, moving_var=None, *,
                     num_features=None, dtype="float32", **kwargs):
    """Inference batch norm (output 0 of nn.batch_norm) with vars name_gamma, name_beta, ..."""
    name = kwargs.pop("name")
    shape = None if num_features is None else (num_features,)
    gamma = gamma if gamma is not None else _param(name + "_gamma", shape, dtype)
    beta = beta if beta is not None else _param(name + "_beta", shape, dtype)
    moving_mean = (moving_mean if moving_mean is not None
                   else _param(name + "_moving_mean", shape, dtype))
    moving_var = (moving_var if moving_var is not None
                  else _param(name + "_moving_var", shape, dtype))
    return _nn.batch_norm(data, gamma, beta, moving_mean, moving_var, **kwargs)[0]


def _conv_weight(name: str, in_channels, kwargs: dict, dtype: str, transposed: bool):
    """The var name_weight: OIHW for a conv, IOHW for a transposed conv (grouped by
    `groups`), annotated when in_channels is known."""
    shape = None
    if in_channels is not None:
        out_channels = kwargs["channels"]
        groups = kwargs.get("groups", 1)
        channel_dims = ((in_channels, out_channels // groups) if transposed
                        else (out_channels, in_channels // groups))
        shape = (*channel_dims, *_pair(kwargs["kernel_size"]))
    return _param(name + "_weight", shape, dtype)


def conv2d(data, weight=None, *, in_channels=None, dtype="float32", **kwargs):
    """nn.conv2d with the var name_weight when none is given."""
    name = kwargs.pop("name")
    if weight is None:
        weight = _conv_weight(name, in_channels, kwargs, dtype, transposed=False)
    return _nn.conv2d(data, weight, **kwargs)


def conv2d_transpose(data, weight=None, *, in_channels=None, dtype="float32", **kwargs):
    """nn.conv2d_transpose with the var name_weight when none is given."""
    name = kwargs.pop("name")
    if weight is None:
        weight = _conv_weight(name, in_channels, kwargs, dtype, transposed=True)
    return _nn.conv2d_transpose(data, weight, **kwargs)


def dense_add_bias(data, weight=None, bias=None, units=None, *, in_units=None,
                   dtype="float32", **kwargs):
    """nn.dense then nn.bias_add (on the last axis) with vars name_weight and name_bias."""
    name = kwargs.pop("name")
    if weight is None:
        weight = _param(name + "_weight", None if in_units is None else (units, in_units), dtype)
    if bias is None:
        bias = _param(name + "_bias", None if in_units is None else (units,), dtype)
    out = _nn.dense(data, weight, units, **kwargs)
    return _nn.bias_add(out, bias, axis=-1)


def conv_kernel_layout(data_layout: str, is_depthwise: bool = False) -> str:
    """The kernel layout TVM pairs with a data layout (NCHW -> OIHW, NHWC -> HWIO/HWOI)."""
    layouts = {("NCHW", False): "OIHW", ("NCHW", True): "OIHW",
               ("NHWC", False): "HWIO", ("NHWC", True): "HWOI"}
    try:
        return layouts[(data_layout, is_depthwise)]
    except KeyError:
        raise ValueError(f"conv_kernel_layout: no kernel layout known for data layout "
                         f"{data_layout!r} (depthwise={is_depthwise})") from None


def infer_shape(expr) -> tuple:
    """The static shape of a tensor expression whose inputs are annotated (one type check:
    call it once per network, e.g. to size the dense layer after a flatten)."""
    return tuple(InferTypeLocal(expr).shape)
