"""FuseConvMaxPool: a packed conv2d whose large output only a max pool reads becomes one
nn.contrib_conv2d_max_pool, which pools the conv's output strip by strip while it is in L2.

    max_pool2d(f_n(...f_1(contrib_conv2d_packed(x, Wp))))
      ->  f_n(...f_1(contrib_conv2d_max_pool(x, Wp)))

where each f_i is an op the max commutes with over the pool's window, as the op registry says
(attribute nn_conv_pool.MAX_COMMUTES): "monotone" (one input, elementwise, non-decreasing:
relu), or "shift" (data + c with c the same across the pooled H and W axes: a bias_add over
channels, an add of a [K, 1, 1] constant). FuseOps then makes the f_i the fused op's epilogue,
applied to the pooled values (a quarter of the conv's). Every node of the chain must have the
next one as its only reader; otherwise the conv's output is needed anyway and nothing changes.

Only where it pays: conv outputs of at least FUSE_MIN_BYTES an image (CNN stems, whose
output would leave L2), float32 NCHW, groups 1, windows wider than one tap; pools without
dilation or ceil mode whose padding is smaller than the window; and no reader of the pool
writes an output as large as the conv's. Such a reader (ResNet-50's first bottleneck, 64->256
channels at 56x56) otherwise writes into the conv's storage, which the conv has just brought
into L3; fused, that storage is gone and its stores go to cold memory (the memory plan puts
them elsewhere): ResNet-50 lost 0.4 ms on each of two such convs, 1.0-1.6% in all, against
the stem's 0.17 ms (one thread, same-process A/B).

Algorithm: count each node's readers (one post-order walk), then one bottom-up rewrite
(rewrite_post_order); at a max pool, walk down its chain of commuting ops (a loop, at most
the chain's length) to the conv and rebuild the chain over the fused call.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.ir.expr import Call, Function, Op, RelayExpr
from compiler.ir.traversal import children, post_order, rewrite_post_order
from compiler.ir.types import TensorType
from compiler.op.nn_conv_pool import MAX_COMMUTES, contrib_conv2d_max_pool
from compiler.op.registry import get_def
from compiler.transform import function_pass, register_pass

__all__ = ["FuseConvMaxPool", "fuse_conv_max_pool"]

# Conv outputs (bytes an image) from which the fused op pays: half of a 2 MB L2 (SqueezeNet's
# 64@111x111 stem is 3.2 MB, ResNet-50's 64@112x112 3.2 MB)
FUSE_MIN_BYTES = 1 << 20
F32 = "float32"


def _op_name(node: RelayExpr) -> str | None:
    return node.op.name if type(node) is Call and isinstance(node.op, Op) else None


def _pool_fits(pool: Call) -> bool:
    a = pool.attrs
    (kh, kw), (pt, pl, pb, pr) = a.pool_size, a.padding
    return a.layout == "NCHW" and a.out_layout in ("", "NCHW") and not a.ceil_mode \
        and tuple(a.dilation) == (1, 1) and max(pt, pb) < kh and max(pl, pr) < kw \
        and _f32(pool.checked_type)


def _f32(ty) -> bool:
    return isinstance(ty, TensorType) and ty.dtype == F32


def _bytes(ty: TensorType) -> int:
    """The tensor's size in bytes; 0 for a dynamic shape (unknown: never a reason to fuse)."""
    if ty.is_dynamic:
        return 0
    return math.prod(ty.shape) * np.dtype(ty.dtype).itemsize


def _conv_fits(conv: Call) -> bool:
    a = conv.attrs
    ty = conv.checked_type
    wp = conv.args[1].checked_type
    if not (_f32(ty) and _f32(conv.args[0].checked_type)) or a.groups != 1 \
            or a.out_dtype not in ("", F32) or wp.shape[3] * wp.shape[4] == 1:
        return False
    return _bytes(ty) // ty.shape[0] >= FUSE_MIN_BYTES


def _data_index(node: Call, out_type: TensorType) -> int | None:
    """Which argument of a commuting op is the data the max moves through (None: the op does
    not commute here)."""
    kind = get_def(node.op.name).get_attr(MAX_COMMUTES)
    if kind == "monotone" and len(node.args) == 1:
        return 0
    if kind != "shift" or len(node.args) != 2:
        return None
    if node.op.name == "nn.bias_add":
        return 0 if node.attrs.axis in (1, -3) else None
    for i in (0, 1):
        data, other = node.args[i].checked_type, node.args[1 - i].checked_type
        if isinstance(other, TensorType) and data == out_type \
                and all(d == 1 for d in other.shape[-2:]) and other.dtype == data.dtype:
            return i
    return None


def fuse_conv_max_pool(expr: RelayExpr) -> RelayExpr:
    """Fuse each large packed conv2d with the max pool that alone reads it (module docstring)."""
    readers: dict = {}
    largest_reader: dict = {}  # node -> bytes of the largest tensor a reader of it writes
    for node in post_order(expr):
        for child in children(node):
            readers[child] = readers.get(child, 0) + 1
            if type(node) is Call and isinstance(node.checked_type, TensorType) \
                    and not node.checked_type.is_dynamic:  # a dynamic reader: never a pool
                largest_reader[child] = max(largest_reader.get(child, 0),
                                            _bytes(node.checked_type))

    def chain_below(pool: Call) -> tuple[list, Call] | None:
        """[(op node, data index)] from the pool down, and the conv; None where it does not fit."""
        chain = []
        node = pool.args[0]
        while _op_name(node) != "nn.contrib_conv2d_packed":
            if _op_name(node) is None or readers.get(node, 0) != 1:
                return None
            i = _data_index(node, node.checked_type)
            if i is None or node.checked_type != node.args[i].checked_type:
                return None
            chain.append((node, i))
            node = node.args[i]
        if readers.get(node, 0) != 1 or not _conv_fits(node) \
                or largest_reader.get(pool, 0) >= _bytes(node.checked_type):
            return None
        return chain, node

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if _op_name(old) != "nn.max_pool2d" or not _pool_fits(old):
            return new
        found = chain_below(old)
        if found is None:
            return new
        chain, conv = found
        # the new nodes of the chain (the rewrite rebuilt them over rewritten children)
        new_chain, node = [], new.args[0]
        for _, i in chain:
            new_chain.append((node, i))
            node = node.args[i]
        a = old.attrs
        conv_attrs = {key: node.attrs[key] for key in get_def(node.op.name).attrs}
        out = contrib_conv2d_max_pool(node.args[0], node.args[1], conv_attrs, a.pool_size,
                                      a.strides, a.padding)
        for op_node, i in reversed(new_chain):
            args = list(op_node.args)
            args[i] = out
            out = Call(op_node.op, args, op_node.attrs, op_node.type_args, op_node.span)
        return out

    return rewrite_post_order(expr, rewrite)


@register_pass
def FuseConvMaxPool():  # noqa: N802  (a pass factory, CapWords as TVM's)
    """Fuse a CNN stem's conv2d with its max pool (relay.build, opt_level 2, after the weights
    are packed)."""

    @function_pass(opt_level=2, name="FuseConvMaxPool", required=["InferType"])
    def fuse_conv_max_pool_pass(func: Function, mod, ctx) -> Function:
        return fuse_conv_max_pool(func)

    return fuse_conv_max_pool_pass
