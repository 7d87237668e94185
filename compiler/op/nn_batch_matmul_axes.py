"""nn.contrib_batch_matmul_axes: a batch matmul whose operands and output keep their axes in any
order, so attention's head splits and merges (reshape -> transpose -> reshape) become the
product's indexing instead of copies (produced by the FoldTransposeIntoBatchMatmul pass).

    C[b, m, n] = sum_k A[b, m, k] * B[b, n, k]

a_axes names the axes of tensor_a in memory order with the letters B, M, K (a query split into
heads, [seq, heads, head_dim], is "MBK"); b_axes those of tensor_b with B, N, K (keys as
[seq, heads, head_dim] are "NBK", values "KBN"); out_axes the memory order of the result with
B, M, N, where N must be last (the micro-kernel stores rows of C contiguously). out_shape,
when given, is the result's shape: the out_axes-ordered [., ., .] with adjacent axes merged
and axes of 1 inserted (so "MBN" with out_shape [1, seq, heads * head_dim] is the merged
heads as the next dense reads them). nn.batch_matmul(transpose_a, transpose_b) is the case
"BMK"/"BKM", "BNK"/"BKN", "BMN".

a_begin / a_shape (b_begin / b_shape), when given, take the operand as a window of its tensor:
A[b, m, k] is tensor_a[begin + index] over a window of a_shape in tensor_a's own axis order
(GPT-2's query, key and value are windows of heads 0-11, 12-23 and 24-35 of the fused QKV
projection seen as [seq, 36, head_dim], so its Split is never copied).
"""
from __future__ import annotations

import math

import numpy as np

from codegen.schedules.gemm import merge_groups
from compiler.ir.types import TensorType
from .nn import _out_dtype
from .registry import OpDef, OpPattern, make_call, register, register_flops
from .type_relations import check_arity, dims_agree, fail, holds, is_dyn, known, tensor_arg
from .window import acc_dtype

__all__ = ["contrib_batch_matmul_axes", "axes_extents", "window", "merge_groups"]

OP = "nn.contrib_batch_matmul_axes"
LETTERS = {"a_axes": "BMK", "b_axes": "BNK", "out_axes": "BMN"}


def _check_axes(attrs) -> None:
    for name, letters in LETTERS.items():
        value = getattr(attrs, name)
        if not isinstance(value, str) or sorted(value) != sorted(letters):
            raise fail(OP, f"{name} must order the letters {letters}, got {value!r}")
    if attrs.out_axes[-1] != "N":
        raise fail(OP, f"out_axes must end with N (rows of C are contiguous), got "
                       f"{attrs.out_axes!r}")


def axes_extents(shape, axes: str) -> dict:
    """{letter: extent} of a 3-D shape whose axes are `axes`."""
    return dict(zip(axes, shape))


def window(shape: tuple, begin, extent, name: str) -> tuple[tuple, tuple]:
    """(begin, shape) of an operand's window inside a tensor of `shape` (the whole tensor by
    default), checked."""
    begin = (0, 0, 0) if begin is None else tuple(int(v) for v in begin)
    whole = extent is None
    extent = tuple(shape) if whole else tuple(int(v) for v in extent)
    if len(begin) != 3 or len(extent) != 3 or not whole and any(
            b < 0 or e < 1 or not holds(OP, "ge", d, b + e, f"the {name} window must lie "
                                                             "inside the tensor")
            for b, e, d in zip(begin, extent, shape)):
        raise fail(OP, f"{name} window at {begin} of shape {extent} does not lie inside the "
                       f"tensor's shape {tuple(shape)}")
    return begin, extent


