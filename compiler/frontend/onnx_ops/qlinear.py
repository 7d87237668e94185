"""ONNX's integer contractions as QNN ops: ConvInteger and MatMulInteger (int32 results),
QLinearConv, QLinearMatMul and com.microsoft's QGemm (requantized, or float for QGemm
without an output scale).

The contraction is qnn.conv2d / qnn.dense / qnn.batch_matmul on the 8-bit operands with their
zero points (the strategy layer's int8 anchors); the int32 bias is added, then qnn.requantize
with input scale a_scale * b_scale (multiplied in float32, in onnxruntime's order), rounding
half to even in float32: onnxruntime's requantisation, bit for bit. Zero points the QNN ops
cannot take (a per-row zero point of A, a per-column one of a batched B) are subtracted first
into int16 operands, which the contractions also take.
"""
from __future__ import annotations

from compiler.op import qnn, qnn_contract

from .common import NodeContext, const, converter, num_elements, op, reshape
from .nn import conv2d_attrs, conv_window, from_2d, matmul_with, to_2d
from .quantize import MS_DOMAIN, scale_of, zero_point_of

_OPERANDS = ("int8", "uint8")
_REQUANTIZE = {"rounding": "TONEAREST_EVEN", "compute_dtype": "float32"}


def _input(inputs, index: int):
    return inputs[index] if len(inputs) > index and inputs[index] is not None else None


def _operand(ctx: NodeContext, x, what: str) -> str:
    dtype = ctx.dtype(x)
    if dtype not in _OPERANDS:
        raise ctx.error(f"{what} must be int8 or uint8, got {dtype}")
    return dtype


def _per_tensor(ctx: NodeContext, param) -> bool:
    return num_elements(ctx.shape(param)) == 1


def _centered16(ctx: NodeContext, x, zero_point, axis: int):
    """x - zero_point as int16 (zero point along axis): for zero points the QNN ops do not
    take; the result's own zero point is 0."""
    zp = zero_point
    if ctx.shape(zp):
        zp = reshape(zp, [-1] + [1] * (ctx.rank(x) - axis - 1))
    return op("subtract", op("cast", x, dtype="int16"), op("cast", zp, dtype="int16"))


def _zero():
    return const(0, "int32")


def _one():
    return const(1.0, "float32")


def integer_matmul(ctx: NodeContext, a, b, a_zp, b_zp, a_scale=None, b_scale=None):
    """int32 numpy-matmul of a and b (uint8/int8) with ONNX zero points: a's per tensor or per
    row, b's per tensor or per column."""
    a_dtype = _operand(ctx, a, "A")
    b_dtype = _operand(ctx, b, "B")
    sa, sb = ctx.shape(a), ctx.shape(b)
    if a_zp is not None and not _per_tensor(ctx, a_zp):  # one per row of A
        rows = zero_point_of(ctx, a_zp, a_dtype, sa, len(sa) - 2, what="A's zero point")
        a, a_zero = _centered16(ctx, a, rows, len(sa) - 2), _zero()
    else:
        a_zero = zero_point_of(ctx, a_zp, a_dtype, what="A's zero point")
    per_column = b_zp is not None and not _per_tensor(ctx, b_zp)
    b_zero = zero_point_of(ctx, b_zp, b_dtype, sb, len(sb) - 1, what="B's zero point")
    a_s = _one() if a_scale is None else scale_of(ctx, a_scale, what="A's scale")
    b_s = _one() if b_scale is None else scale_of(ctx, b_scale, sb, len(sb) - 1,
                                                    what="B's scale")

    def dense(x, w):
        return qnn_contract.dense(x, w, a_zero, b_zero, a_s, b_s)

    def batch_matmul(x, y):
        zero = b_zero
        if per_column:
            y, zero = _centered16(ctx, y, b_zero, 2), _zero()
        return qnn_contract.batch_matmul(x, y, a_zero, zero, a_s,
                                         b_s if not per_column else _one(), transpose_b=False)
    return matmul_with(ctx, a, b, dense, batch_matmul)


@converter("MatMulInteger", since=10)
def _matmul_integer(ctx, inputs):
    return integer_matmul(ctx, inputs[0], inputs[1], _input(inputs, 2), _input(inputs, 3))


def requantize(ctx: NodeContext, acc, in_scale, y_scale, y_zp, y_dtype: str, axis: int):
    """acc (int32, scale in_scale, zero point 0) into y's scale and zero point."""
    return qnn.requantize(acc, in_scale, _zero(), scale_of(ctx, y_scale, what="y_scale"),
                          zero_point_of(ctx, y_zp, y_dtype, what="y_zero_point"), axis=axis,
                          out_dtype=y_dtype, **_REQUANTIZE)


