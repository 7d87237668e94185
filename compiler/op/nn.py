"""relay.nn ops: convolution, dense/matmul, bias_add, activations, softmax.

Normalisation/pad/dropout live in nn_norm.py and pooling/pixel-shuffle in nn_pool.py; this
module re-exports them so `compiler.op.nn` (and relay.nn) is the whole namespace.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from .conv_layout import any_layout_rel, any_layout_ref
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import (broadcast_dim, check_arity, dims_agree, fail, identity_rel,
                             is_dyn, known, normalize_axis, require_float, same_dtype,
                             shapes_agree, tensor_arg)
from .window import acc_dtype, conv_ref, conv_rel, conv_transpose_ref, conv_transpose_rel
from .window import conv_out_dim, pad_tuple2d, pair  # noqa: F401  (imported from here)

__all__ = [
    "conv2d", "conv2d_transpose", "dense", "matmul", "batch_matmul", "bias_add", "relu",
    "leaky_relu", "prelu", "softmax", "log_softmax",
]


def _out_dtype(attrs, data: TensorType) -> str:
    return attrs.out_dtype or data.dtype


# --- conv2d -------------------------------------------------------------------------------


_conv2d_rel = conv_rel("nn.conv2d", "NCHW", "OIHW")  # nn_packed reuses both names
_conv2d_ref = conv_ref


_CONV2D_ATTRS = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1,
                 "channels": None, "kernel_size": None, "data_layout": "NCHW",
                 "kernel_layout": "OIHW", "out_layout": "", "out_dtype": ""}
register(OpDef(name="nn.conv2d", num_inputs=2,
               type_rel=any_layout_rel("nn.conv2d", "NCHW", "OIHW", _conv2d_rel),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               reference=any_layout_ref("NCHW", "OIHW", conv_ref),
               attrs=_CONV2D_ATTRS, attrs_type_key="relay.attrs.Conv2DAttrs"))


def conv2d(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
           channels=None, kernel_size=None, data_layout="NCHW", kernel_layout="OIHW",
           out_layout="", out_dtype=""):
    """relay.nn.conv2d (NCHW data, OIHW weight by default; NHWC/HWIO and other permutations
    too; groups == channels is depthwise)."""
    return make_call("nn.conv2d", [data, weight], strides=pair(strides),
                     padding=pad_tuple2d(padding), dilation=pair(dilation), groups=int(groups),
                     channels=channels, kernel_size=None if kernel_size is None
                     else pair(kernel_size), data_layout=data_layout,
                     kernel_layout=kernel_layout, out_layout=out_layout, out_dtype=out_dtype)


register(OpDef(name="nn.conv2d_transpose", num_inputs=2,
               type_rel=conv_transpose_rel("nn.conv2d_transpose", "NCHW", "IOHW"),
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=conv_transpose_ref,
               attrs={"channels": None, "kernel_size": None, "strides": (1, 1),
                      "padding": (0, 0, 0, 0), "output_padding": (0, 0), "dilation": (1, 1),
                      "groups": 1, "data_layout": "NCHW", "kernel_layout": "IOHW",
                      "out_layout": "", "out_dtype": ""},
               attrs_type_key="relay.attrs.Conv2DTransposeAttrs"))


def conv2d_transpose(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                     channels=None, kernel_size=None, data_layout="NCHW", kernel_layout="IOHW",
                     out_layout="", output_padding=(0, 0), out_dtype=""):
    """relay.nn.conv2d_transpose (NCHW data, IOHW weight)."""
    return make_call("nn.conv2d_transpose", [data, weight], channels=channels,
                     kernel_size=None if kernel_size is None else pair(kernel_size),
                     strides=pair(strides), padding=pad_tuple2d(padding),
                     output_padding=pair(output_padding), dilation=pair(dilation),
                     groups=int(groups), data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


# --- dense, matmul, batch_matmul -----------------------------------------------------------


def _dense_rel(types, attrs):
    op = "nn.dense"
    check_arity(op, types, 2)
    data, weight = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
    if data.ndim < 1 or weight.ndim != 2:
        raise fail(op, f"expected data [..., in] and weight [units, in], got {data.shape} and "
                       f"{weight.shape}")
    if not dims_agree(op, data.shape[-1], weight.shape[1],
                      "the data's last dim must equal the weight's dim 1"):
        raise fail(op, f"reduction dims differ: data {data.shape} has {data.shape[-1]}, "
                       f"weight {weight.shape} has {weight.shape[1]}")
    if attrs.units is not None and not dims_agree(op, attrs.units, weight.shape[0],
                                                  "units must equal the weight's rows"):
        raise fail(op, f"units={attrs.units} but weight has {weight.shape[0]} rows")
    units = weight.shape[0] if attrs.units is None else known(weight.shape[0], attrs.units)
    return TensorType(data.shape[:-1] + (units,), _out_dtype(attrs, data))


def _dense_ref(inputs, attrs):
    data, weight = inputs
    out_dtype = attrs.out_dtype or data.dtype
    acc = acc_dtype(out_dtype)
    return np.matmul(data.astype(acc), weight.astype(acc).T).astype(out_dtype)


register(OpDef(name="nn.dense", num_inputs=2, type_rel=_dense_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_dense_ref,
               attrs={"units": None, "out_dtype": ""}, attrs_type_key="relay.attrs.DenseAttrs"))


def dense(data, weight, units=None, out_dtype=""):
    """relay.nn.dense: data [..., in] x weight [units, in]^T."""
    return make_call("nn.dense", [data, weight], units=units, out_dtype=out_dtype)


def _matmul_rel(types, attrs):
    op = "nn.matmul"
    check_arity(op, types, 2)
    a, b = tensor_arg(op, types, 0, "tensor_a"), tensor_arg(op, types, 1, "tensor_b")
    if b.ndim != 2 or a.ndim < 1 or (attrs.transpose_a and a.ndim != 2):
        raise fail(op, f"expected tensor_a [..., k] (2-D when transposed) and 2-D tensor_b, "
                       f"got {a.shape} and {b.shape}")
    k = a.shape[0] if attrs.transpose_a else a.shape[-1]
    kb, n = (b.shape[1], b.shape[0]) if attrs.transpose_b else b.shape
    if not dims_agree(op, k, kb, "the reduction dims of tensor_a and tensor_b must agree"):
        raise fail(op, f"reduction dims differ: {k} (tensor_a {a.shape}) vs {kb} "
                       f"(tensor_b {b.shape})")
    if attrs.units is not None:
        if not dims_agree(op, attrs.units, n, "units must equal the output's columns"):
            raise fail(op, f"units={attrs.units} but the output has {n} columns")
        n = known(n, attrs.units)
    lead = (a.shape[1],) if attrs.transpose_a else a.shape[:-1]
    return TensorType(lead + (n,), _out_dtype(attrs, a))


def _matmul_ref(inputs, attrs):
    a, b = inputs
    out_dtype = attrs.out_dtype or a.dtype
    acc = acc_dtype(out_dtype)
    a, b = a.astype(acc), b.astype(acc)
    return np.matmul(a.T if attrs.transpose_a else a,
                     b.T if attrs.transpose_b else b).astype(out_dtype)


register(OpDef(name="nn.matmul", num_inputs=2, type_rel=_matmul_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_matmul_ref,
               attrs={"units": None, "out_dtype": "", "transpose_a": False,
                      "transpose_b": False}, attrs_type_key="relay.attrs.MatmulAttrs"))


def matmul(tensor_a, tensor_b, units=None, out_dtype="", transpose_a=False, transpose_b=False):
    """relay.nn.matmul: tensor_a [..., k] x tensor_b [k, n] (either may be transposed)."""
    return make_call("nn.matmul", [tensor_a, tensor_b], units=units, out_dtype=out_dtype,
                     transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


def _batch_matmul_rel(types, attrs):
    op = "nn.batch_matmul"
    check_arity(op, types, 2)
    x, y = tensor_arg(op, types, 0, "tensor_a"), tensor_arg(op, types, 1, "tensor_b")
    if x.ndim != 3 or y.ndim != 3:
        raise fail(op, f"tensor_a and tensor_b must be 3-D, got {x.shape} and {y.shape}")
    m, k = (x.shape[2], x.shape[1]) if attrs.transpose_a else x.shape[1:]
    n, ky = y.shape[1:] if attrs.transpose_b else (y.shape[2], y.shape[1])
    if not dims_agree(op, k, ky, "the reduction dims of tensor_a and tensor_b must agree"):
        raise fail(op, f"reduction dims differ: {k} (tensor_a {x.shape}) vs {ky} "
                       f"(tensor_b {y.shape}), transpose_a={attrs.transpose_a}, "
                       f"transpose_b={attrs.transpose_b}")
    bx, by = x.shape[0], y.shape[0]
    if not (is_dyn(bx) or is_dyn(by)) and bx != by and 1 not in (bx, by):
        raise fail(op, f"batch dims {bx} and {by} differ and neither is 1")
    return TensorType((broadcast_dim(op, bx, by), m, n), _out_dtype(attrs, x))


def _batch_matmul_ref(inputs, attrs):
    x, y = inputs
    out_dtype = attrs.out_dtype or x.dtype
    acc = acc_dtype(out_dtype)
    x, y = x.astype(acc), y.astype(acc)
    x = x.transpose(0, 2, 1) if attrs.transpose_a else x
    y = y.transpose(0, 2, 1) if attrs.transpose_b else y
    return np.matmul(x, y).astype(out_dtype)


register(OpDef(name="nn.batch_matmul", num_inputs=2, type_rel=_batch_matmul_rel,
               pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_batch_matmul_ref,
               attrs={"out_dtype": "", "transpose_a": False, "transpose_b": True},
               attrs_type_key="relay.attrs.BatchMatmulAttrs"))


def batch_matmul(tensor_a, tensor_b, out_dtype="", transpose_a=False, transpose_b=True):
    """relay.nn.batch_matmul: [b, m, k] x [b, n, k]^T by default (TVM's NT layout)."""
    return make_call("nn.batch_matmul", [tensor_a, tensor_b], out_dtype=out_dtype,
                     transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


# --- bias_add, activations, softmax --------------------------------------------------------


def _channel_vector_rel(op: str, vec_name: str):
    """data plus a 1-D vector matching data.shape[attrs.axis] (bias_add, prelu)."""
    def rel(types, attrs):
        check_arity(op, types, 2)
        data, vec = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, vec_name)
        axis = normalize_axis(op, attrs.axis, data.ndim)
        if not shapes_agree(op, vec.shape, (data.shape[axis],),
                            f"{vec_name} must match axis {attrs.axis} of data"):
            raise fail(op, f"{vec_name} must have shape ({data.shape[axis]},) to match axis "
                           f"{attrs.axis} of data {data.shape}, got {vec.shape}")
        same_dtype(op, data, vec, ("data", vec_name))
        return data
    return rel


def _along(vec: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis % ndim] = vec.shape[0]
    return vec.reshape(shape)


def _bias_add_ref(inputs, attrs):
    data, bias = inputs
    return (data + _along(bias, attrs.axis, data.ndim)).astype(data.dtype, copy=False)


def _prelu_ref(inputs, attrs):
    data, alpha = inputs
    return np.where(data < 0, data * _along(alpha, attrs.axis, data.ndim), data).astype(
        data.dtype, copy=False)


register(OpDef(name="nn.bias_add", num_inputs=2, type_rel=_channel_vector_rel("nn.bias_add",
                                                                               "bias"),
               pattern=OpPattern.BROADCAST, reference=_bias_add_ref, attrs={"axis": 1},
               attrs_type_key="relay.attrs.BiasAddAttrs"))
register(OpDef(name="nn.prelu", num_inputs=2, type_rel=_channel_vector_rel("nn.prelu", "alpha"),
               pattern=OpPattern.BROADCAST, reference=_prelu_ref, attrs={"axis": 1},
               attrs_type_key="relay.attrs.PReluAttrs"))
register(OpDef(name="nn.relu", num_inputs=1, type_rel=identity_rel("nn.relu"),
               pattern=OpPattern.ELEMWISE,
               reference=lambda ins, attrs: np.maximum(ins[0], 0).astype(ins[0].dtype)))
register(OpDef(name="nn.leaky_relu", num_inputs=1, type_rel=identity_rel("nn.leaky_relu"),
               pattern=OpPattern.ELEMWISE, attrs={"alpha": 0.01},
               attrs_type_key="relay.attrs.LeakyReluAttrs",
               reference=lambda ins, attrs: np.where(ins[0] < 0, ins[0] * attrs.alpha,
                                                     ins[0]).astype(ins[0].dtype)))


def bias_add(data, bias, axis=1):
    """relay.nn.bias_add: add a 1-D bias along axis."""
    return make_call("nn.bias_add", [data, bias], axis=int(axis))


def prelu(data, alpha, axis=1):
    """relay.nn.prelu: x if x >= 0 else alpha[c] * x, alpha along axis."""
    return make_call("nn.prelu", [data, alpha], axis=int(axis))


def relu(data):
    """relay.nn.relu."""
    return make_call("nn.relu", [data])


def leaky_relu(data, alpha=0.01):
    """relay.nn.leaky_relu: x if x >= 0 else alpha * x."""
    return make_call("nn.leaky_relu", [data], alpha=float(alpha))


def _softmax_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 1)
        data = tensor_arg(op, types, 0, "data")
        require_float(op, data)
        normalize_axis(op, attrs.axis, data.ndim)
        return data
    return rel


