"""FuseLayerNorm: a layer norm over the last axis written out in elementwise ops and means (as
SimplifyInference leaves nn.layer_norm, as the ONNX frontend lowers LayerNormalization, and as
exporters below opset 17 write it) becomes one nn.layer_norm again, which lowers to a row
kernel (codegen.schedules.layer_norm) instead of four fused functions.

    c = x - mean(x, axis=-1, keepdims)
    v = mean(c * c | c ** 2, axis=-1, keepdims)  |  variance(x, mean(...), axis=-1, keepdims)
    n = c * rsqrt(v + eps)  |  c / sqrt(v + eps)
    n [* gamma] [+ beta]    (gamma, beta: [C] or [1, ..., 1, C])
      ->  nn.layer_norm(x, gamma, beta, axis=-1, epsilon=eps)

The scale and the shift join when n (then the scaled value) has no other reader; otherwise
the layer norm keeps center/scale off and the affine ops stay as they are. float32 only.

Algorithm: count each node's readers (one post-order walk), then one bottom-up rewrite
(rewrite_post_order with its memo): n becomes nn.layer_norm(center=False, scale=False), and a
multiply or add reading such a call alone folds its operand in.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import Any as AnyDim
from compiler.ir.expr import Call, Constant, Function, Op, RelayExpr, const
from compiler.ir.traversal import children, post_order, rewrite_post_order
from compiler.ir.types import TensorType
from compiler.op.nn_norm import layer_norm
from compiler.op.transform import reshape
from compiler.transform import function_pass, register_pass

__all__ = ["FuseLayerNorm", "fuse_layer_norm"]

F32 = "float32"
LAYER_NORM = "nn.layer_norm"


def _name(node: RelayExpr) -> str | None:
    return node.op.name if type(node) is Call and isinstance(node.op, Op) else None


def _scalar(node: RelayExpr) -> float | None:
    if type(node) is Constant and node.data.numpy().size == 1:
        return float(node.data.numpy().reshape(()))
    return None


def _row_reduction_of(node: RelayExpr, op: str) -> RelayExpr | None:
    """x when node is op(x, ...) over x's last axis with keepdims."""
    if _name(node) != op or not node.attrs.keepdims or node.attrs.exclude:
        return None
    x = node.args[0]
    ndim = len(x.checked_type.shape)
    axes = node.attrs.axis
    if axes is None or len(axes) != 1 or int(axes[0]) % ndim != ndim - 1:
        return None
    return x


def _row_mean_of(node: RelayExpr) -> RelayExpr | None:
    """x when node is mean(x) over x's last axis with keepdims."""
    return _row_reduction_of(node, "mean")


def _is_row_variance(node: RelayExpr, x: RelayExpr, mean: RelayExpr) -> bool:
    """Whether node is the biased variance(x, mean) over x's last axis with keepdims
    (SimplifyInference's form of nn.layer_norm)."""
    return _row_reduction_of(node, "variance") is x and node.args[1] is mean \
        and not node.attrs.unbiased


def _plus_eps(node: RelayExpr) -> tuple[RelayExpr, float] | None:
    """(v, eps) when node is v + eps with eps a scalar constant."""
    if _name(node) != "add":
        return None
    for i in (0, 1):
        eps = _scalar(node.args[1 - i])
        if eps is not None:
            return node.args[i], eps
    return None


def _normalised(node: RelayExpr) -> tuple[RelayExpr, float] | None:
    """(x, eps) when node is the decomposed normalisation of x over its last axis."""
    name = _name(node)
    if name == "multiply":
        pairs = [(node.args[0], node.args[1]), (node.args[1], node.args[0])]
        pairs = [(c, r.args[0]) for c, r in pairs if _name(r) == "rsqrt"]
    elif name == "divide" and _name(node.args[1]) == "sqrt":
        pairs = [(node.args[0], node.args[1].args[0])]
    else:
        return None
    for c, denominator in pairs:
        found = _plus_eps(denominator)
        if found is None or _name(c) != "subtract":
            continue
        v, eps = found
        x = c.args[0]
        if _row_mean_of(c.args[1]) is not x:
            continue
        if _is_row_variance(v, x, c.args[1]):
            return x, eps
        square = _row_mean_of(v)
        if square is None:
            continue
        if _name(square) == "multiply" and square.args[0] is c and square.args[1] is c or \
                _name(square) == "power" and square.args[0] is c and \
                _scalar(square.args[1]) == 2.0:
            return x, eps
    return None


def _channel_vector(node: RelayExpr, channels: int) -> bool:
    ty = node.checked_type
    return isinstance(ty, TensorType) and ty.dtype == F32 and len(ty.shape) >= 1 \
        and ty.shape[-1] == channels and all(d == 1 for d in ty.shape[:-1])


def fuse_layer_norm(expr: RelayExpr) -> RelayExpr:
    """Rebuild nn.layer_norm from its decomposed form (module docstring)."""
    readers: dict = {}
    for node in post_order(expr):
        for child in children(node):
            readers[child] = readers.get(child, 0) + 1
    memo: dict = {}

    def affine(old: Call, new: Call) -> RelayExpr:
        """Fold gamma (multiply) or beta (add) into a layer norm that only this op reads."""
        scale = _name(old) == "multiply"
        channels = old.checked_type.shape[-1]
        for i in (0, 1):
            norm, operand = new.args[i], new.args[1 - i]
            if _name(norm) != LAYER_NORM or readers.get(old.args[i], 0) != 1 \
                    or old.checked_type != old.args[i].checked_type \
                    or not _channel_vector(old.args[1 - i], channels):
                continue
            # a scale after the shift would scale the shift too: (n + b) * g
            if (norm.attrs.scale or norm.attrs.center) if scale else norm.attrs.center:
                continue
            vec = operand if len(old.args[1 - i].checked_type.shape) == 1 else \
                reshape(operand, (channels,))
            gamma, beta = (vec, norm.args[2]) if scale else (norm.args[1], vec)
            return layer_norm(norm.args[0], gamma, beta, axis=-1, epsilon=norm.attrs.epsilon,
                              center=norm.attrs.center or not scale,
                              scale=norm.attrs.scale or scale)
        return new

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        ty = old.checked_type if type(old) is Call else None
        if not isinstance(ty, TensorType) or ty.dtype != F32 or not ty.shape or \
                isinstance(ty.shape[-1], AnyDim) or any(d == 0 for d in ty.shape):
            return new  # the normalised axis must be static: its gamma and beta are constants
        found = _normalised(old)
        if found is not None and found[0].checked_type == ty:
            x, eps = found
            channels = ty.shape[-1]
            ones, zeros = const(np.ones(channels, F32)), const(np.zeros(channels, F32))
            return layer_norm(memo.get(x, x), ones, zeros, axis=-1, epsilon=eps, center=False,
                              scale=False)
        if _name(old) in ("multiply", "add"):
            return affine(old, new)
        return new

    return rewrite_post_order(expr, rewrite, memo)


@register_pass
def FuseLayerNorm():  # noqa: N802  (a pass factory, CapWords as TVM's)
    """Rebuild nn.layer_norm from its decomposed form (relay.build, opt_level 2, before FuseOps)."""

    @function_pass(opt_level=2, name="FuseLayerNorm", required=["InferType"])
    def fuse_layer_norm_pass(func: Function, mod, ctx) -> Function:
        return fuse_layer_norm(func)

    return fuse_layer_norm_pass
