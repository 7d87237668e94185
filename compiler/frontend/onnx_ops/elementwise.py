"""Elementwise ONNX ops: unary math, broadcasting binaries, comparisons, logic, activations."""
from __future__ import annotations

import math

import numpy as np

from codegen.tir.dtype import SMALL_FLOATS

from .common import NodeContext, cast, const, converter, onnx_dtype, op

_UNARY = {
    "Abs": "abs", "Neg": "negative", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Tanh": "tanh", "Sigmoid": "sigmoid", "Sin": "sin", "Cos": "cos", "Tan": "tan",
    "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
    "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Erf": "erf", "Floor": "floor",
    "Ceil": "ceil", "Round": "round", "Sign": "sign", "IsNaN": "isnan", "Not": "logical_not",
    "BitwiseNot": "bitwise_not", "Relu": "nn.relu",
}

_BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Equal": "equal",
    "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal",
    "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or",
    "Xor": "logical_xor", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}


def _unary(name: str):
    def convert(ctx: NodeContext, inputs):
        return op(name, inputs[0])
    return convert


def _legacy_broadcast(ctx: NodeContext, a, b):
    """Opset < 7 binaries broadcast b onto a starting at `axis` when broadcast=1."""
    if ctx.opset >= 7 or not ctx.attr("broadcast", 0) or ctx.attr("axis") is None:
        return b
    rank_a, shape_b = ctx.rank(a), ctx.shape(b)
    axis = ctx.attr("axis") % rank_a
    trailing = rank_a - axis - len(shape_b)
    return ctx.reshape(b, list(shape_b) + [1] * trailing) if trailing > 0 else b


def _binary(name: str):
    def convert(ctx: NodeContext, inputs):
        a, b = inputs
        return op(name, a, _legacy_broadcast(ctx, a, b))
    return convert


for _onnx, _relay in _UNARY.items():
    converter(_onnx)(_unary(_relay))
for _onnx, _relay in _BINARY.items():
    converter(_onnx)(_binary(_relay))


@converter("Identity")
def _identity(ctx, inputs):
    return inputs[0]


@converter("Reciprocal")
def _reciprocal(ctx, inputs):
    x = inputs[0]
    return op("divide", const(1, ctx.dtype(x)), x)


@converter("Mod")
def _mod(ctx, inputs):
    a, b = inputs
    fmod = ctx.attr("fmod", 0)
    return op("trunc_mod" if fmod else "floor_mod", a, b)


@converter("Pow")
def _pow(ctx, inputs):
    base, exponent = inputs
    bt, et = ctx.dtype(base), ctx.dtype(exponent)
    if bt == et:
        return op("power", base, exponent)
    if not bt.startswith("float"):  # integer base, float exponent: compute wide, then narrow
        return cast(op("power", cast(base, ctx, "float64"), cast(exponent, ctx, "float64")),
                    ctx, bt)
    return op("power", base, cast(exponent, ctx, bt))


@converter("BitShift")
def _bitshift(ctx, inputs):
    direction = ctx.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    return op("left_shift" if direction == "LEFT" else "right_shift", *inputs)


def _variadic(name: str, mean: bool = False):
    def convert(ctx: NodeContext, inputs):
        args = [i for i in inputs if i is not None]
        out = args[0]
        for arg in args[1:]:
            out = op(name, out, arg)
        if mean:
            out = op("divide", out, const(len(args), ctx.dtype(out)))
        return out
    return convert


converter("Sum")(_variadic("add"))
converter("Mean")(_variadic("add", mean=True))
converter("Max")(_variadic("maximum"))
converter("Min")(_variadic("minimum"))


@converter("IsInf")
def _isinf(ctx, inputs):
    x = inputs[0]
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    inf = op("isinf", x)
    if pos and neg:
        return inf
    if not pos and not neg:
        return op("logical_and", inf, const(False, "bool"))
    side = op("greater" if pos else "less", x, const(0, ctx.dtype(x)))
    return op("logical_and", inf, side)


def cast_to(ctx, x, dtype: str):
    """x cast to dtype; to a float8 type, by default (saturate=1) clipped to its largest finite
    value first (ONNX's saturate_cast), else past it to infinity or NaN."""
    if dtype in SMALL_FLOATS and SMALL_FLOATS[dtype].kind != "sat" and \
            int(ctx.attr("saturate", 1)) and ctx.dtype(x) != dtype:
        top = SMALL_FLOATS[dtype].max
        x = op("clip", x, a_min=-top, a_max=top)
    return op("cast", x, dtype=dtype)


@converter("Cast")
def _cast(ctx, inputs):
    return cast_to(ctx, inputs[0], onnx_dtype(ctx.attr("to"), ctx.where))


@converter("CastLike")
def _cast_like(ctx, inputs):
    return cast_to(ctx, inputs[0], ctx.dtype(inputs[1]))


@converter("Clip")
def _clip_v1(ctx, inputs):
    x = inputs[0]
    lo, hi = ctx.attr("min", -3.4028234663852886e38), ctx.attr("max", 3.4028234663852886e38)
    return op("minimum", op("maximum", x, const(lo, ctx.dtype(x))), const(hi, ctx.dtype(x)))


@converter("Clip", since=11)
def _clip_v11(ctx, inputs):
    x = inputs[0]
    lo = inputs[1] if len(inputs) > 1 else None
    hi = inputs[2] if len(inputs) > 2 else None
    out = x
    if lo is not None:
        out = op("maximum", out, lo)
    if hi is not None:
        out = op("minimum", out, hi)
    return out


@converter("Where")
def _where(ctx, inputs):
    return op("where", *inputs)


# --- activations ------------------------------------------------------------------------


def _c(ctx, x, value):
    return const(value, ctx.dtype(x))