def _scale_product(ctx: NodeContext, *scales):
    """The product of float32 scales, left to right (onnxruntime's order)."""
    out = scales[0]
    for s in scales[1:]:
        out = op("multiply", out, s)
    return out


@converter("QLinearMatMul", since=10)
def _qlinear_matmul(ctx, inputs):
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = inputs
    acc = integer_matmul(ctx, a, b, a_zp, b_zp)
    sb = ctx.shape(b)
    in_scale = _scale_product(ctx, scale_of(ctx, a_scale, what="a_scale"),
                              scale_of(ctx, b_scale, sb, len(sb) - 1, what="b_scale"))
    y_dtype = ctx.dtype(y_zp) if y_zp is not None else ctx.dtype(a)
    return requantize(ctx, acc, in_scale, y_scale, y_zp, y_dtype, -1)


def _conv(ctx: NodeContext, x, w, x_zp, w_zp, x_scale=None, w_scale=None):
    """(int32 qnn.conv2d of x and w with ONNX zero points, spatial rank)."""
    x_dtype, w_dtype = _operand(ctx, x, "x"), _operand(ctx, w, "w")
    n, kernel, window = conv_window(ctx, x, w)
    if n == 3:
        raise ctx.error("3-D quantized convolution is not supported (qnn.conv2d is 2-D)")
    if x_zp is not None and not _per_tensor(ctx, x_zp):
        raise ctx.error(f"x_zero_point must be a scalar, got shape {ctx.shape(x_zp)}")
    ws = ctx.shape(w)
    out = qnn_contract.conv2d(
        to_2d(ctx, x), to_2d(ctx, w), zero_point_of(ctx, x_zp, x_dtype, what="x_zero_point"),
        zero_point_of(ctx, w_zp, w_dtype, ws, 0, what="w_zero_point"),
        _one() if x_scale is None else scale_of(ctx, x_scale, what="x_scale"),
        _one() if w_scale is None else scale_of(ctx, w_scale, ws, 0, what="w_scale"),
        **conv2d_attrs(ctx, x, w, kernel, window))
    return out, n


@converter("ConvInteger", since=10)
def _conv_integer(ctx, inputs):
    out, n = _conv(ctx, inputs[0], inputs[1], _input(inputs, 2), _input(inputs, 3))
    return from_2d(ctx, out, n)


@converter("QLinearConv", since=10)
def _qlinear_conv(ctx, inputs):
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = inputs[:8]
    bias = _input(inputs, 8)
    acc, n = _conv(ctx, x, w, x_zp, w_zp, x_scale, w_scale)
    if bias is not None:
        acc = op("nn.bias_add", acc, op("cast", bias, dtype="int32"), axis=1)
    in_scale = _scale_product(ctx, scale_of(ctx, x_scale, what="x_scale"),
                              scale_of(ctx, w_scale, ctx.shape(w), 0, what="w_scale"))
    y_dtype = ctx.dtype(y_zp) if y_zp is not None else ctx.dtype(x)
    return from_2d(ctx, requantize(ctx, acc, in_scale, y_scale, y_zp, y_dtype, 1), n)


@converter("QGemm", since=1, domain=MS_DOMAIN)
def _qgemm(ctx, inputs):
    """alpha * A' B' (+ C, int32) requantized to y's scale, or as float32 without one."""
    a, a_scale, a_zp, b, b_scale, b_zp = inputs[:6]
    c, y_scale, y_zp = _input(inputs, 6), _input(inputs, 7), _input(inputs, 8)
    if ctx.attr("transA", 0):
        a = op("transpose", a, axes=[1, 0])
    if not ctx.attr("transB", 0):
        b = op("transpose", b, axes=[1, 0])  # B as [N, K], dense's weight
    a_dtype, b_dtype = _operand(ctx, a, "A"), _operand(ctx, b, "B")
    n = ctx.shape(b)[0]
    a_s = scale_of(ctx, a_scale, what="a_scale")
    b_s = scale_of(ctx, b_scale, (n,), 0, what="b_scale")
    acc = qnn_contract.dense(a, b, zero_point_of(ctx, a_zp, a_dtype, what="a_zero_point"),
                             zero_point_of(ctx, b_zp, b_dtype, (n,), 0, what="b_zero_point"),
                             a_s, b_s)
    if c is not None:
        acc = op("add", acc, op("cast", c, dtype="int32"))
    in_scale = _scale_product(ctx, const(float(ctx.attr("alpha", 1.0)), "float32"), a_s, b_s)
    if y_scale is None:
        return op("multiply", op("cast", acc, dtype="float32"), in_scale)
    y_dtype = ctx.dtype(y_zp) if y_zp is not None else a_dtype
    return requantize(ctx, acc, in_scale, y_scale, y_zp, y_dtype, -1)
