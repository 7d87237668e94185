"""QNN ops defined by a decomposition into other ops (their canonical form): add, subtract,
mul, concatenate, the unary activations, leaky_relu, softmax and avg_pool2d.

Each op is registered with its type relation and its canonical form (the op attribute
FTVMQnnCanonicalize, what relay.qnn.transform.CanonicalizeOps applies); the form is its
definition: the numpy reference evaluates it with the debug interpreter, and the lowering
expands it in place when no strategy implementation claims the op. Semantics (relayjit's;
each names where it departs from TVM's canonicalisation):

- add / subtract / mul: quantize(dequantize(lhs) op dequantize(rhs)) in float32, one rounding
  (onnxruntime's QLinearAdd/QLinearMul; the fake-quantized graph, so FakeQuantizationToInteger
  is exact). TVM requantizes each operand to the output scale first (two roundings).
- concatenate: each input as quantize(dequantize(x)) into the output's scale and zero point
  (onnxruntime's QLinearConcat), skipped where the parameters are the output's.
- sigmoid, tanh, exp, erf, sqrt, rsqrt, log, abs, hardswish, leaky_relu, softmax:
  quantize(f(dequantize(x))) in float32 (TVM approximates some in integers).
- avg_pool2d: the exact int32 window sum of (x - input_zero_point), times
  input_scale / (output_scale * taps) in float32, rounded half to even, plus the output zero
  point (onnxruntime's QLinearGlobalAveragePool). TVM requantizes, then averages in int32.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Function, Tuple, const, var
from compiler.ir.types import TensorType, TupleType
from . import qnn, qnn_contract
from .interpreter import evaluate
from .qnn_math import dtype_range
from .nn import pad_tuple2d, pair
from .qnn_types import check_param, quant_axis, quantized_data
from .registry import CANONICALIZE, OpDef, OpPattern, get_def, make_call, register
from .type_relations import broadcast_shape, check_arity, fail, tuple_arg
from .window import pool_counts

__all__ = ["add", "subtract", "mul", "concatenate", "sigmoid", "tanh", "exp", "erf", "sqrt",
           "rsqrt", "log", "abs", "hardswish", "leaky_relu", "softmax", "avg_pool2d"]


def _reference_through(name: str):
    """The numpy reference of a decomposed op: its canonical form, evaluated."""
    def reference(inputs, attrs):
        params, types = [], []
        for i, x in enumerate(inputs):
            if isinstance(x, tuple):
                ty = TupleType([TensorType(f.shape, str(f.dtype)) for f in x])
            else:
                ty = TensorType(np.shape(x), str(np.asarray(x).dtype))
            params.append(var(f"a{i}", ty))
            types.append(ty)
        body = get_def(name).get_attr(CANONICALIZE)(attrs, params, types)
        return evaluate(Function(params, body), list(inputs))
    return reference


def _register(name: str, num_inputs: int, rel, canonical, pattern: OpPattern,
              attrs: dict | None = None, type_key: str = "Attrs") -> None:
    opdef = register(OpDef(name=name, num_inputs=num_inputs, type_rel=rel, pattern=pattern,
                           reference=_reference_through(name), attrs=attrs or {},
                           attrs_type_key=type_key, support_level=11))
    opdef.set_attr(CANONICALIZE, canonical)


def _float(x, scale, zero_point, axis: int = -1):
    return qnn.dequantize(x, scale, zero_point, axis=axis)


def _requantized(value, scale, zero_point, dtype: str, axis: int = -1):
    return qnn.quantize(value, scale, zero_point, axis=axis, out_dtype=dtype)


# --- binary: add, subtract, mul ------------------------------------------------------------


def _binary_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 8)
        lhs, rhs = quantized_data(op, types, 0, "lhs"), quantized_data(op, types, 1, "rhs")
        if lhs.dtype != rhs.dtype:
            raise fail(op, f"lhs and rhs must have the same dtype, got {lhs.dtype} and "
                           f"{rhs.dtype}")
        for first, data, axis_name, side in ((2, lhs, "lhs_axis", "lhs"),
                                             (4, rhs, "rhs_axis", "rhs")):
            axis = quant_axis(op, attrs, data.ndim, axis_name)
            check_param(op, types, first, f"{side}_scale", "float32", data, axis)
            check_param(op, types, first + 1, f"{side}_zero_point", "int32", data, axis)
        shape = broadcast_shape(op, lhs.shape, rhs.shape)
        out = TensorType(shape, lhs.dtype)
        check_param(op, types, 6, "output_scale", "float32", out, 0, per_axis=False)
        check_param(op, types, 7, "output_zero_point", "int32", out, 0, per_axis=False)
        return out
    return rel


def _binary_canonical(float_op: str):
    def canonical(attrs, args, types):
        lhs, rhs, ls, lz, rs, rz, os, oz = args
        value = make_call(float_op, [_float(lhs, ls, lz, attrs.lhs_axis),
                                     _float(rhs, rs, rz, attrs.rhs_axis)])
        return _requantized(value, os, oz, types[0].dtype)
    return canonical


for _name, _float_op in (("qnn.add", "add"), ("qnn.subtract", "subtract"),
                         ("qnn.mul", "multiply")):
    _register(_name, 8, _binary_rel(_name), _binary_canonical(_float_op), OpPattern.BROADCAST,
              {"lhs_axis": -1, "rhs_axis": -1}, "relay.attrs.QnnBinaryOpAttrs")


def _binary_ctor(name: str):
    def ctor(lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale,
             output_zero_point, lhs_axis=-1, rhs_axis=-1):
        return make_call(name, [lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale,
                                rhs_zero_point, output_scale, output_zero_point],
                         lhs_axis=int(lhs_axis), rhs_axis=int(rhs_axis))
    ctor.__name__ = name.split(".")[1]
    ctor.__doc__ = f"relay.qnn.op.{ctor.__name__}: quantized {name.split('.')[1]} (broadcasting)."
    return ctor


add, subtract, mul = (_binary_ctor(n) for n in ("qnn.add", "qnn.subtract", "qnn.mul"))


# --- concatenate ----------------------------------------------------------------------------


def _concat_rel(types, attrs):
    op = "qnn.concatenate"
    check_arity(op, types, 5)
    fields = tuple_arg(op, types, 0)
    scales, zero_points = tuple_arg(op, types, 1, "input_scales"), \
        tuple_arg(op, types, 2, "input_zero_points")
    if not len(fields) == len(scales) == len(zero_points):
        raise fail(op, f"{len(fields)} inputs need as many scales and zero points, got "
                       f"{len(scales)} and {len(zero_points)}")
    for i, field in enumerate(fields):
        quantized_data(op, [field], 0, f"data[{i}]")
        check_param(op, list(scales), i, f"input_scales[{i}]", "float32", field, 0, False)
        check_param(op, list(zero_points), i, f"input_zero_points[{i}]", "int32", field, 0,
                    False)
    out = get_def("concatenate").type_rel([TupleType([TensorType(f.shape, fields[0].dtype)
                                                      for f in fields])], attrs)
    check_param(op, types, 3, "output_scale", "float32", out, 0, per_axis=False)
    check_param(op, types, 4, "output_zero_point", "int32", out, 0, per_axis=False)
    return out


def _fields(expr, count: int) -> list:
    return list(expr.fields) if isinstance(expr, Tuple) else \
        [expr[i] for i in range(count)]


def _concat_canonical(attrs, args, types):
    data, scales, zero_points, os, oz = args
    count = len(types[0].fields)
    dtype = types[0].fields[0].dtype
    parts = []
    for x, ty, s, z in zip(_fields(data, count), types[0].fields, _fields(scales, count),
                           _fields(zero_points, count)):
        same = s is os and z is oz and ty.dtype == dtype
        parts.append(x if same else _requantized(_float(x, s, z), os, oz, dtype))
    return make_call("concatenate", [Tuple(parts)], axis=attrs.axis)


_register("qnn.concatenate", 5, _concat_rel, _concat_canonical, OpPattern.INJECTIVE,
          {"axis": 0}, "relay.attrs.ConcatenateAttrs")


def concatenate(data, input_scales, input_zero_points, output_scale, output_zero_point, axis):
    """relay.qnn.op.concatenate: every input brought to the output's scale and zero point."""
    if isinstance(data, (list, tuple)):
        data = Tuple(list(data))
    elif hasattr(data, "tuple_value"):  # TupleWrapper
        data = data.tuple_value
    return make_call("qnn.concatenate", [data, Tuple(list(input_scales)),
                                         Tuple(list(input_zero_points)), output_scale,
                                         output_zero_point], axis=int(axis))