@converter("LeakyRelu")
def _leaky_relu(ctx, inputs):
    return op("nn.leaky_relu", inputs[0], alpha=float(ctx.attr("alpha", 0.01)))


@converter("PRelu")
def _prelu(ctx, inputs):
    x, slope = inputs
    return op("where", op("less", x, _c(ctx, x, 0)), op("multiply", x, slope), x)


@converter("ThresholdedRelu")
def _thresholded_relu(ctx, inputs):
    x = inputs[0]
    alpha = ctx.attr("alpha", 1.0)
    return op("where", op("greater", x, _c(ctx, x, alpha)), x, _c(ctx, x, 0))


def _elu_expr(ctx, x, alpha):
    neg = op("multiply", _c(ctx, x, alpha), op("subtract", op("exp", x), _c(ctx, x, 1)))
    return op("where", op("greater", x, _c(ctx, x, 0)), x, neg)


@converter("Elu")
def _elu(ctx, inputs):
    return _elu_expr(ctx, inputs[0], ctx.attr("alpha", 1.0))


@converter("Selu")
def _selu(ctx, inputs):
    x = inputs[0]
    alpha = ctx.attr("alpha", 1.67326319217681884765625)
    gamma = ctx.attr("gamma", 1.05070102214813232421875)
    return op("multiply", _c(ctx, x, gamma), _elu_expr(ctx, x, alpha))


@converter("Celu")
def _celu(ctx, inputs):
    x = inputs[0]
    alpha = ctx.attr("alpha", 1.0)
    scaled = op("divide", x, _c(ctx, x, alpha))
    neg = op("multiply", _c(ctx, x, alpha), op("subtract", op("exp", scaled), _c(ctx, x, 1)))
    return op("add", op("maximum", x, _c(ctx, x, 0)), op("minimum", _c(ctx, x, 0), neg))


def _hard_sigmoid_expr(ctx, x, alpha, beta):
    lin = op("add", op("multiply", x, _c(ctx, x, alpha)), _c(ctx, x, beta))
    return op("minimum", op("maximum", lin, _c(ctx, x, 0)), _c(ctx, x, 1))


@converter("HardSigmoid")
def _hard_sigmoid(ctx, inputs):
    return _hard_sigmoid_expr(ctx, inputs[0], ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5))


@converter("HardSwish")
def _hard_swish(ctx, inputs):
    x = inputs[0]
    return op("multiply", x, _hard_sigmoid_expr(ctx, x, 1.0 / 6, 0.5))


def _softplus_expr(ctx, x):
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): exp(x) overflowed from x > 88
    (float32) or x > 11 (float16) and gave inf where the answer is about x. float16 is
    computed in float32 and rounded once, as onnxruntime does."""
    dtype = ctx.dtype(x)
    compute = "float32" if dtype == "float16" else dtype
    wide = op("cast", x, dtype=compute) if compute != dtype else x
    one, zero = const(1, compute), const(0, compute)
    out = op("add", op("maximum", wide, zero),
             op("log", op("add", one, op("exp", op("negative", op("abs", wide))))))
    return op("cast", out, dtype=dtype) if compute != dtype else out


@converter("Softplus")
def _softplus(ctx, inputs):
    return _softplus_expr(ctx, inputs[0])


@converter("Softsign")
def _softsign(ctx, inputs):
    x = inputs[0]
    return op("divide", x, op("add", op("abs", x), _c(ctx, x, 1)))


@converter("Mish")
def _mish(ctx, inputs):
    x = inputs[0]
    return op("multiply", x, op("tanh", _softplus_expr(ctx, x)))


@converter("Swish")
def _swish(ctx, inputs):
    x = inputs[0]
    alpha = ctx.attr("alpha", 1.0)
    return op("multiply", x, op("sigmoid", op("multiply", x, _c(ctx, x, alpha))))


@converter("Shrink")
def _shrink(ctx, inputs):
    x = inputs[0]
    lambd, bias = ctx.attr("lambd", 0.5), ctx.attr("bias", 0.0)
    low = op("less", x, _c(ctx, x, -lambd))
    high = op("greater", x, _c(ctx, x, lambd))
    return op("where", low, op("add", x, _c(ctx, x, bias)),
              op("where", high, op("subtract", x, _c(ctx, x, bias)), _c(ctx, x, 0)))


@converter("Gelu", since=20)
def _gelu(ctx, inputs):
    x = inputs[0]
    half_x = op("multiply", x, _c(ctx, x, 0.5))
    if ctx.attr("approximate", "none") == "tanh":
        cube = op("multiply", op("multiply", x, x), x)
        inner = op("add", x, op("multiply", cube, _c(ctx, x, 0.044715)))
        t = op("tanh", op("multiply", inner, _c(ctx, x, math.sqrt(2 / math.pi))))
        return op("multiply", half_x, op("add", t, _c(ctx, x, 1)))
    erf = op("erf", op("multiply", x, _c(ctx, x, 1 / math.sqrt(2))))
    return op("multiply", half_x, op("add", erf, _c(ctx, x, 1)))


@converter("Dropout")
def _dropout(ctx, inputs):
    x = inputs[0]
    has_training = len(inputs) > 2 and inputs[2] is not None and ctx.opset >= 12
    training = ctx.maybe_value(inputs[2]) if has_training else False
    if training is None or bool(training):
        ratio = ctx.maybe_value(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else 0.5
        if ratio is None or float(ratio) != 0.0:
            raise ctx.error("training_mode dropout is random (or training_mode is not a "
                            "constant); only inference dropout is supported")
    outs = [x]
    if ctx.output_used(1):
        outs.append(const(np.ones(ctx.shape(x), dtype=bool), "bool"))
    return outs

