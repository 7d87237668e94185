"""relay.quantize's annotation: where quantize/dequantize pairs go in a float program, and
putting them there once calibration has chosen the scales.

The anchors are nn.conv2d, nn.dense and nn.batch_matmul (skip_conv_layers, skip_dense_layer
and debug_enabled_ops of the qconfig leave some float, as TVM does). Around each one:
- its data input (and a non-constant second operand) is an activation point: a
  quantize/dequantize pair with the calibrated scale goes right after it;
- a constant weight becomes int8 and is dequantized;
- the ops that follow it alone (bias_add or add of a constant bias, relu, clip) are its
  epilogue; a constant bias becomes int32 at the anchor's scale (input scale times weight
  scale) and is dequantized, and the epilogue's end is an activation point too.
FakeQuantizationToInteger then turns every region between the pairs into integer ops.
Quantization is symmetric int8 (zero point 0), per tensor, as TVM's relay.quantize.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.ir.expr import Call, Constant, Function, Op, RelayExpr, const
from compiler.ir.traversal import children, post_order, rewrite_post_order
from compiler.op import qnn, qnn_math

ANCHORS = ("nn.conv2d", "nn.dense", "nn.batch_matmul")
_EPILOGUE = ("nn.bias_add", "add", "nn.relu", "clip")
QMAX = 127  # symmetric int8: [-127, 127]


@dataclass
class Plan:
    """Where the pairs go: activations (nodes whose values calibration measures, in order),
    weights (constant -> anchor) and biases (constant -> anchor)."""

    activations: list = field(default_factory=list)
    weights: dict = field(default_factory=dict)
    biases: dict = field(default_factory=dict)


def _op_name(node) -> str | None:
    return node.op.name if type(node) is Call and type(node.op) is Op else None


def plan(func: Function, skip_conv_layers=(0,), skip_dense_layer: bool = True,
         enabled_ops=None) -> Plan:
    """The quantization points of a typed function."""
    order = post_order(func.body)
    users: dict = {}
    for node in order:
        for child in children(node):
            users.setdefault(child, []).append(node)
    users.setdefault(func.body, []).append(None)  # the result is read by the caller
    out, convs = Plan(), 0
    marked: set = set()

    def activation(node) -> None:
        if node not in marked:
            marked.add(node)
            out.activations.append(node)
    for node in order:
        name = _op_name(node)
        if name not in ANCHORS:
            continue
        index = convs
        convs += name == "nn.conv2d"
        if (name == "nn.conv2d" and index in (skip_conv_layers or ())) or \
                (name == "nn.dense" and skip_dense_layer) or \
                (enabled_ops is not None and name not in enabled_ops):
            continue
        data, weight = node.args
        activation(data)
        if type(weight) is Constant:
            out.weights[weight] = node
        else:
            activation(weight)
        end = node
        while len(users.get(end, ())) == 1 and _op_name(users[end][0]) in _EPILOGUE:
            user = users[end][0]
            if _op_name(user) in ("nn.bias_add", "add"):
                bias = user.args[1] if user.args[0] is end else user.args[0]
                if type(bias) is not Constant or not _per_channel_bias(bias, user, node):
                    break
                out.biases[bias] = node
            end = user
        activation(end)
    return out


def _per_channel_bias(bias: Constant, user: Call, anchor: Call) -> bool:
    """A constant added along the anchor's output channels only (bias_add's vector, or
    add's [C, 1, 1] from a folded batch norm), which becomes int32 at the anchor's scale."""
    shape = bias.data.numpy().shape
    if _op_name(user) == "nn.bias_add" or len(shape) <= 1:
        return len(shape) <= 1
    out = anchor.checked_type.shape
    channel = len(out) - 1 if _op_name(anchor) != "nn.conv2d" else \
        (anchor.attrs.out_layout or anchor.attrs.data_layout).index("C")
    aligned = (1,) * (len(out) - len(shape)) + tuple(shape)
    return all(d == 1 for i, d in enumerate(aligned) if i != channel)


def weight_constant(weight: np.ndarray, scale: float) -> RelayExpr:
    """dequantize(int8 weight): the weight as relay.quantize stores it."""
    q = np.clip(np.rint(weight.astype(np.float32) / np.float32(scale)), -QMAX, QMAX)
    return qnn.dequantize(const(q.astype(np.int8)), const(np.float32(scale)),
                          const(np.int32(0)))


def insert_pairs(func: Function, points: Plan, activation_scale: dict, weight_scale: dict
                 ) -> Function:
    """func with the quantize/dequantize pairs of `points` at the given scales (float32)."""
    def scale_of(anchor) -> np.float32:
        data = anchor.args[0]
        w = anchor.args[1]
        ws = weight_scale[w] if w in weight_scale else activation_scale[w]
        return np.float32(activation_scale[data]) * np.float32(ws)

    bias_scale = {b: scale_of(a) for b, a in points.biases.items()}

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if old in weight_scale and type(old) is Constant:
            new = weight_constant(old.data.numpy(), weight_scale[old])
        elif old in bias_scale:
            q = qnn_math.quantize(old.data.numpy().astype(np.float32), bias_scale[old],
                                  np.int32(0), -1, "int32")
            new = qnn.dequantize(const(q), const(bias_scale[old]), const(np.int32(0)))
        if old in activation_scale:
            s, zero = const(np.float32(activation_scale[old])), const(np.int32(0))
            new = qnn.dequantize(qnn.quantize(new, s, zero, out_dtype="int8"), s, zero)
        return new
    body = rewrite_post_order(func.body, rewrite)  # parameters stay; their uses change
    return Function(func.params, body, None, func.type_params, func.attrs)
