"""QNN contractions: qnn.conv2d, qnn.conv2d_transpose, qnn.dense, qnn.batch_matmul.

Each computes sum((data - input_zero_point) * (weight - kernel_zero_point)) in out_dtype
(int32 by default), as its nn counterpart over the centered operands: shapes, layouts and
attributes are nn's (the type relations and references are nn's, applied to the centered
values). The scales ride along for the requantize that follows (TVM's convention: the result's
scale is input_scale * kernel_scale, its zero point 0). The kernel zero point and scale may be
per output channel (the kernel layout's O axis; dense's units).

These are the anchors a fast int8 implementation registers for in the strategy layer
(compiler/op/strategy): qnn.conv2d / qnn.dense / qnn.batch_matmul producing int32, then the
elementwise epilogue FuseOps puts after them (bias add, qnn.requantize, clip).
"""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from .nn import pad_tuple2d, pair
from .qnn_math import expand_param
from .qnn_types import check_dtype, check_param
from .registry import OpDef, OpPattern, get_def, make_call, register
from .type_relations import check_arity, fail, tensor_arg

__all__ = ["conv2d", "conv2d_transpose", "dense", "batch_matmul"]

OPERAND_DTYPES = ("int8", "uint8", "int16", "uint16")
ACCUMULATOR_DTYPES = ("int32", "int64", "int16")
# argument order: data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale
_ARGS = ("data", "weight", "input_zero_point", "kernel_zero_point", "input_scale",
         "kernel_scale")


def kernel_channel_axis(op: str, attrs) -> int:
    """The weight axis the kernel zero point and scale may run along (output channels)."""
    if op in ("qnn.conv2d", "qnn.conv2d_transpose"):
        return attrs.kernel_layout.index("O")
    return 0  # dense: weight [units, in]; batch_matmul: per tensor only


def _rel(op: str, nn_op: str, per_channel: bool):
    nn_rel = get_def(nn_op).type_rel

    def rel(types, attrs):
        check_arity(op, types, 6)
        data, weight = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
        check_dtype(op, data, OPERAND_DTYPES, "data")
        check_dtype(op, weight, OPERAND_DTYPES, "weight")
        if attrs.out_dtype not in ACCUMULATOR_DTYPES:
            raise fail(op, f"out_dtype must be one of {list(ACCUMULATOR_DTYPES)}, got "
                           f"{attrs.out_dtype!r}")
        check_param(op, types, 2, "input_zero_point", "int32", data, 0, per_axis=False)
        check_param(op, types, 4, "input_scale", "float32", data, 0, per_axis=False)
        axis = kernel_channel_axis(op, attrs)
        check_param(op, types, 3, "kernel_zero_point", "int32", weight, axis, per_channel)
        check_param(op, types, 5, "kernel_scale", "float32", weight, axis, per_channel)
        out = nn_rel([data, weight], attrs)
        return TensorType(out.shape, attrs.out_dtype)
    return rel


def _ref(op: str, nn_op: str):
    nn_ref = get_def(nn_op).reference

    def reference(inputs, attrs):
        data, weight, data_zp, kernel_zp = inputs[:4]
        axis = kernel_channel_axis(op, attrs)
        centered = [data.astype(np.int64) - np.int64(np.asarray(data_zp).reshape(())),
                    weight.astype(np.int64) - expand_param(kernel_zp, weight.ndim, axis)]
        return nn_ref(centered, attrs).astype(attrs.out_dtype)
    return reference


def _register(op: str, nn_op: str, attrs: dict, type_key: str, per_channel: bool = True):
    register(OpDef(name=op, num_inputs=6, type_rel=_rel(op, nn_op, per_channel),
                   pattern=OpPattern.OUT_ELEMWISE_FUSABLE, reference=_ref(op, nn_op),
                   attrs=attrs, attrs_type_key=type_key, support_level=11,
                   arguments=[(name, "Tensor", "") for name in _ARGS]))


_register("qnn.conv2d", "nn.conv2d", {**get_def("nn.conv2d").attrs, "out_dtype": "int32"},
          "relay.attrs.Conv2DAttrs")
_register("qnn.conv2d_transpose", "nn.conv2d_transpose",
          {**get_def("nn.conv2d_transpose").attrs, "out_dtype": "int32"},
          "relay.attrs.Conv2DTransposeAttrs")
_register("qnn.dense", "nn.dense", {"units": None, "out_dtype": "int32"},
          "relay.attrs.DenseAttrs")
_register("qnn.batch_matmul", "nn.batch_matmul",
          {"out_dtype": "int32", "transpose_a": False, "transpose_b": True},
          "relay.attrs.BatchMatmulAttrs", per_channel=False)


def conv2d(data, kernel, input_zero_point, kernel_zero_point, input_scale, kernel_scale,
           kernel_size, channels, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
           data_layout="NCHW", kernel_layout="OIHW", out_layout="", out_dtype="int32"):
    """relay.qnn.op.conv2d: int32 sum of centered products (NCHW/OIHW, NHWC/HWIO, ...)."""
    return make_call("qnn.conv2d", [data, kernel, input_zero_point, kernel_zero_point,
                                    input_scale, kernel_scale],
                     strides=pair(strides), padding=pad_tuple2d(padding),
                     dilation=pair(dilation), groups=int(groups), channels=channels,
                     kernel_size=None if kernel_size is None else pair(kernel_size),
                     data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


def conv2d_transpose(data, weight, input_zero_point, kernel_zero_point, input_scale,
                     kernel_scale, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                     channels=None, kernel_size=None, data_layout="NCHW", kernel_layout="IOHW",
                     out_layout="", output_padding=(0, 0), out_dtype="int32"):
    """relay.qnn.op.conv2d_transpose (NCHW data, IOHW weight)."""
    return make_call("qnn.conv2d_transpose", [data, weight, input_zero_point,
                                              kernel_zero_point, input_scale, kernel_scale],
                     channels=channels,
                     kernel_size=None if kernel_size is None else pair(kernel_size),
                     strides=pair(strides), padding=pad_tuple2d(padding),
                     output_padding=pair(output_padding), dilation=pair(dilation),
                     groups=int(groups), data_layout=data_layout, kernel_layout=kernel_layout,
                     out_layout=out_layout, out_dtype=out_dtype)


def dense(data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale,
          units=None, out_dtype="int32"):
    """relay.qnn.op.dense: data [..., in] x weight [units, in]^T, int32."""
    return make_call("qnn.dense", [data, weight, input_zero_point, kernel_zero_point,
                                   input_scale, kernel_scale], units=units, out_dtype=out_dtype)


def batch_matmul(x, y, x_zero_point, y_zero_point, x_scale, y_scale, out_dtype="int32",
                 transpose_a=False, transpose_b=True):
    """relay.qnn.op.batch_matmul: [b, m, k] x [b, n, k]^T by default, int32."""
    return make_call("qnn.batch_matmul", [x, y, x_zero_point, y_zero_point, x_scale, y_scale],
                     out_dtype=out_dtype, transpose_a=bool(transpose_a),
                     transpose_b=bool(transpose_b))
