"""com.microsoft's quantized operators that onnxruntime's quantizer emits in QOperator form,
as QNN ops: QLinearAdd, QLinearMul, QLinearConcat, QLinearGlobalAveragePool,
QLinearAveragePool, QLinearLeakyRelu, QLinearSigmoid and QLinearSoftmax (QGemm and the
contrib Quantize/DequantizeLinear are with their ONNX counterparts)."""
from __future__ import annotations

from compiler.op import qnn_composite

from .common import NodeContext, converter, norm_axis, num_elements, reshape
from .nn import window_pads
from .quantize import MS_DOMAIN, scale_of, zero_point_of


def _params(ctx: NodeContext, inputs, scale: int, zero_point: int, dtype: str, what: str):
    """(scale, zero point) of a per-tensor quantized value at two input indices."""
    zp = inputs[zero_point] if len(inputs) > zero_point else None
    return (scale_of(ctx, inputs[scale], what=f"{what} scale"),
            zero_point_of(ctx, zp, dtype, what=f"{what} zero point"))


def _binary(make):
    def convert(ctx, inputs):
        a, b = inputs[0], inputs[3]
        dtype = ctx.dtype(a)
        if ctx.dtype(b) != dtype:
            raise ctx.error(f"A is {dtype} but B is {ctx.dtype(b)}")
        return make(a, b, *_params(ctx, inputs, 1, 2, dtype, "A"),
                    *_params(ctx, inputs, 4, 5, dtype, "B"),
                    *_params(ctx, inputs, 6, 7, dtype, "C"))
    return convert


converter("QLinearAdd", since=1, domain=MS_DOMAIN)(_binary(qnn_composite.add))
converter("QLinearMul", since=1, domain=MS_DOMAIN)(_binary(qnn_composite.mul))


@converter("QLinearConcat", since=1, domain=MS_DOMAIN)
def _qlinear_concat(ctx, inputs):
    """inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input."""
    if len(inputs) < 5 or (len(inputs) - 2) % 3:
        raise ctx.error(f"expects Y_scale, Y_zero_point and triples (X, X_scale, "
                        f"X_zero_point), got {len(inputs)} inputs")
    data, scales, zero_points = [], [], []
    for k in range(2, len(inputs), 3):
        dtype = ctx.dtype(inputs[k])
        scale, zp = _params(ctx, inputs, k + 1, k + 2, dtype, f"input {(k - 2) // 3}")
        data.append(inputs[k])
        scales.append(scale)
        zero_points.append(zp)
    out_scale, out_zp = _params(ctx, inputs, 0, 1, ctx.dtype(data[0]), "Y")
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), ctx.rank(data[0]))
    return qnn_composite.concatenate(data, scales, zero_points, out_scale, out_zp, axis)


def _pool_layout(ctx: NodeContext, x) -> tuple:
    """(x as 4-D, layout, spatial shape, restore) for 1-D/2-D pools; channels_last is NHWC."""
    shape = ctx.shape(x)
    last = bool(ctx.attr("channels_last", 0))
    n = len(shape) - 2
    if n not in (1, 2):
        raise ctx.error(f"only 1-D and 2-D pooling is supported, got input shape {shape}")
    spatial = shape[1:-1] if last else shape[2:]
    if n == 1:
        four = [shape[0], 1, shape[1], shape[2]] if last else [shape[0], shape[1], 1, shape[2]]
        x = reshape(x, four)
    return x, ("NHWC" if last else "NCHW"), list(spatial), n


def _restore(ctx: NodeContext, y, n: int, last: bool):
    if n == 2:
        return y
    shape = ctx.shape(y)
    return reshape(y, [shape[0], shape[2], shape[3]] if last else [shape[0], shape[1], shape[3]])


def _pool(ctx: NodeContext, inputs, kernel, strides, pads, ceil_mode: bool, include: bool):
    x = inputs[0]
    dtype = ctx.dtype(x)
    x4, layout, spatial, n = _pool_layout(ctx, x)
    lift = (lambda v, fill: list(v) if n == 2 else [fill] + list(v))
    out = qnn_composite.avg_pool2d(x4, *_params(ctx, inputs, 1, 2, dtype, "x"),
                                   *_params(ctx, inputs, 3, 4, dtype, "y"),
                                   lift(kernel, 1), lift(strides, 1),
                                   lift(pads[0], 0) + lift(pads[1], 0), (1, 1),
                                   ceil_mode=ceil_mode, count_include_pad=include,
                                   layout=layout)
    return _restore(ctx, out, n, layout == "NHWC")


@converter("QLinearGlobalAveragePool", since=1, domain=MS_DOMAIN)
def _qlinear_global_average_pool(ctx, inputs):
    _, _, spatial, n = _pool_layout(ctx, inputs[0])
    return _pool(ctx, inputs, spatial, [1] * n, ([0] * n, [0] * n), False, False)


@converter("QLinearAveragePool", since=1, domain=MS_DOMAIN)
def _qlinear_average_pool(ctx, inputs):
    _, _, spatial, n = _pool_layout(ctx, inputs[0])
    kernel = list(ctx.attr("kernel_shape"))
    strides = list(ctx.attr("strides", [1] * n))
    pads = window_pads(ctx, spatial, kernel, strides, [1] * n)
    return _pool(ctx, inputs, kernel, strides, pads, bool(ctx.attr("ceil_mode", 0)),
                 bool(ctx.attr("count_include_pad", 0)))


def _unary(make):
    def convert(ctx, inputs):
        dtype = ctx.dtype(inputs[0])
        return make(inputs[0], *_params(ctx, inputs, 1, 2, dtype, "X"),
                    *_params(ctx, inputs, 3, 4, dtype, "Y"))
    return convert


converter("QLinearSigmoid", since=1, domain=MS_DOMAIN)(_unary(qnn_composite.sigmoid))


@converter("QLinearLeakyRelu", since=1, domain=MS_DOMAIN)
def _qlinear_leaky_relu(ctx, inputs):
    alpha = float(ctx.attr("alpha", 0.01))
    return _unary(lambda x, *params: qnn_composite.leaky_relu(x, alpha, *params))(ctx, inputs)


@converter("QLinearSoftmax", since=1, domain=MS_DOMAIN)
def _qlinear_softmax(ctx, inputs):
    """opset >= 13: softmax along axis; older: over the dims from axis on, flattened."""
    x = inputs[0]
    shape = ctx.shape(x)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), len(shape))
    if int(ctx.attr("opset", 13)) >= 13 or axis == len(shape) - 1:
        return _unary(lambda *a: qnn_composite.softmax(*a, axis=axis))(ctx, inputs)
    flat = reshape(x, [num_elements(shape[:axis]), num_elements(shape[axis:])])
    out = _unary(lambda *a: qnn_composite.softmax(*a, axis=-1))(ctx, [flat, *inputs[1:]])
    return reshape(out, list(shape))