def _rel(types, attrs):
    check_arity(OP, types, 2)
    _check_axes(attrs)
    x, y = tensor_arg(OP, types, 0, "tensor_a"), tensor_arg(OP, types, 1, "tensor_b")
    if x.ndim != 3 or y.ndim != 3:
        raise fail(OP, f"tensor_a and tensor_b must be 3-D, got {x.shape} and {y.shape}")
    _, xs = window(x.shape, attrs.a_begin, attrs.a_shape, "tensor_a")
    _, ys = window(y.shape, attrs.b_begin, attrs.b_shape, "tensor_b")
    a, b = axes_extents(xs, attrs.a_axes), axes_extents(ys, attrs.b_axes)
    if not dims_agree(OP, a["K"], b["K"], "tensor_a and tensor_b must agree on K") or \
            not dims_agree(OP, a["B"], b["B"], "tensor_a and tensor_b must agree on B"):
        raise fail(OP, f"tensor_a {xs} ({attrs.a_axes}) and tensor_b {ys} "
                       f"({attrs.b_axes}) differ in the batch or the reduction axis")
    extents = {"B": known(a["B"], b["B"]), "M": a["M"], "N": b["N"]}
    shape = tuple(extents[c] for c in attrs.out_axes)
    if attrs.out_shape is not None:
        if any(is_dyn(d) for d in shape):
            raise fail(OP, f"out_shape needs a static product shape, got {shape}")
        out_shape = tuple(int(d) for d in attrs.out_shape)
        if merge_groups(shape, out_shape) is None:
            raise fail(OP, f"out_shape {out_shape} does not merge adjacent axes of the "
                           f"{attrs.out_axes} result {shape}")
        shape = out_shape
    return TensorType(shape, _out_dtype(attrs, x))


def _ref(inputs, attrs):
    x, y = inputs
    out_dtype = attrs.out_dtype or x.dtype
    (ab, ae), (bb, be) = (window(x.shape, attrs.a_begin, attrs.a_shape, "tensor_a"),
                          window(y.shape, attrs.b_begin, attrs.b_shape, "tensor_b"))
    x = x[tuple(slice(b, b + e) for b, e in zip(ab, ae))]
    y = y[tuple(slice(b, b + e) for b, e in zip(bb, be))]
    acc = acc_dtype(out_dtype)
    a = np.einsum(f"{attrs.a_axes.lower()}->bmk", x.astype(acc))
    b = np.einsum(f"{attrs.b_axes.lower()}->bnk", y.astype(acc))
    c = np.einsum(f"bmn->{attrs.out_axes.lower()}", np.matmul(a, b.transpose(0, 2, 1)))
    shape = c.shape if attrs.out_shape is None else tuple(attrs.out_shape)
    return np.ascontiguousarray(c).reshape(shape).astype(out_dtype)


register(OpDef(name=OP, num_inputs=2, type_rel=_rel, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               reference=_ref, attrs={"out_dtype": "", "a_axes": "BMK", "b_axes": "BNK",
                                      "out_axes": "BMN", "out_shape": None, "a_begin": None,
                                      "a_shape": None, "b_begin": None, "b_shape": None},
               attrs_type_key="relay.attrs.BatchMatmulAxesAttrs"))


@register_flops(OP)
def _flops(arg_types, attrs, out_type):
    _, xs = window(arg_types[0].shape, attrs.a_begin, attrs.a_shape, "tensor_a")
    return 2 * math.prod(out_type.shape) * axes_extents(xs, attrs.a_axes)["K"]


def _ints(value) -> tuple | None:
    return None if value is None else tuple(int(d) for d in value)


def contrib_batch_matmul_axes(tensor_a, tensor_b, a_axes="BMK", b_axes="BNK", out_axes="BMN",
                              out_shape=None, out_dtype="", a_begin=None, a_shape=None,
                              b_begin=None, b_shape=None):
    """C[b, m, n] = sum_k A[b, m, k] B[b, n, k] with each tensor's axes in the given order
    (and each operand, optionally, a window of its tensor)."""
    return make_call(OP, [tensor_a, tensor_b], out_dtype=out_dtype, a_axes=a_axes,
                     b_axes=b_axes, out_axes=out_axes, out_shape=_ints(out_shape),
                     a_begin=_ints(a_begin), a_shape=_ints(a_shape), b_begin=_ints(b_begin),
                     b_shape=_ints(b_shape))
