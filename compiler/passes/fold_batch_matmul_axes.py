"""FoldTransposeIntoBatchMatmul: the reshapes and transposes around a batch_matmul become the
axis orders of one nn.contrib_batch_matmul_axes, so attention's head splits and merges are the
product's indexing instead of copies.

    q = reshape(transpose(reshape(x, [1, S, H, D]), [0, 2, 1, 3]), [H, S, D])
    batch_matmul(q, ...)  ->  contrib_batch_matmul_axes(reshape(x, [S, H, D]), ...,
                                                        a_axes="MBK")

(the reshape left is free: it only renames the shape, and FuseOps makes it a no-op). An
operand may also be a window of its source: GPT-2's fused QKV projection, split three ways
(a TupleGetItem of a split) and into heads, becomes three windows of one [S, 3H, D] view
(a_begin / a_shape), so the split is never copied either. On the output side, reshape(transpose(reshape(bmm, [1, H, S, D]), [0, 2, 1, 3]), [1, S, H * D])
becomes out_axes="MBN" with out_shape [1, S, H * D]; a chain of reshapes alone is folded too,
so the scale or mask that follows a [H, S, S] -> [1, H, S, S] reshape joins the product's
epilogue instead of running as its own kernel.

Which chains fold is decided by value, not by pattern: a chain of data-movement ops (one
tensor input; the op registry's reshape_only ops and those whose reference is exact by value)
is run through the ops' numpy references on arange(size) of its source, and it folds when the
result holds the positions off + i * s0 + j * s1 + k for some axis order of the operand (a
window of the source seen as 3-D), or, on the output side, is every element of the product
in some axis order with N last. Sources above MAX_ELEMENTS are left alone (the index arrays
are built at compile time). An operand chain folds only where it holds an
op other than a reshape (else there is nothing to save); the product's readers along an output
chain must be single, so no copy is needed for another reader. float32 batch_matmuls with the
same batch on both sides only.

Algorithm: count each node's readers (one post-order walk), then one bottom-up rewrite
(rewrite_post_order, memo kept so a chain's rewritten source can be looked up); the chains
are walked with loops, never recursion.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from compiler.ir.expr import Call, Function, Op, RelayExpr, TupleGetItem
from compiler.ir.traversal import children, post_order, rewrite_post_order
from compiler.ir.types import TensorType, TupleType
from compiler.op.nn_batch_matmul_axes import OP as AXES_OP
from compiler.op.nn_batch_matmul_axes import contrib_batch_matmul_axes, merge_groups
from compiler.op.registry import get_def
from compiler.op.transform import reshape
from compiler.transform import function_pass, register_pass

__all__ = ["FoldTransposeIntoBatchMatmul", "fold_batch_matmul_axes"]

BATCH_MATMUL = "nn.batch_matmul"
F32 = "float32"
PERMUTATIONS = list(itertools.permutations(range(3)))
WINDOW_ATTRS = ("a_begin", "a_shape", "b_begin", "b_shape")
MAX_ELEMENTS = 1 << 24  # a chain's source or product larger than this is not analysed


def _op_name(node: RelayExpr) -> str | None:
    return node.op.name if type(node) is Call and isinstance(node.op, Op) else None


def _is_move(node: RelayExpr) -> bool:
    """A call that only moves its one tensor input's elements (registry: reshape_only, or a
    reference exact by value) into a tensor of the same dtype."""
    name = _op_name(node)
    if name is None or len(node.args) != 1:
        return False
    opdef = get_def(name)
    if not (opdef.reshape_only or opdef.exact_reference == "values"):
        return False
    src, out = node.args[0].checked_type, node.checked_type
    return isinstance(src, TensorType) and isinstance(out, TensorType) and src.dtype == out.dtype


def _run_chain(chain: list, values: np.ndarray) -> np.ndarray:
    """values through the chain's ops (chain[0] reads them, chain[-1] is the result)."""
    for node in chain:
        if type(node) is TupleGetItem:
            split = node.tuple_value
            values = get_def(split.op.name).reference([values], split.attrs)[node.index]
        else:
            values = get_def(node.op.name).reference([values], node.attrs)
        values = np.asarray(values)
    return values