# --- unary: f on the dequantized values, quantized again ------------------------------------


def _unary_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 5)
        data = quantized_data(op, types, 0, "x")
        for i, name in enumerate(("scale", "zero_point", "output_scale", "output_zero_point")):
            check_param(op, types, 1 + i, name, "int32" if "zero" in name else "float32",
                        data, 0, per_axis=False)
        return data
    return rel


def _hardswish(x):
    """x * relu6(x + 3) / 6, as ONNX's HardSwish."""
    gate = make_call("clip", [make_call("add", [x, const(3.0)])], a_min=0.0, a_max=6.0)
    return make_call("multiply", [x, make_call("divide", [gate, const(6.0)])])


_UNARY = {"sigmoid": None, "tanh": None, "exp": None, "erf": None, "sqrt": None,
          "rsqrt": None, "log": None, "abs": None, "hardswish": _hardswish,
          "leaky_relu": "nn.leaky_relu", "softmax": "nn.softmax"}


def _unary_canonical(name: str):
    def canonical(attrs, args, types):
        x, s, z, os, oz = args
        value = _float(x, s, z)
        builder = _UNARY[name]
        if callable(builder):
            value = builder(value)
        else:
            value = make_call(builder or name, [value], **dict(attrs or {}))
        return _requantized(value, os, oz, types[0].dtype)
    return canonical