def _softmax_ref(inputs, attrs):
    x = inputs[0]
    if x.dtype == np.float16:  # numpy's float16 steps, each rounded to half (as ONNX's)
        e = np.exp(x - x.max(axis=attrs.axis, keepdims=True))
        return e / e.sum(axis=attrs.axis, keepdims=True, dtype=np.float32).astype(np.float16)
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=attrs.axis, keepdims=True))
    return (e / e.sum(axis=attrs.axis, keepdims=True)).astype(inputs[0].dtype)


def _log_softmax_ref(inputs, attrs):
    x = inputs[0].astype(np.float64)
    shifted = x - x.max(axis=attrs.axis, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=attrs.axis, keepdims=True))
    return (shifted - lse).astype(inputs[0].dtype)


# OUT_ELEMWISE_FUSABLE as in TVM: FuseOps fuses the elementwise ops after a softmax into it
for _name, _ref in (("nn.softmax", _softmax_ref), ("nn.log_softmax", _log_softmax_ref)):
    register(OpDef(name=_name, num_inputs=1, type_rel=_softmax_rel(_name),
                   pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_ref, attrs={"axis": -1},
                   attrs_type_key="relay.attrs.SoftmaxAttrs"))


def softmax(data, axis=-1):
    """relay.nn.softmax along axis."""
    return make_call("nn.softmax", [data], axis=int(axis))


def log_softmax(data, axis=-1):
    """relay.nn.log_softmax along axis."""
    return make_call("nn.log_softmax", [data], axis=int(axis))


from .nn_norm import *  # noqa: E402,F401,F403
from .nn_norm import __all__ as _norm_all  # noqa: E402
from .nn_pool import *  # noqa: E402,F401,F403
from .nn_pool import __all__ as _pool_all  # noqa: E402
from .nn_upsampling import *  # noqa: E402,F401,F403
from .nn_upsampling import __all__ as _upsampling_all  # noqa: E402

__all__ += _norm_all + _pool_all + _upsampling_all