def _step_source(node: RelayExpr) -> RelayExpr | None:
    """What one step of an operand's chain reads: a moving call's input, or the input of the
    moving multi-output call (split) a TupleGetItem takes a field of; None for anything else."""
    if type(node) is TupleGetItem:
        inner = node.tuple_value
        if _op_name(inner) is None or len(inner.args) != 1 or \
                not isinstance(inner.checked_type, TupleType):
            return None
        opdef = get_def(inner.op.name)
        src = inner.args[0].checked_type
        if opdef.exact_reference == "values" and isinstance(src, TensorType) and \
                all(isinstance(f, TensorType) and f.dtype == src.dtype
                    for f in inner.checked_type.fields):
            return inner.args[0]
        return None
    return node.args[0] if _is_move(node) else None


def _operand_fold(chain: list, letters: str) -> tuple | None:
    """(axes, shape, begin, window) when the chain (from the operand down to its source,
    innermost last) takes a window of the source's elements viewed as `shape`, in `axes`
    order: operand = the source reshaped to `shape`, window `window` from `begin` (in that
    tensor's axes). Found by value: for each axis order, the operand's element positions in
    the source must be off + i * s0 + j * s1 + k."""
    source = _step_source(chain[-1]).checked_type
    size = math.prod(source.shape)
    if size > MAX_ELEMENTS:
        return None
    values = _run_chain(list(reversed(chain)),
                        np.arange(size, dtype=np.int64).reshape(source.shape))
    if values.ndim != 3:
        return None
    for perm in PERMUTATIONS:
        moved = values.transpose(perm)
        t0, t1, t2 = moved.shape
        off = int(moved[0, 0, 0])
        s1 = int(moved[0, 1, 0]) - off if t1 > 1 else t2
        s0 = int(moved[1, 0, 0]) - off if t0 > 1 else s1 * t1
        if s1 < t2 or s0 < s1 * t1 or s0 % s1 or size % s0:
            continue
        grid = off + (np.arange(t0)[:, None, None] * s0 + np.arange(t1)[None, :, None] * s1
                      + np.arange(t2)[None, None, :])
        if not np.array_equal(moved, grid):
            continue
        shape = (size // s0, s0 // s1, s1)
        begin = (off // s0, off % s0 // s1, off % s1)
        if any(b + t > d for b, t, d in zip(begin, moved.shape, shape)):
            continue
        return "".join(letters[p] for p in perm), shape, begin, moved.shape
    return None


def _output_fold(chain: list, shape: tuple) -> str | None:
    """out_axes when the chain (from the product up) lays the product's elements out as one
    axis permutation with N last, viewed (merged) as the chain's result."""
    if math.prod(shape) > MAX_ELEMENTS:
        return None
    order = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    values = _run_chain(chain, order)
    result = chain[-1].checked_type.shape
    for perm in PERMUTATIONS:
        if perm[-1] != 2:
            continue
        moved = order.transpose(perm)
        if np.array_equal(values.ravel(), moved.ravel()) and \
                merge_groups(moved.shape, tuple(result)) is not None:
            return "".join("BMN"[p] for p in perm)
    return None


def _fits(bmm: Call) -> bool:
    x, y, out = bmm.args[0].checked_type, bmm.args[1].checked_type, bmm.checked_type
    return all(isinstance(t, TensorType) and t.dtype == F32 and not t.is_dynamic and
               math.prod(t.shape) > 0 for t in (x, y, out)) \
        and x.shape[0] == y.shape[0] and bmm.attrs.out_dtype in ("", F32)


def _letters(bmm: Call) -> tuple[str, str]:
    """The axis letters of nn.batch_matmul's operands as given."""
    a = bmm.attrs
    return ("BKM" if a.transpose_a else "BMK"), ("BNK" if a.transpose_b else "BKN")


def _window_attrs(a_win, b_win) -> dict:
    attrs = {}
    for side, win in (("a", a_win), ("b", b_win)):
        if win is not None:
            attrs[f"{side}_begin"], attrs[f"{side}_shape"] = win
    return attrs


def fold_batch_matmul_axes(expr: RelayExpr) -> RelayExpr:
    """Fold the movement chains around each batch_matmul into its indexing (module docstring)."""
    readers: dict = {}
    for node in post_order(expr):
        for child in children(node):
            readers[child] = readers.get(child, 0) + 1
    memo: dict = {}

    def operand(old_arg: RelayExpr, new_arg: RelayExpr, letters: str):
        """(new operand, axes, window, folded): the longest foldable chain below old_arg that
        holds more than reshapes, as a reshape of its source (window: begin and shape, or
        None for the whole of it)."""
        chain, node = [], old_arg
        while _step_source(node) is not None:
            chain.append(node)
            node = _step_source(node)
        for end in range(len(chain), 0, -1):
            part = chain[:end]
            if all(_op_name(n) and get_def(n.op.name).reshape_only for n in part):
                break
            found = _operand_fold(part, letters)
            if found is not None:
                axes, shape, begin, window = found
                source = _step_source(part[-1])
                whole = window == shape
                return (reshape(memo.get(source, source), list(shape)), axes,
                        None if whole else (begin, window), True)
        return new_arg, letters, None, False

    def rewrite_product(old: Call, new: Call) -> RelayExpr:
        (la, lb), a = _letters(old), old.attrs
        x, a_axes, a_win, folded_a = operand(old.args[0], new.args[0], la)
        y, b_axes, b_win, folded_b = operand(old.args[1], new.args[1], lb)
        if not (folded_a or folded_b):
            return new
        return contrib_batch_matmul_axes(x, y, a_axes, b_axes, "BMN", out_dtype=a.out_dtype,
                                         **_window_attrs(a_win, b_win))

    def rewrite_output(old: Call, new: RelayExpr) -> RelayExpr:
        chain, node = [old], old.args[0]
        while _is_move(node) and readers.get(node, 0) == 1:
            chain.append(node)
            node = node.args[0]
        if _op_name(node) != BATCH_MATMUL or readers.get(node, 0) != 1 or not _fits(node):
            return new
        out_axes = _output_fold(list(reversed(chain)), tuple(node.checked_type.shape))
        if out_axes is None:
            return new
        product = memo[node]
        windows = {}
        if _op_name(product) == AXES_OP:
            x, y, a_axes, b_axes = (*product.args, product.attrs.a_axes, product.attrs.b_axes)
            windows = {k: product.attrs[k] for k in WINDOW_ATTRS}
        else:
            (a_axes, b_axes), (x, y) = _letters(node), product.args
        return contrib_batch_matmul_axes(x, y, a_axes, b_axes, out_axes,
                                         out_shape=old.checked_type.shape,
                                         out_dtype=node.attrs.out_dtype, **windows)

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if _op_name(old) == BATCH_MATMUL and _fits(old):
            return rewrite_product(old, new)
        if _is_move(old):
            return rewrite_output(old, new)
        return new

    return rewrite_post_order(expr, rewrite, memo)


@register_pass
def FoldTransposeIntoBatchMatmul():  # noqa: N802  (a pass factory, CapWords as TVM's)
    """Fold the reshapes/transposes around batch_matmul into its indexing (relay.build,
    opt_level 2, before FuseOps)."""

    @function_pass(opt_level=2, name="FoldTransposeIntoBatchMatmul", required=["InferType"])
    def fold_pass(func: Function, mod, ctx) -> Function:
        return fold_batch_matmul_axes(func)

    return fold_pass