for _name in _UNARY:
    _attrs = {"alpha": 0.01} if _name == "leaky_relu" else \
        {"axis": -1} if _name == "softmax" else {}
    _register(f"qnn.{_name}", 5, _unary_rel(f"qnn.{_name}"), _unary_canonical(_name),
              OpPattern.OUT_ELEMWISE_FUSABLE if _name == "softmax" else OpPattern.ELEMWISE,
              _attrs, {"leaky_relu": "relay.attrs.LeakyReluAttrs",
                       "softmax": "relay.attrs.SoftmaxAttrs"}.get(_name, "Attrs"))


def _unary_ctor(name: str):
    def ctor(x, scale, zero_point, output_scale, output_zero_point):
        return make_call(f"qnn.{name}", [x, scale, zero_point, output_scale, output_zero_point])
    ctor.__name__ = name
    ctor.__doc__ = f"relay.qnn.op.{name}: quantize({name}(dequantize(x)))."
    return ctor


sigmoid, tanh, exp, erf, sqrt, rsqrt, log, abs, hardswish = (  # noqa: A001 (TVM's names)
    _unary_ctor(n) for n in ("sigmoid", "tanh", "exp", "erf", "sqrt", "rsqrt", "log", "abs",
                             "hardswish"))


def leaky_relu(x, alpha, input_scale, input_zero_point, output_scale, output_zero_point):
    """relay.qnn.op.leaky_relu: quantize(leaky_relu(dequantize(x), alpha))."""
    return make_call("qnn.leaky_relu", [x, input_scale, input_zero_point, output_scale,
                                        output_zero_point], alpha=float(alpha))


