"""One or more valid example calls of every registered op, as argument types and attrs.

The registry-wide tests (tests/op/test_op_any_dims.py) run each op's type relation on these
with dynamic dims put in, and check the shape functions against the relations; a new op needs
an entry here (test_every_op_has_an_example says so).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.ir.types import TensorType, TupleType
from compiler.op.tensor import _BINARY, _BITWISE, _COMPARE, _UNARY


def T(*shape, dtype="float32"):  # noqa: N802 - reads as a type
    return TensorType(shape, dtype)


def I(*shape):  # noqa: N802, E743
    return TensorType(shape, "int32")


def L(*shape):  # noqa: N802
    return TensorType(shape, "int64")


def Q(*shape):  # noqa: N802
    return TensorType(shape, "int8")


def Tup(*fields):  # noqa: N802
    return TupleType(fields)


@dataclass
class Example:
    op: str
    args: list
    attrs: dict = field(default_factory=dict)
    # argument positions that carry values a shape depends on (left static by the Any tests)
    static_args: tuple = ()
    # dims of 1 stay static: which dims are 1 decides the output rank (squeeze, axis=None)
    keep_ones: bool = False
    # input index -> value, for ops whose output shape depends on input values (dyn.*)
    values: dict = field(default_factory=dict)


def E(op, *args, static_args=(), keep_ones=False, values=None, **attrs):  # noqa: N802
    values = values or {}
    return Example(op, list(args), attrs, tuple(static_args) + tuple(values), keep_ones,
                   {i: np.asarray(v, dtype=args[i].dtype) for i, v in values.items()})


_CONV = dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)
_POOL = dict(pool_size=(3, 3), strides=(2, 2), dilation=(1, 1), padding=(1, 1, 1, 1))
_RED = dict(axis=(1,), keepdims=False, exclude=False)

EXAMPLES: list = [
    *(E(n, T(2, 3, 4)) for n in _UNARY if n not in ("logical_not", "bitwise_not")),
    E("logical_not", T(2, 3, dtype="bool")), E("bitwise_not", I(2, 3)),
    *(E(n, T(2, 3)) for n in ("isnan", "isinf", "isfinite")),
    *(E(n, T(2, 1, 4), T(3, 1)) for n in _BINARY if not n.startswith("logical")),
    *(E(n, T(2, 3, dtype="bool"), T(3, dtype="bool")) for n in _BINARY
      if n.startswith("logical")),
    *(E(n, I(2, 3), I(3)) for n in _BITWISE),
    *(E(n, T(4, 1), T(1, 5)) for n in _COMPARE),
    E("clip", T(2, 3), a_min=0.0, a_max=1.0),
    E("cast", T(2, 3), dtype="int32"), E("cast_like", T(2, 3), I(4)),
    E("where", T(2, 1, dtype="bool"), T(2, 3), T(3)),
    E("zeros_like", T(2, 3)), E("ones_like", T(2, 3)), E("full_like", T(2, 3), T()),
    E("reinterpret", T(2, 3), dtype="int32"),
    E("annotation.stop_fusion", T(2, 3)),
    E("nn.relu", T(2, 3)), E("nn.leaky_relu", T(2, 3), alpha=0.1),
    E("nn.prelu", T(2, 3, 4, 4), T(3), axis=1),
    E("nn.softmax", T(2, 5), axis=-1), E("nn.log_softmax", T(2, 5), axis=1),
    E("nn.dropout", T(2, 3), rate=0.5),
    E("nn.bias_add", T(2, 3, 4, 4), T(3), axis=1),
    E("nn.dense", T(4, 8), T(6, 8), units=None, out_dtype=""),
    E("nn.dense", T(2, 4, 8), T(6, 8), units=6, out_dtype=""),
    E("nn.matmul", T(4, 8), T(8, 6), units=None, out_dtype="", transpose_a=False,
      transpose_b=False),
    E("nn.matmul", T(8, 4), T(6, 8), units=None, out_dtype="", transpose_a=True,
      transpose_b=True),
    E("nn.batch_matmul", T(2, 4, 8), T(2, 6, 8), transpose_b=True),
    E("nn.batch_matmul", T(1, 8, 4), T(3, 8, 6), transpose_a=True, transpose_b=False),
    E("nn.contrib_batch_matmul_axes", T(4, 2, 8), T(6, 2, 8), a_axes="MBK", b_axes="NBK",
      out_axes="BMN"),
    E("nn.contrib_batch_matmul_axes", T(4, 2, 8), T(8, 2, 6), a_axes="MBK", b_axes="KBN",
      out_axes="MBN", out_shape=(4, 12)),
    E("nn.conv2d", T(1, 3, 8, 8), T(4, 3, 3, 3), **_CONV),
    E("nn.conv2d", T(1, 4, 9, 7), T(4, 1, 3, 3), strides=(2, 2), padding=(1, 1, 1, 1),
      dilation=(1, 1), groups=4),
    E("nn.conv2d", T(1, 8, 8, 3), T(3, 3, 3, 4), strides=(1, 1), padding=(0, 0, 0, 0),
      dilation=(1, 1), groups=1, data_layout="NHWC", kernel_layout="HWIO"),
    E("nn.conv1d", T(1, 3, 10), T(4, 3, 3), strides=(2,), padding=(1, 1), dilation=(1,)),
    E("nn.conv3d", T(1, 2, 5, 6, 7), T(4, 2, 3, 3, 3), strides=(1, 1, 1),
      padding=(1, 1, 1, 1, 1, 1), dilation=(1, 1, 1)),
    E("nn.conv2d_transpose", T(1, 4, 5, 5), T(4, 3, 3, 3), strides=(2, 2),
      padding=(1, 1, 1, 1), output_padding=(1, 1)),
    E("nn.conv1d_transpose", T(1, 4, 5), T(4, 3, 3), strides=(2,), padding=(1, 1),
      output_padding=(1,)),
    E("nn.conv3d_transpose", T(1, 4, 3, 4, 5), T(4, 2, 3, 3, 3), strides=(2, 2, 2),
      padding=(1, 1, 1, 1, 1, 1), output_padding=(0, 0, 0)),
    E("nn.deformable_conv2d", T(1, 4, 6, 6), T(1, 18, 6, 6), T(5, 4, 3, 3),
      padding=(1, 1, 1, 1), kernel_size=(3, 3), channels=5),
    E("nn.modulated_deformable_conv2d", T(1, 4, 6, 6), T(1, 18, 6, 6), T(5, 4, 3, 3),
      T(1, 9, 6, 6), padding=(1, 1, 1, 1), kernel_size=(3, 3), channels=5),
    E("nn.contrib_conv2d_weight_pack", T(6, 3, 3, 3), groups=1, block=4),
    E("nn.contrib_conv2d_packed", T(1, 3, 8, 8), T(1, 2, 3, 3, 3, 4), channels=6, **_CONV),
    E("nn.contrib_conv2d_NCHWc", T(1, 2, 8, 8, 4), T(1, 2, 8, 3, 3, 8), channels=16,
      data_layout="NCHW4c", kernel_layout="GOIHW8o", out_layout="NCHW4c", **_CONV),
    E("nn.contrib_depthwise_conv2d_NCHWc", T(1, 2, 8, 8, 4), T(2, 1, 3, 3, 1, 4),
      channels=8, kernel_size=(3, 3), data_layout="NCHW4c", kernel_layout="OIHW1i4o",
      out_layout="NCHW4c", strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=8),
    E("nn.contrib_conv2d_winograd_weight_transform", T(4, 3, 3, 3), tile_size=2),
    E("nn.contrib_conv2d_winograd_without_weight_transform", T(1, 3, 8, 8), T(4, 4, 4, 3),
      channels=4, kernel_size=(3, 3), tile_size=2, **_CONV),
    E("nn.contrib_conv2d_max_pool", T(1, 3, 8, 8), T(1, 1, 3, 3, 3, 4), channels=4,
      pool_size=(2, 2),
      pool_strides=(2, 2), pool_padding=(0, 0, 0, 0), **_CONV),
    E("nn.contrib_dense_weight_pack", T(10, 8), block=4, k_padded=8),
    E("nn.contrib_dense_pack", T(3, 8), T(3, 8, 4), units=10),
    E("nn.contrib_recurrent_weight_pack", T(24, 6), gates=4, block=4),
    E("nn.contrib_recurrent_layer", T(5, 2, 24), T(24, 6), T(2, 6), T(2, 6), T(24), T(18),
      I(2), mode="LSTM", hidden_size=6),
    E("nn.contrib_recurrent_layer", T(5, 2, 18), T(6, 6, 4), T(2, 6), T(2, 6), T(18), T(18),
      I(2), mode="GRU", hidden_size=6, activations=("sigmoid", "tanh"),
      activation_alpha=(0.0, 0.0), activation_beta=(0.0, 0.0), weight_block=4),
    E("nn.contrib_dense_int8_weight_pack", Q(10, 9), block=8),
    E("nn.contrib_dense_int8", T(3, 9, dtype="uint8"), Q(2, 3, 8, 4), units=10),
    E("nn.contrib_conv2d_int8_weight_pack", Q(20, 5, 3, 3), block=16),
    E("nn.contrib_conv2d_int8", T(1, 5, 8, 8, dtype="uint8"), Q(2, 2, 3, 3, 16, 4), I(),
      channels=20, kernel_size=(3, 3), strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1)),
    E("nn.max_pool2d", T(1, 3, 9, 9), **_POOL),
    E("nn.max_pool2d", T(1, 9, 9, 3), pool_size=(2, 2), strides=(2, 2), dilation=(1, 1),
      padding=(0, 0, 0, 0), layout="NHWC", ceil_mode=True),
    E("nn.avg_pool2d", T(1, 3, 9, 9), count_include_pad=True, **_POOL),
    E("nn.max_pool3d", T(1, 2, 5, 6, 7), pool_size=(2, 2, 2), strides=(2, 2, 2),
      dilation=(1, 1, 1), padding=(0, 0, 0, 0, 0, 0)),
    E("nn.avg_pool3d", T(1, 2, 5, 6, 7), pool_size=(2, 2, 2), strides=(1, 1, 1),
      dilation=(1, 1, 1), padding=(1, 1, 1, 1, 1, 1)),
    E("nn.global_avg_pool2d", T(1, 3, 5, 5)), E("nn.global_max_pool2d", T(1, 3, 5, 5)),
    E("nn.adaptive_avg_pool2d", T(1, 3, 8, 8), output_size=(2, 3)),
    E("nn.adaptive_max_pool2d", T(1, 3, 8, 8), output_size=(2, 2)),
    E("nn.batch_flatten", T(2, 3, 4)),
    E("nn.batch_norm", T(2, 3, 4, 4), T(3), T(3), T(3), T(3)),
    E("nn.layer_norm", T(2, 5, 8), T(8), T(8), axis=-1),
    E("nn.instance_norm", T(2, 3, 4, 4), T(3), T(3)),
    E("nn.group_norm", T(2, 4, 3, 3), T(4), T(4), num_groups=2),
    E("nn.lrn", T(1, 6, 4, 4), size=3),
    E("nn.pad", T(2, 3, 4), T(), pad_width=((0, 0), (1, 2), (2, 1))),
    E("nn.pad", T(2, 3), T(), pad_width=((1, 1), (2, 2)), pad_mode="reflect"),
    E("nn.depth_to_space", T(1, 8, 2, 3), block_size=2),
    E("nn.space_to_depth", T(1, 2, 4, 6), block_size=2),
    E("nn.upsampling", T(1, 3, 4, 5), scale_h=2.0, scale_w=3.0),
    E("image.grid_sample", T(1, 3, 5, 5), T(1, 2, 4, 6)),
    E("vision.roi_align", T(1, 3, 8, 8), T(4, 5), pooled_size=(2, 2), spatial_scale=0.5),
    E("argwhere", T(3, 4), values={0: [[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 5, 0]]}),
    E("argwhere", T(5, dtype="bool"), values={0: [True, False, True, True, False]}),
    E("sum", T(2, 3, 4), **_RED), E("mean", T(2, 3, 4), axis=(0, 2), keepdims=True,
                                     exclude=False),
    E("max", T(2, 3, 4), axis=None, keepdims=False, exclude=False),
    E("min", T(2, 3, 4), axis=(1,), keepdims=False, exclude=True),
    E("prod", T(2, 3, 4), **_RED),
    E("all", T(2, 3, dtype="bool"), **_RED), E("any", T(2, 3, dtype="bool"), **_RED),
    E("argmax", T(2, 3, 4), axis=(1,), keepdims=True),
    E("argmin", T(2, 3, 4), axis=None),
    E("variance", T(2, 3, 4), T(2, 1, 4), axis=(1,), keepdims=False),
    E("argsort", T(2, 5), axis=-1), E("sort", T(2, 5), axis=0),
    E("topk", T(2, 7), k=3, axis=-1, ret_type="both"),
    E("topk", T(2, 7), k=2, axis=0, ret_type="values"),
    E("cumsum", T(2, 5), axis=1), E("cumprod", T(2, 5), axis=None),
    E("reshape", T(2, 3, 4), newshape=(6, -1)),
    E("reshape", T(2, 3, 4), newshape=(0, 12)),
    E("reshape", T(2, 3, 4), newshape=(-3, 4)),
    E("reshape", T(2, 3, 4), newshape=(2, -4, 1, 3, 4)),
    E("reshape", T(2, 3, 4), newshape=(-2,)),
    E("contrib_reverse_reshape", T(2, 3, 4), newshape=(-1, 0)),
    E("reshape_like", T(2, 3, 4), T(6, 4)),
    E("reshape_like", T(2, 3, 4), T(5, 6, 7), lhs_begin=0, lhs_end=2, rhs_begin=1,
      rhs_end=2),
    E("transpose", T(2, 3, 4), axes=(2, 0, 1)), E("transpose", T(2, 3)),
    E("expand_dims", T(2, 3), axis=1, num_newaxis=2),
    E("squeeze", T(2, 1, 3, 1), axis=(1,)), E("squeeze", T(2, 1, 3, 1), keep_ones=True),
    E("concatenate", Tup(T(2, 3), T(4, 3)), axis=0),
    E("concatenate", Tup(T(2, 3), T(2, 1), T(2, 2)), axis=-1),
    E("stack", Tup(T(2, 3), T(2, 3)), axis=1),
    E("split", T(6, 4), indices_or_sections=3, axis=0),
    E("split", T(4, 9), indices_or_sections=(2, 5), axis=1),
    E("strided_slice", T(5, 6, 7), begin=(1, 0), end=(4, 6), strides=(1, 2)),
    E("strided_slice", T(5, 6), begin=(4,), end=(-6,), strides=(-2,)),
    E("strided_slice", T(5, 6), begin=(1,), end=(3,), strides=(1,), slice_mode="size",
      axes=(1,)),
    E("take", T(5, 4), I(3), axis=0), E("take", T(5, 4), I(2, 3), axis=1, mode="wrap"),
    E("take", T(5, 4), I(3), axis=None),
    E("take", T(2, 5, 4), I(2, 3), axis=1, batch_dims=1),
    E("gather", T(3, 4), I(3, 2), axis=1),
    E("gather_nd", T(3, 4, 5), I(2, 6)),
    E("scatter_elements", T(4, 5), I(2, 5), T(2, 5), axis=0),
    E("scatter_nd", T(4, 5), I(1, 3), T(3, 5)),
    E("one_hot", I(3, 2), T(), T(), depth=5, axis=-1),
    E("tile", T(2, 3), reps=(2, 1, 2)),
    E("repeat", T(2, 3), repeats=2, axis=1),
    E("reverse", T(2, 3), axis=1),
    E("broadcast_to", T(3, 1), shape=(2, 3, 4)),
    E("broadcast_to_like", T(3, 1), T(2, 3, 4)),
    E("zeros", shape=(2, 3), dtype="float32"), E("ones", shape=(4,), dtype="int32"),
    E("full", T(), shape=(2, 3), dtype="float32"),
    E("arange", T(), T(), T(), start=0.0, stop=5.0, step=1.0, dtype="float32",
      static_args=(0, 1, 2)),
    E("arange", T(), T(), T(), start=None, stop=None, step=None, dtype="float32",
      values={0: 1.0, 1: 7.5, 2: 2.0}),
    E("shape_of", T(2, 3), dtype="int64"), E("ndarray_size", T(2, 3), dtype="int32"),
    E("trilu", T(4, 5), I(), upper=True, static_args=(1,)),
    E("layout_transform", T(1, 8, 4, 4), src_layout="NCHW", dst_layout="NCHW4c"),
    E("layout_transform", T(1, 2, 4, 4, 4), src_layout="NCHW4c", dst_layout="NCHW"),
    E("unique", T(6), sorted=True, return_counts=True),
    E("unique", T(5, 3), sorted=False),
    E("vision.all_class_non_max_suppression", T(1, 6, 4), T(1, 2, 6), I(), T(), T(),
      output_format="onnx", static_args=(2, 3, 4)),
    # dyn.*: the shape-like inputs are tensors whose values the shape depends on
    E("dyn.reshape", T(4, 6), L(3), values={1: [2, -1, 3]}),
    E("dyn.reshape", T(4, 6), L(2), values={1: [0, 6]}),
    E("dyn.broadcast_to", T(3, 1), L(3), values={1: [2, 3, 4]}),
    E("dyn.strided_slice", T(5, 6, 7), L(2), L(2), L(2),
      values={1: [1, 0], 2: [4, 6], 3: [1, 2]}),
    E("dyn.strided_slice", T(5, 6), L(1), L(1), L(1), values={1: [4], 2: [-6], 3: [-2]}),
    E("dyn.tile", T(2, 3), L(3), values={1: [2, 1, 2]}),
    E("dyn.zeros", L(2), dtype="float32", values={0: [2, 3]}),
    E("dyn.ones", L(1), dtype="int32", values={0: [4]}),
    E("dyn.full", T(), L(2), values={1: [2, 3]}),
    E("dyn.topk", T(2, 7), I(), axis=-1, ret_type="both", values={1: 3}),
    E("dyn.one_hot", I(3, 2), T(), T(), I(), axis=-1, dtype="float32", values={3: 5}),
    E("dyn.expand_dims", T(2, 3), I(), num_newaxis=2, values={1: 1}),
    E("dyn.squeeze", T(2, 1, 3, 1), L(1), keep_ones=True, values={1: [1]}),
    E("dyn.nn.pad", T(2, 3, 4), L(3, 2), T(), values={1: [[0, 0], [1, 2], [2, 1]]}),
    E("dyn.nn.upsampling", T(1, 3, 4, 5), T(), T(), values={1: 2.0, 2: 3.0}),
    *(E(f"dyn.{r}", T(2, 3, 4), L(2), values={1: [-1, 0]})
      for r in ("sum", "mean", "max", "min", "prod")),
    # qnn.*: int8/uint8 data, float32 scales and int32 zero points (scalars; per channel
    # where the op takes an axis, kept static: the parameters are constants in practice, and
    # a run-time one-element vector is a scalar the relation cannot tell from a full one)
    E("qnn.quantize", T(2, 3, 4), T(), I(), axis=-1, out_dtype="int8"),
    E("qnn.quantize", T(2, 3, 4), T(3), I(3), axis=1, out_dtype="uint8", static_args=(1, 2)),
    E("qnn.dequantize", Q(2, 3, 4), T(), I(), axis=-1, out_dtype="float32"),
    E("qnn.requantize", I(2, 3, 4), T(), I(), T(), I(), axis=-1, rounding="None",
      compute_dtype="None", out_dtype="int8"),
    E("qnn.simulated_quantize", T(2, 3), I(), T(), I(), axis=-1, static_args=(1,)),
    E("qnn.simulated_dequantize", T(2, 3), I(), T(), I(), axis=-1, static_args=(1,)),
    *(E(n, Q(2, 1, 4), Q(3, 1), T(), I(), T(), I(), T(), I(), lhs_axis=-1, rhs_axis=-1)
      for n in ("qnn.add", "qnn.subtract", "qnn.mul")),
    E("qnn.concatenate", Tup(Q(2, 3), Q(4, 3)), Tup(T(), T()), Tup(I(), I()), T(), I(),
      axis=0),
    *(E(n, Q(2, 3, 4), T(), I(), T(), I())
      for n in ("qnn.abs", "qnn.erf", "qnn.exp", "qnn.hardswish", "qnn.log", "qnn.rsqrt",
                "qnn.sigmoid", "qnn.sqrt", "qnn.tanh")),
    E("qnn.leaky_relu", Q(2, 3, 4), T(), I(), T(), I(), alpha=0.1),
    E("qnn.softmax", Q(2, 3, 4), T(), I(), T(), I(), axis=-1),
    E("qnn.avg_pool2d", Q(1, 3, 8, 8), T(), I(), T(), I(), pool_size=(3, 3),
      strides=(2, 2), dilation=(1, 1), padding=(1, 1, 1, 1), layout="NCHW", out_layout="",
      ceil_mode=False, count_include_pad=False),
    E("qnn.conv2d", Q(1, 3, 8, 8), Q(4, 3, 3, 3), I(), I(4), T(), T(4), **_CONV,
      static_args=(3, 5),
      channels=4, kernel_size=(3, 3), data_layout="NCHW", kernel_layout="OIHW",
      out_layout="", out_dtype="int32"),
    E("qnn.conv2d_transpose", Q(1, 3, 8, 8), Q(3, 4, 3, 3), I(), I(), T(), T(),
      channels=4, kernel_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1),
      output_padding=(1, 1), dilation=(1, 1), groups=1, data_layout="NCHW",
      kernel_layout="IOHW", out_layout="", out_dtype="int32"),
    E("qnn.dense", Q(5, 6), Q(4, 6), I(), I(4), T(), T(4), units=4, out_dtype="int32",
      static_args=(3, 5)),
    E("qnn.batch_matmul", Q(2, 5, 6), Q(2, 4, 6), I(), I(), T(), T(), out_dtype="int32",
      transpose_a=False, transpose_b=True),
]


def examples_of(op: str) -> list:
    return [e for e in EXAMPLES if e.op == op]
