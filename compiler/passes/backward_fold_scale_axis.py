"""BackwardFoldScaleAxis: move a per-channel scale of a conv2d/conv3d/dense output back into
its weight, as TVM's backward fold_scale_axis does.

    relu(conv2d(x, W) + b) * s  ->  relu(conv2d(x, W * s') + b * s)

where s is per-channel on the output's channel axis and s' is s laid along the kernel's output
channel axis (axis 0 of dense's [units, in] weight).

Algorithm: for every `multiply` whose one operand (the scale) is per-channel against the other,
walk backwards from the scaled value. Every node on the way must be used only by the node
after it (else the scale would reach its other users). The walk passes nn.relu (only for an
all-positive constant scale), nn.bias_add (its bias is scaled) and add/subtract: an operand
with the full shape carries the scale further back (both may, the dual-path case), an operand
that broadcasts along the channel is a bias and is multiplied by the scale. Every path must
end in a conv2d/conv3d (groups 1 or depthwise, output channel axis matching) or dense; the
multiply then disappears. The 1-D scale is built once per multiply and shared.
"""
from __future__ import annotations

from compiler.ir.expr import Call, Function, RelayExpr
from compiler.ir.traversal import post_order
from compiler.op.tensor import multiply
from compiler.op.type_relations import normalize_axis
from compiler.transform import function_pass, register_pass
from .scale_axis import (CONV_LAYOUTS, POSITIVE_HOMOGENEOUS, broadcasts_along, consumers,
                         conv_kernel_axis, expand_to_axis, is_all_positive_constant, op_name,
                         rewrite_body, scale_operand, scaled_weight, squeeze_scale, tensor_shape)

__all__ = ["BackwardFoldScaleAxis", "backward_fold_scale_axis"]


class _Fold:
    """One multiply whose scale moves back: its 1-D scale, the output rank and channel axis."""

    def __init__(self, mult: Call, value_index: int, axis: int):
        rank = len(tensor_shape(mult))
        scale = mult.args[1 - value_index]
        self.value_index, self.rank, self.axis = value_index, rank, axis
        self.scale_1d = squeeze_scale(scale, tensor_shape(scale), rank, axis)


def _plan(mult: Call, uses: dict) -> dict | None:
    """node -> ("anchor" | "bias", [bias argument indices]) for the nodes the scale crosses."""
    found = scale_operand(mult)
    if found is None:
        return None
    index, axis = found
    out = tensor_shape(mult)
    positive = is_all_positive_constant(mult.args[1 - index])
    roles: dict = {}
    stack = [(mult.args[index], mult)]
    while stack:
        node, user = stack.pop()
        if [u for u, _ in uses.get(node, ())] != [user] or node in roles:
            return None  # used elsewhere too: scaling it would change the other users
        name = op_name(node)
        if name in POSITIVE_HOMOGENEOUS and positive:
            roles[node] = ("through", [])
            stack.append((node.args[0], node))
        elif name == "nn.bias_add" and normalize_axis(name, node.attrs.axis, len(out)) == axis:
            roles[node] = ("through", [1])
            stack.append((node.args[0], node))
        elif name in ("add", "subtract"):
            biases, paths = [], []
            for i, arg in enumerate(node.args):
                shape = tensor_shape(arg)
                if shape == out:
                    paths.append((arg, node))
                elif shape is not None and broadcasts_along(shape, out, axis):
                    biases.append(i)
                else:
                    return None
            if not paths:
                return None
            roles[node] = ("through", biases)
            stack.extend(paths)
        elif (name in CONV_LAYOUTS and conv_kernel_axis(node, axis, "O") is not None) or \
                (name == "nn.dense" and axis == len(out) - 1):
            roles[node] = ("anchor", [])
        else:
            return None
    return roles


def backward_fold_scale_axis(func: Function) -> Function:
    """Fold per-channel output scales of conv2d/conv3d/dense into their weights (typed func)."""
    uses = consumers(func)
    folds: dict = {}  # multiply -> _Fold
    role: dict = {}  # node the scale crosses -> (kind, bias argument indices, _Fold)
    for node in reversed(post_order(func.body)):  # outermost multiplies first
        if op_name(node) != "multiply" or node in role:
            continue
        roles = _plan(node, uses)
        if roles is None or any(n in role or n in folds for n in roles):
            continue
        folds[node] = fold = _Fold(node, *scale_operand(node))
        for n, (kind, biases) in roles.items():
            role[n] = (kind, biases, fold)
    if not folds:
        return func

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if old in folds:
            return new.args[folds[old].value_index]
        kind, biases, fold = role.get(old, (None, None, None))
        if kind is None or not (biases or kind == "anchor"):
            return new
        args = list(new.args)
        if kind == "anchor":
            args[1] = scaled_weight(old, args[1], fold.scale_1d, fold.axis, "O")
        for i in biases:
            rank = 1 if op_name(old) == "nn.bias_add" else fold.rank
            args[i] = multiply(args[i], expand_to_axis(
                fold.scale_1d, rank, 0 if rank == 1 else fold.axis))
        return Call(new.op, args, new.attrs, new.type_args, new.span)

    return rewrite_body(func, rewrite)


@register_pass
def BackwardFoldScaleAxis():  # noqa: N802  (TVM's pass name)
    """Fold the per-channel scale of a conv/dense output into the weight (TVM's backward fold)."""

    @function_pass(opt_level=3, name="BackwardFoldScaleAxis", required=["InferType"])
    def backward_fold_scale_axis_pass(func: Function, mod, ctx) -> Function:
        return backward_fold_scale_axis(func)

    return backward_fold_scale_axis_pass
