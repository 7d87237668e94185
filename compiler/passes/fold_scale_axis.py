"""FoldScaleAxis: fold a per-output-channel multiply into the constant weights of the conv2d /
dense that produces it (TVM's FoldScaleAxis idea, opt_level 3).

relay.build runs this one: it only rewrites when the weight is constant-foldable, so the
multiply disappears at compile time. TVM's two halves, which rewrite whatever the weight is
and also pass relu, are BackwardFoldScaleAxis and ForwardFoldScaleAxis (their own modules).

After SimplifyInference a BatchNorm is `x * scale + shift` with `scale` broadcast along the
channel axis. When x is a conv2d / dense with a constant-foldable weight whose only consumer
is that multiply, the scale moves into the weight at compile time:

    nn.conv2d(x, W) * s            ->  nn.conv2d(x, W * reshape(s, [-1, 1, 1, 1]))
    nn.bias_add(nn.conv2d(x, W), b) * s
                                   ->  nn.bias_add(nn.conv2d(x, W * s'), b * reshape(s, [-1]))
    (nn.conv2d(x, W) + B) * s      ->  nn.conv2d(x, W * s') + B * s
    nn.dense(x, W) * s             ->  nn.dense(x, W * reshape(s, [-1, 1]))

`s` must be constant-foldable, float32 and per-channel: right-aligned against the output it
is 1 everywhere but (possibly) the channel axis (axis 1 of NCHW conv2d, the last axis of
dense), where it is the channel count or 1; the multiply must not change the output type.
FoldConstant (which runs next in relay.build) evaluates the new weight expressions once, so
the multiply disappears from the compiled program (the shift stays as a bias add fused into
the conv epilogue).

Algorithm: one bottom-up rewrite (rewrite_post_order). The use count of every node in the
original graph is taken first (a conv whose output is also used elsewhere is left alone);
while walking, each visited node records whether it is constant-foldable (O(1) from its
children, as in AlterOpLayout). Types come from the original (type-checked) nodes, so
InferType is required; chains of multiplies fold one after another.
"""
from __future__ import annotations

from compiler.analysis.constant import is_constant_foldable
from compiler.ir.expr import Call, Function, Op, RelayExpr
from compiler.ir.traversal import children, post_order, rewrite_post_order
from compiler.ir.types import TensorType
from compiler.op.tensor import multiply
from compiler.op.transform import reshape
from compiler.transform import function_pass, register_pass

__all__ = ["FoldScaleAxis", "fold_scale_axis"]

F32 = "float32"


def _shape(node) -> tuple | None:
    ty = getattr(node, "_checked_type", None)
    if ty is None:
        try:
            ty = node.checked_type
        except Exception:  # noqa: BLE001 - untyped node: not foldable here
            return None
    if not isinstance(ty, TensorType) or ty.dtype != F32 or ty.is_dynamic:
        return None  # a dynamic (Any) shape: nothing is folded through it
    return tuple(int(d) for d in ty.shape)


def _per_channel(shape: tuple, out_shape: tuple, axis: int) -> bool:
    """shape right-aligned against out_shape is 1 except on `axis` (where it is 1 or C)."""
    if len(shape) > len(out_shape):
        return False
    pad = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    for i, (d, o) in enumerate(zip(pad, out_shape)):
        if d != 1 and not (i == axis and d == o):
            return False
    return True


