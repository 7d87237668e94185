"""AlterOpLayout: give conv2d / dense with constant weights a pre-packed weight (TVM's pass idea).

The anchor schedules (codegen.schedules) read their weight in the layout of their
configuration: a conv's packed channel blocks, a Winograd transform, a dense's panels. With a
constant weight that work belongs at compile time, so this pass asks the strategy layer which
implementation the call will run with its weight constant (compiler.op.strategy.alter_layout,
the op's FTVMAlterOpLayout) and rewrites the call to the op that reads that layout, e.g.

    nn.conv2d(x, W)  ->  nn.contrib_conv2d_packed(x, nn.contrib_conv2d_weight_pack(W))
    nn.conv2d(x, W)  ->  nn.contrib_conv2d_winograd_without_weight_transform(
                             x, nn.contrib_conv2d_winograd_weight_transform(W))
    nn.dense(x, W)   ->  nn.contrib_dense_pack(x, nn.contrib_dense_weight_pack(W))
    nn.contrib_recurrent_layer(xw, R, ...)  ->  the same op reading
                             nn.contrib_recurrent_weight_pack(R) (attr weight_block)

when W is constant-foldable (built from constants only: no variables, no stateful ops).
FoldConstant, which runs next in relay.build, evaluates the packing op once; the kernel then
skips its run-time pack. Calls whose chosen implementation reads the weight as it is
(depthwise convs, other dtypes and layouts) keep their op.

Algorithm: one bottom-up rewrite (rewrite_post_order, explicit stack); while walking, each
visited node records whether it is constant-foldable from its children's records, so the test
is O(1) per node. Types come from the original (type-checked) nodes; InferType is required.
The target is the current one (compiler.target.codegen_options: relay.build enters its
target), whose vector width fixes the block sizes in the packing ops' attributes, so the
packed type does not depend on the machine later.
"""
from __future__ import annotations

from codegen.options import CodegenOptions
from compiler.analysis.constant import is_constant_foldable
from compiler.ir.expr import Call, Function, Op, RelayExpr, TupleGetItem
from compiler.ir.traversal import rewrite_post_order
from compiler.op.strategy import alter_layout
from compiler.target import codegen_options
from compiler.transform import function_pass, register_pass

__all__ = ["AlterOpLayout", "PackConstantWeights", "alter_op_layout"]


def alter_op_layout(expr: RelayExpr, options: CodegenOptions | None = None) -> RelayExpr:
    """Rewrite conv2d/dense with constant-foldable weights to the ops reading the layout their
    implementation wants, for `options` (default: the current target's)."""
    options = codegen_options() if options is None else options
    foldable: dict = {}  # old node -> built from constants only
    packed: dict = {}  # (packing op, weight node, attrs) -> packed weight node
    # Equal constant-foldable subexpressions become one node (an unrolled recurrence slices
    # its R anew at every step), so a shared weight is packed and folded once, not per step.
    shared: dict = {}

    def pack(make, weight: RelayExpr, **attrs) -> RelayExpr:
        key = (make, weight, tuple(sorted(attrs.items())))
        if key not in packed:
            packed[key] = make(weight, **attrs)
        return packed[key]

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        foldable[old] = is_constant_foldable(old, foldable)
        if foldable[old] and type(new) in (Call, TupleGetItem):
            key = (new.op, new.attrs, tuple(new.args)) if type(new) is Call \
                else (new.tuple_value, new.index)
            try:
                new = shared.setdefault(key, new)
            except TypeError:  # attributes that cannot be hashed: keep the node
                pass
        if type(new) is Call and isinstance(new.op, Op) and len(new.args) >= 2 \
                and foldable.get(old.args[1], False):
            out = alter_layout(new, old, pack, options)
            if out is not None:
                return out
        return new

    return rewrite_post_order(expr, rewrite)


@register_pass
def AlterOpLayout():  # noqa: N802  (TVM's pass name)
    """Pre-pack constant conv2d/dense weights into the micro-kernels' layout (opt_level 3)."""

    @function_pass(opt_level=3, name="AlterOpLayout", required=["InferType"])
    def alter_op_layout_pass(func: Function, mod, ctx) -> Function:
        return alter_op_layout(func)  # FunctionPass already skips Primitive functions

    return alter_op_layout_pass


@register_pass
def PackConstantWeights():  # noqa: N802
    """relay.build's weight packing at opt_level 2 (TVM's default level).

    Packing constant weights is what the schedules need to be fast, not an optional layout
    optimisation, so the build does it wherever FoldConstant runs (opt_level >= 2) and not
    only at AlterOpLayout's level 3. Disabling AlterOpLayout disables this too, and at
    opt_level 3 it finds nothing left to pack.
    """

    @function_pass(opt_level=2, name="PackConstantWeights", required=["InferType"])
    def pack_constant_weights_pass(func: Function, mod, ctx) -> Function:
        if "AlterOpLayout" in ctx.disabled_pass:
            return func
        return alter_op_layout(func)

    return pack_constant_weights_pass