def softmax(x, scale, zero_point, output_scale, output_zero_point, axis=-1):
    """relay.qnn.op.softmax: quantize(softmax(dequantize(x), axis)) (float32)."""
    return make_call("qnn.softmax", [x, scale, zero_point, output_scale, output_zero_point],
                     axis=int(axis))


# --- avg_pool2d -----------------------------------------------------------------------------


def _pool_rel(types, attrs):
    op = "qnn.avg_pool2d"
    check_arity(op, types, 5)
    data = quantized_data(op, types, 0)
    for i, name in enumerate(("input_scale", "input_zero_point", "output_scale",
                              "output_zero_point")):
        check_param(op, types, 1 + i, name, "int32" if "zero" in name else "float32", data,
                    0, per_axis=False)
    return get_def("nn.avg_pool2d").type_rel([data], attrs)


def _pool_canonical(attrs, args, types):
    """A depthwise int32 convolution with a ones kernel sums each window (padding adds 0 in
    the centered domain; ceil-mode windows get extra end padding), then one float32 scaling
    by the window's tap count."""
    x, s, z, os, oz = args
    data, out = types[0], get_def("qnn.avg_pool2d").type_rel(types, attrs)
    layout = attrs.layout
    hi, wi, ci = layout.index("H"), layout.index("W"), layout.index("C")
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding
    h, w, c = data.shape[hi], data.shape[wi], data.shape[ci]
    oh, ow = out.shape[hi], out.shape[wi]
    eb = max(pb, (oh - 1) * sh + dh * (kh - 1) + 1 - h - pt)
    er = max(pr, (ow - 1) * sw + dw * (kw - 1) + 1 - w - pl)
    ones = const(np.ones((c, 1, kh, kw), "int8"))
    zero, one = const(0, "int32"), const(1.0, "float32")
    sums = qnn_contract.conv2d(x, ones, z, zero, one, one, (kh, kw), c, (sh, sw),
                               (pt, pl, eb, er), (dh, dw), c, data_layout=layout,
                               kernel_layout="OIHW")
    include = attrs.count_include_pad
    taps = np.outer(pool_counts(h, kh, sh, dh, pt, pb, oh, include),
                    pool_counts(w, kw, sw, dw, pl, pr, ow, include)).astype("float32")
    taps = np.maximum(taps, 1.0).reshape((oh, ow) + (1,) * (len(layout) - 1 - wi))
    scale = make_call("divide", [s, make_call("multiply", [os, const(taps)])])
    value = make_call("round", [make_call("multiply", [make_call("cast", [sums],
                                                                 dtype="float32"), scale])])
    lo, hi_ = dtype_range(data.dtype)
    value = make_call("add", [value, make_call("cast", [oz], dtype="float32")])
    return make_call("cast", [make_call("clip", [value], a_min=float(lo), a_max=float(hi_))],
                     dtype=data.dtype)


_register("qnn.avg_pool2d", 5, _pool_rel, _pool_canonical, OpPattern.OUT_ELEMWISE_FUSABLE,
          dict(get_def("nn.avg_pool2d").attrs), "relay.attrs.AvgPool2DAttrs")


def avg_pool2d(data, input_scale, input_zero_point, output_scale, output_zero_point, pool_size,
               strides, padding, dilation, ceil_mode=False, count_include_pad=True,
               layout="NCHW", out_layout=""):
    """relay.qnn.op.avg_pool2d (NCHW or NHWC)."""
    return make_call("qnn.avg_pool2d", [data, input_scale, input_zero_point, output_scale,
                                        output_zero_point], pool_size=pair(pool_size),
                     strides=pair(strides), padding=pad_tuple2d(padding),
                     dilation=pair(dilation), ceil_mode=bool(ceil_mode),
                     count_include_pad=bool(count_include_pad), layout=layout,
                     out_layout=out_layout)