def _size(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _op_name(node) -> str | None:
    return node.op.name if type(node) is Call and isinstance(node.op, Op) else None


def fold_scale_axis(expr: RelayExpr) -> RelayExpr:
    """Fold per-channel multiplies into the constant weights of the conv2d/dense before them."""
    uses: dict = {}
    for node in post_order(expr):
        for c in children(node):
            uses[c] = uses.get(c, 0) + 1
    foldable: dict = {}


    origin: dict = {}  # rewritten node -> the original node with its type and uses

    def orig(node):
        return origin.get(node, node)

    made: dict = {}  # shapes of the constant expressions this pass builds

    def shape(node):
        return made[node] if node in made else _shape(orig(node))

    def single_use(node) -> bool:
        return uses.get(orig(node), 0) == 1

    def is_const(node) -> bool:
        return foldable.get(node, False) or foldable.get(orig(node), False)

    def anchor(prod: RelayExpr):
        """(kind, channel axis, output shape) when prod is a single-use foldable conv2d/dense."""
        name = _op_name(prod)
        if name not in ("nn.conv2d", "nn.dense") or not single_use(prod) \
                or len(prod.args) != 2 or not is_const(prod.args[1]):
            return None
        out, w = shape(prod), shape(prod.args[1])
        if out is None or w is None or prod.attrs.out_dtype not in ("", F32):
            return None
        if name == "nn.conv2d":
            a = prod.attrs
            if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" \
                    or a.out_layout not in ("", "NCHW") or len(out) != 4 or len(w) != 4:
                return None
            return "conv", 1, out
        if len(w) != 2 or not out:
            return None
        return "dense", len(out) - 1, out

    def scaled(prod: Call, kind: str, s: RelayExpr) -> Call:
        w = multiply(prod.args[1], reshape(
            s, newshape=[-1, 1, 1, 1] if kind == "conv" else [-1, 1]))
        foldable[w] = True
        made[w] = shape(prod.args[1])
        out = Call(prod.op, [prod.args[0], w], prod.attrs, prod.type_args, prod.span)
        origin[out] = orig(prod)
        return out

    def const_mul(a: RelayExpr, b: RelayExpr, b_shape: tuple) -> RelayExpr:
        out = multiply(a, b)
        foldable[out] = True
        sa = shape(a)
        n = max(len(sa), len(b_shape))
        sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(b_shape)) + tuple(b_shape)
        made[out] = tuple(max(x, y) for x, y in zip(sa, sb))
        return out

    def fold(old: Call, new: Call) -> RelayExpr | None:
        if _shape(old) is None:
            return None
        for i in (0, 1):
            x, s = new.args[i], new.args[1 - i]
            s_shape = shape(s)
            if s_shape is None or not is_const(s) or shape(x) != _shape(old):
                continue
            got = anchor(x)
            if got is not None:  # conv(x, W) * s
                kind, axis, out = got
                if _per_channel(s_shape, out, axis):
                    return scaled(x, kind, s)
                continue
            name = _op_name(x)
            if name not in ("nn.bias_add", "add") or not single_use(x):
                continue
            for j in ((0,) if name == "nn.bias_add" else (0, 1)):
                p, b = x.args[j], x.args[1 - j]
                got = anchor(p)
                b_shape = shape(b)
                if got is None or b_shape is None or not is_const(b) or shape(p) != shape(x):
                    continue
                kind, axis, out = got
                if not _per_channel(s_shape, out, axis):
                    continue
                if name == "nn.bias_add":
                    if x.attrs.axis not in (axis, axis - len(out)) or len(b_shape) != 1:
                        continue
                    nb = const_mul(b, reshape(s, newshape=[-1]), (_size(s_shape),))
                    return Call(x.op, [scaled(p, kind, s), nb], x.attrs, x.type_args, x.span)
                if not _per_channel(b_shape, out, axis):
                    continue
                args = [None, None]
                args[j], args[1 - j] = scaled(p, kind, s), const_mul(b, s, s_shape)
                return Call(x.op, args, x.attrs, x.type_args, x.span)
        return None

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        foldable[old] = is_constant_foldable(old, foldable)
        if new is not old:  # rebuilt over rewritten children: same type and uses as old
            origin[new] = old
        if _op_name(new) == "multiply" and len(new.args) == 2 and not foldable[old]:
            out = fold(old, new)
            if out is not None:
                origin[out] = old
                return out
        return new

    return rewrite_post_order(expr, rewrite)


@register_pass
def FoldScaleAxis():  # noqa: N802  (TVM's pass name)
    """Fold per-channel scales (BatchNorm after SimplifyInference) into conv2d/dense weights."""

    @function_pass(opt_level=3, name="FoldScaleAxis", required=["InferType"])
    def fold_scale_axis_pass(func: Function, mod, ctx) -> Function:
        return fold_scale_axis(func)  # FunctionPass already skips Primitive functions

    return fold_scale_axis_pass
