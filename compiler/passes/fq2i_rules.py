"""FakeQuantizationToInteger's rewrite rules, one per float op (registered on the op as
FTVMFakeQuantizationToInteger, as TVM's python/tvm/relay/transform/
fake_quantization_to_integer.py does). rule(expr, type_map) -> [integer expr, affine type].

- Data movement and order-preserving ops pass the integers through with their type
  (reshape, transpose, slices, max pooling, max/min, ...); a per-channel type moves with its
  axis or the rule declines.
- conv2d / conv2d_transpose / dense / batch_matmul become the QNN contractions: an int32
  result with scale input_scale * kernel_scale (folded when constant) and zero point 0.
- bias_add / add / subtract of such int32 results with the same scale stay integer adds;
  other binary ops, concatenate, average pooling and the activations become their QNN ops
  with the region's output parameters. relu and clip clamp at the quantized bounds;
  multiplying by a positive scalar constant only changes the scale.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Constant, RelayExpr, const
from compiler.ir.type_infer import infer_type_local
from compiler.op import qnn_composite, qnn_math
from compiler.op.registry import make_call
from .fq2i_types import (RewriteNotApplicable, TensorAffineType, TupleAffineType,
                         register_fake_quantization_to_integer as register, requantize_to,
                         same_params, type_of)

_INT32 = "int32"


# --- helpers ---------------------------------------------------------------------------------


def _value(expr: RelayExpr) -> np.ndarray | None:
    return expr.data.numpy() if type(expr) is Constant else None


def _size(param: RelayExpr) -> int:
    value = _value(param)
    if value is not None:
        return value.size
    ty = param._checked_type or infer_type_local(param).checked_type
    return int(np.prod(ty.shape)) if ty.shape else 1


def per_tensor(t: TensorAffineType) -> bool:
    return _size(t.scale) == 1 and _size(t.zero_point) == 1


def _require_per_tensor(t: TensorAffineType, what: str) -> None:
    if not per_tensor(t):
        raise RewriteNotApplicable(f"{what} is quantized per channel")


def _ndim(expr) -> int:
    return len(type_of(expr).shape)


def multiply_scales(a: RelayExpr, b: RelayExpr) -> RelayExpr:
    """a * b in float32, folded when both are constants (numpy's float32 product is the one
    the multiply op computes)."""
    x, y = _value(a), _value(b)
    if x is not None and y is not None:
        return const(np.multiply(x.astype(np.float32), y.astype(np.float32)))
    return make_call("multiply", [a, b])


def _zero_like(scale: RelayExpr) -> RelayExpr:
    value = _value(scale)
    return const(np.zeros(value.shape if value is not None else (), np.int32))


def _along(param: RelayExpr, ndim: int, axis: int) -> RelayExpr:
    """A per-channel parameter reshaped to broadcast along axis of rank-ndim data."""
    if _size(param) == 1:
        return make_call("reshape", [param], newshape=[], allowzero=False)
    return make_call("reshape", [param], newshape=[-1] + [1] * (ndim - axis - 1),
                     allowzero=False)


def _quantized_constant(value: np.ndarray, t: TensorAffineType, ndim: int) -> np.ndarray:
    scale, zp = _value(t.scale), _value(t.zero_point)
    if scale is None or zp is None:
        raise RewriteNotApplicable("quantizing a constant needs constant parameters")
    axis = t.axis if t.axis >= 0 else max(ndim - 1, 0)
    if not per_tensor(t):
        scale = scale.reshape((-1,) + (1,) * (ndim - axis - 1))
        zp = zp.reshape((-1,) + (1,) * (ndim - axis - 1))
    return qnn_math.quantize(np.asarray(value, np.float32), scale.reshape(-1)
                             if scale.size == 1 else scale, zp.reshape(-1) if zp.size == 1
                             else zp, -1, t.dtype)


def _output(type_map, expr, dtype: str) -> TensorAffineType:
    """The region's output parameters for an op producing `dtype`: the anchor's when they are
    per tensor and of that dtype, else (TVM's fallback) None."""
    out = type_map[expr]
    if out.dtype == dtype and per_tensor(out):
        return out
    return None


# --- pass-through ops ------------------------------------------------------------------------


def _identity(expr, type_map):
    """One quantized input; the integers pass through (a per-channel axis must stay put)."""
    t = type_map[expr.args[0]]
    if not per_tensor(t):
        src = type_map.source
        before, after = type_of(src.args[0]).shape, type_of(src).shape
        if t.axis < 0 or tuple(before[:t.axis + 1]) != tuple(after[:t.axis + 1]):
            raise RewriteNotApplicable(f"{src.op.name} moves the quantization axis")
    return [expr, t]


for _op in ("reshape", "squeeze", "expand_dims", "strided_slice", "nn.batch_flatten",
            "nn.max_pool2d", "nn.max_pool3d", "nn.global_max_pool2d",
            "nn.adaptive_max_pool2d", "nn.depth_to_space", "nn.space_to_depth", "max", "min",
            "broadcast_to", "tile", "repeat", "reverse", "copy", "take"):
    register(_op, _identity)


@register("nn.upsampling")
def _upsampling(expr, type_map):
    if expr.attrs.method != "nearest_neighbor":
        raise RewriteNotApplicable("only nearest-neighbour upsampling keeps the integers")
    return _identity(expr, type_map)


@register("transpose")
def _transpose(expr, type_map):
    t = type_map[expr.args[0]]
    if per_tensor(t):
        return [expr, t]
    ndim = _ndim(type_map.source)
    axes = list(expr.attrs.axes) if expr.attrs.axes else list(range(ndim))[::-1]
    axes = [a % ndim for a in axes]
    return [expr, TensorAffineType(t.scale, t.zero_point, t.dtype, axes.index(t.axis))]


@register("split")
def _split(expr, type_map):
    t = type_map[expr.args[0]]
    _require_per_tensor(t, "split's input")
    return [expr, TupleAffineType((t,) * len(type_of(type_map.source).fields))]


@register("nn.relu")
def _relu(expr, type_map):
    """max(x, zero point): the quantized zero."""
    x = expr.args[0]
    t = type_map[x]
    ndim, zp = _ndim(type_map.source), _value(t.zero_point)
    if zp is None:
        zero = make_call("cast", [_along(t.zero_point, ndim, t.axis)], dtype=t.dtype)
    elif zp.size == 1:
        zero = const(zp.reshape(()).astype(t.dtype))
    else:
        zero = const(zp.reshape((-1,) + (1,) * (ndim - t.axis - 1)).astype(t.dtype))
    return [make_call("maximum", [x, zero]), t]


@register("clip")
def _clip(expr, type_map):
    x = expr.args[0]
    t = type_map[x]
    ndim = _ndim(type_map.source)
    lo = _quantized_constant(np.float32(expr.attrs.a_min), t, ndim)
    hi = _quantized_constant(np.float32(expr.attrs.a_max), t, ndim)
    if lo.size == 1:
        return [make_call("clip", [x], a_min=float(lo), a_max=float(hi)), t]
    out = make_call("maximum", [x, const(lo.astype(t.dtype))])
    return [make_call("minimum", [out, const(hi.astype(t.dtype))]), t]


@register("nn.pad")
def _pad(expr, type_map):
    x, value = expr.args
    t = type_map[x]
    if value in type_map:
        value = requantize_to(value, type_map[value], t)
    elif type(value) is Constant:
        _require_per_tensor(t, "the padded data")
        value = const(_quantized_constant(value.data.numpy(), t, 0).reshape(()))
    else:
        raise RewriteNotApplicable("the pad value is neither quantized nor a constant")
    return [make_call("nn.pad", [x, value], **dict(expr.attrs)), t]


# --- contractions ----------------------------------------------------------------------------


def _contraction(qnn_op: str, kernel_axis, out_axis):
    def rule(expr, type_map):
        x, w = expr.args
        if x not in type_map or w not in type_map:
            raise RewriteNotApplicable(f"{qnn_op}: both operands must be quantized")
        xt, wt = type_map[x], type_map[w]
        _require_per_tensor(xt, "the data")
        axis = kernel_axis(expr.attrs)
        if not per_tensor(wt) and (axis is None or wt.axis != axis):
            raise RewriteNotApplicable(f"{qnn_op}: the weight is quantized along axis "
                                       f"{wt.axis}, not its output channels")
        attrs = {k: v for k, v in dict(expr.attrs).items() if k != "out_dtype"}
        out = make_call(qnn_op, [x, w, xt.zero_point, wt.zero_point, xt.scale, wt.scale],
                        **attrs, out_dtype=_INT32)
        scale = multiply_scales(xt.scale, wt.scale)
        return [out, TensorAffineType(scale, _zero_like(scale), _INT32,
                                      out_axis(expr.attrs, type_map.source))]
    return rule


def _out_channel(attrs, source) -> int:
    return (attrs.out_layout or attrs.data_layout).index("C")


register("nn.conv2d", _contraction("qnn.conv2d", lambda a: a.kernel_layout.index("O"),
                                   _out_channel))
register("nn.conv2d_transpose", _contraction(
    "qnn.conv2d_transpose", lambda a: a.kernel_layout.index("O"), _out_channel))
register("nn.dense", _contraction("qnn.dense", lambda a: 0,
                                  lambda a, source: _ndim(source) - 1))
register("nn.batch_matmul", _contraction("qnn.batch_matmul", lambda a: None,
                                         lambda a, source: 2))


# --- arithmetic ------------------------------------------------------------------------------


def _scales_match(a: TensorAffineType, b: TensorAffineType) -> bool:
    x, y = _value(a.scale), _value(b.scale)
    if x is None or y is None:
        return same_params(a.scale, b.scale)
    return np.allclose(x.reshape(-1), y.reshape(-1), rtol=1e-6, atol=0)


def _zero(t: TensorAffineType) -> bool:
    value = _value(t.zero_point)
    return value is not None and not value.any()


@register("nn.bias_add")
def _bias_add(expr, type_map):
    x, bias = expr.args
    xt = type_map[x]
    if bias not in type_map:
        raise RewriteNotApplicable("the bias is not quantized")
    bt = type_map[bias]
    want = TensorAffineType(xt.scale, xt.zero_point, xt.dtype, 0)
    if not (bt.dtype == xt.dtype and _scales_match(xt, bt) and _zero(xt) and _zero(bt)):
        bias = requantize_to(bias, bt, want)
    return [make_call("nn.bias_add", [x, bias], **dict(expr.attrs)), xt]


def _binary(float_op: str, qnn_ctor):
    def rule(expr, type_map):
        lhs, rhs = expr.args
        lt, rt = type_map.get(lhs), type_map.get(rhs)
        if lt is None and rt is None:
            raise RewriteNotApplicable(f"{float_op}: neither operand is quantized")
        ndim = _ndim(type_map.source)
        if lt is None:
            lhs, lt = const(_quantized_constant(_constant(lhs), rt, ndim)), rt
        if rt is None:
            rhs, rt = const(_quantized_constant(_constant(rhs), lt, ndim)), lt
        if float_op != "multiply" and lt.dtype == rt.dtype == _INT32 and \
                _scales_match(lt, rt) and _zero(lt) and _zero(rt):
            return [make_call(float_op, [lhs, rhs]), lt]
        out = _output(type_map, expr, lt.dtype)
        if out is None or lt.dtype != rt.dtype:
            anchor = type_map[expr]
            _require_per_tensor(anchor, "the region's output")
            lhs, rhs = requantize_to(lhs, lt, anchor), requantize_to(rhs, rt, anchor)
            lt = rt = out = anchor
        return [qnn_ctor(lhs, rhs, lt.scale, lt.zero_point, rt.scale, rt.zero_point,
                         out.scale, out.zero_point, lhs_axis=lt.axis, rhs_axis=rt.axis), out]
    return rule


def _constant(expr) -> np.ndarray:
    if type(expr) is not Constant:
        raise RewriteNotApplicable("an operand is neither quantized nor a constant")
    return expr.data.numpy()


register("add", _binary("add", qnn_composite.add))
register("subtract", _binary("subtract", qnn_composite.subtract))
_multiply = _binary("multiply", qnn_composite.mul)


@register("multiply")
def _multiply_rule(expr, type_map):
    """x * c for a positive scalar constant c only rescales: the integers stay."""
    for i in (0, 1):
        value, other = _value(expr.args[1 - i]), expr.args[i]
        if other in type_map and value is not None and value.size == 1 and \
                np.float32(value.reshape(())) > 0:
            t = type_map[other]
            scale = multiply_scales(t.scale, const(value.reshape(()).astype(np.float32)))
            return [other, TensorAffineType(scale, t.zero_point, t.dtype, t.axis)]
    return _multiply(expr, type_map)


@register("concatenate")
def _concatenate(expr, type_map):
    types = type_map[expr.args[0]].types
    first = types[0]
    if all(t.dtype == first.dtype and same_params(t.scale, first.scale) and
           same_params(t.zero_point, first.zero_point) for t in types[1:]):
        return [expr, first]
    for t in types:
        _require_per_tensor(t, "a concatenated input")
    out = _output(type_map, expr, first.dtype) or first
    return [qnn_composite.concatenate(expr.args[0], [t.scale for t in types],
                                      [t.zero_point for t in types], out.scale,
                                      out.zero_point, expr.attrs.axis), out]


def _with_output(make):
    """A QNN op of one quantized input and output parameters (activations, pooling)."""
    def rule(expr, type_map):
        x = expr.args[0]
        t = type_map[x]
        _require_per_tensor(t, "the input")
        out = _output(type_map, expr, t.dtype) or t
        return [make(expr, x, t, out, type_map.source), out]
    return rule


for _float_op, _ctor in (("sigmoid", qnn_composite.sigmoid), ("tanh", qnn_composite.tanh),
                         ("exp", qnn_composite.exp), ("erf", qnn_composite.erf),
                         ("sqrt", qnn_composite.sqrt), ("rsqrt", qnn_composite.rsqrt),
                         ("log", qnn_composite.log), ("abs", qnn_composite.abs)):
    register(_float_op, _with_output(
        lambda expr, x, t, out, source, ctor=_ctor: ctor(x, t.scale, t.zero_point, out.scale,
                                                         out.zero_point)))
register("nn.leaky_relu", _with_output(
    lambda expr, x, t, out, source: qnn_composite.leaky_relu(
        x, expr.attrs.alpha, t.scale, t.zero_point, out.scale, out.zero_point)))
register("nn.softmax", _with_output(
    lambda expr, x, t, out, source: qnn_composite.softmax(
        x, t.scale, t.zero_point, out.scale, out.zero_point, axis=expr.attrs.axis)))


@register("nn.avg_pool2d")
@_with_output
def _avg_pool(expr, x, t, out, source):
    a = expr.attrs
    return qnn_composite.avg_pool2d(x, t.scale, t.zero_point, out.scale, out.zero_point,
                                    a.pool_size, a.strides, a.padding, a.dilation, a.ceil_mode,
                                    a.count_include_pad, a.layout, a.out_layout)


def _global_avg_pool(expr, x, t, out, source):
    """A mean over H and W: qnn.avg_pool2d with the whole image as its window."""
    layout = expr.attrs.layout
    if layout not in ("NCHW", "NHWC") or \
            expr.attrs.get("output_size") not in (None, (1, 1), (1,), 1):
        raise RewriteNotApplicable(f"{source.op.name} with layout {layout} and attributes "
                                   f"{dict(expr.attrs)}")
    shape = type_of(source.args[0]).shape
    window = (shape[layout.index("H")], shape[layout.index("W")])
    return qnn_composite.avg_pool2d(x, t.scale, t.zero_point, out.scale, out.zero_point,
                                    window, (1, 1), (0, 0), (1, 1), layout=layout)


register("nn.global_avg_pool2d", _with_output(_global_avg_pool))
register("nn.adaptive_avg_pool2d", _with_output(_global_avg_pool))
