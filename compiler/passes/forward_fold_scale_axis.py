"""ForwardFoldScaleAxis: move a per-channel scale of a conv2d/dense input into its weight, as
TVM's forward fold_scale_axis does.

    conv2d(relu(x * s) + b, W)  ->  conv2d(relu(x) + b / s, W * s')

where s is per-channel on the data's channel axis and s' is s laid along the kernel's input
channel axis (the output channel axis for a depthwise conv; the last axis for dense).

Algorithm: for every `multiply` whose one operand (the scale) is per-channel against the other
(which has the output shape), follow the scaled value forward through its consumers. The path
may pass nn.relu (only when the scale is an all-positive constant) and add/subtract of a
per-channel bias (the bias is divided by the scale); it must end in the data input of
conv2d/conv3d (groups 1 or depthwise, channel axis matching) or dense (scale on the last
axis). Any
other consumer, or the value escaping as the function's result, cancels the fold for that
multiply, so the program is unchanged. The rewrite is one bottom-up pass
(rewrite_post_order); the 1-D scale is built once per multiply and shared by every bias and
weight it scales, as TVM's result shares it.
"""
from __future__ import annotations

from dataclasses import dataclass

from compiler.ir.expr import Call, Function, RelayExpr
from compiler.ir.traversal import post_order
from compiler.op.tensor import divide
from compiler.transform import function_pass, register_pass
from .scale_axis import (CONV_LAYOUTS, POSITIVE_HOMOGENEOUS, broadcasts_along, consumers,
                         conv_kernel_axis, expand_to_axis, is_all_positive_constant, op_name,
                         rewrite_body, scale_operand, scaled_weight, squeeze_scale, tensor_shape)

__all__ = ["ForwardFoldScaleAxis", "forward_fold_scale_axis"]


@dataclass(eq=False)
class _Fold:
    """One multiply whose scale moves forward: its 1-D scale and the data channel axis."""

    value_index: int  # which argument of the multiply is the data (the other is the scale)
    scale_1d: RelayExpr
    rank: int
    axis: int


def _plan(mult: Call, uses: dict) -> tuple | None:
    """The nodes the scale passes through and the anchors it lands in, or None."""
    found = scale_operand(mult)
    if found is None:
        return None
    index, axis = found
    out = tensor_shape(mult)
    positive = is_all_positive_constant(mult.args[1 - index])
    through, anchors = [], []
    stack, seen = [mult], {mult}
    while stack:
        node = stack.pop()
        for user, i in uses.get(node, ()):
            name = op_name(user)
            if user is not None and user in seen:
                return None  # the scaled value reaches one op twice (add(v, v))
            if name in POSITIVE_HOMOGENEOUS and positive:
                through.append(user)
            elif name in ("add", "subtract") and (i == 0 or name == "add"):
                bias = tensor_shape(user.args[1 - i])
                if bias is None or tensor_shape(user) != out \
                        or not broadcasts_along(bias, out, axis):
                    return None
                through.append(user)
            elif name in CONV_LAYOUTS and i == 0 and \
                    conv_kernel_axis(user, axis, "I") is not None:
                anchors.append(user)
                continue
            elif name == "nn.dense" and i == 0 and axis == len(out) - 1:
                anchors.append(user)
                continue
            else:
                return None
            seen.add(user)
            stack.append(user)
    if not anchors:
        return None
    fold = _Fold(index, squeeze_scale(mult.args[1 - index], tensor_shape(mult.args[1 - index]),
                                      len(out), axis), len(out), axis)
    return fold, through, anchors


def forward_fold_scale_axis(func: Function) -> Function:
    """Fold per-channel input scales of conv2d/conv3d/dense into their weights (typed func)."""
    uses = consumers(func)
    folds: dict = {}  # multiply -> _Fold
    role: dict = {}  # node on a fold's path -> (kind, _Fold)
    for node in post_order(func.body):
        if op_name(node) != "multiply":
            continue
        plan = _plan(node, uses)
        if plan is None or node in role:
            continue
        fold, through, anchors = plan
        if any(n in role or n in folds for n in through + anchors):
            continue  # overlapping folds: keep the first
        folds[node] = fold
        for n in through:
            role[n] = ("through", fold)
        for n in anchors:
            role[n] = ("anchor", fold)
    if not folds:
        return func

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if old in folds:
            return new.args[folds[old].value_index]
        kind, fold = role.get(old, (None, None))
        if kind is None or op_name(old) in POSITIVE_HOMOGENEOUS:
            return new
        if kind == "through":  # add/subtract: the bias is divided by the scale
            i = 0 if old.args[0] in role or old.args[0] in folds else 1
            args = list(new.args)
            args[1 - i] = divide(args[1 - i], expand_to_axis(fold.scale_1d, fold.rank,
                                                              fold.axis))
            return Call(new.op, args, new.attrs, new.type_args, new.span)
        weight = scaled_weight(old, new.args[1], fold.scale_1d, fold.axis, "I")
        return Call(new.op, [new.args[0], weight], new.attrs, new.type_args, new.span)

    return rewrite_body(func, rewrite)


@register_pass
def ForwardFoldScaleAxis():  # noqa: N802  (TVM's pass name)
    """Fold the per-channel scale of a conv2d/dense input into the weight (TVM's forward fold)."""

    @function_pass(opt_level=3, name="ForwardFoldScaleAxis", required=["InferType"])
    def forward_fold_scale_axis_pass(func: Function, mod, ctx) -> Function:
        return forward_fold_scale_axis(func)

    return forward_fold_scale_axis_pass
