"""ConvertBlockedLayout: carry activations through the network in TVM's NCHW[x]c layout.

A packed conv2d over whole channel blocks (x = the target's vector width: the current target's
CodegenOptions, compiler.target.codegen_options) that the strategy layer's blocked conv computes
(compiler.op.strategy.blocked_conv_supported) becomes nn.contrib_conv2d_NCHWc, whose tiles read each pixel's channel block as one 64-byte
line and store each output channel block as one vector; what reads its output stays blocked
where it can, so layout transforms are left only at the edges of the blocked region:

    conv2d_packed(x NCHW)  ->  contrib_conv2d_NCHWc(layout_transform(x, NCHW, NCHW<x>c))
    f(blocked, c)          ->  f(blocked, c')   f elementwise or broadcast (OpPattern), with no
                                                axis or shape attribute; c' is a broadcast
                                                operand re-laid out ([C,1,1] -> [1,C/x,1,1,x],
                                                folded by FoldConstant when c is constant)
    bias_add(blocked, b)   ->  add(blocked, b')
    mean(blocked, (2, 3))  ->  nn.global_avg_pool2d(blocked, layout NCHW<x>c) (max: global max
                               pool), whose blocked schedule loads each block as one vector;
                               other one-input float reductions (sum, ...) over the blocks'
                               H, W; without keepdims reshaped to [N, C]
    depthwise conv2d       ->  nn.contrib_depthwise_conv2d_NCHWc (compiler/op/nn_depthwise_nchwc)
    concatenate((a, b), 1) ->  concatenate((a', b'), 1)   on whole channel blocks
    op(blocked)            ->  op(blocked) with its layout attribute NCHW<x>c, for the ops the
                               registry gives a blocked form (BLOCKED_FORM: pools, Winograd)
    anything else          ->  its blocked operands transformed back to NCHW (flatten, dense,
                               grouped convs, LRN, the function's result)

Channels not in whole blocks (MobileNet's 24, SqueezeNet's 1000 classes) are carried padded
to ceil(C/x)*x: the transform in zero-pads them (nn.pad, fused into the transform), the transform
back drops them (strided_slice), a conv reads them with zero weights (its packed weight padded
on the input side) and writes 0 there (the packed weight's zero rows past K), constants and
biases are zero-padded. What the padding holds after an elementwise op is computed from the op's
registry reference (0.5 after a sigmoid): an op whose padding would not be finite (log, 1/x)
reads NCHW, since a conv multiplying inf by its zero weight would make NaN. Ops that read across
channels (softmax, reductions over C, flatten, dense, concat off block boundaries) read NCHW,
the padding dropped.

Algorithm: one bottom-up rewrite (rewrite_post_order, an explicit stack) that records which new
nodes hold blocked values. A consumer asks for an operand as NCHW or as blocked; each node is
transformed at most once per direction (shared by all its consumers), and a transform back to
the layout a node was just transformed from returns that node (the pair cancels). A concatenate's
tuple keeps its operands blocked when the concatenate is its only reader (readers counted in one
post-order walk first). Ops come from the registry's OpPattern, not from a list. Functions with
Let, If or nested functions are left as they are (the pass runs on relay.build's data-flow
graphs). A function whose blocked form would transform more activation elements between its
ops than max_transform_elements_per_flop per FLOP of its blocked convs is left as it is (all or
nothing: the transforms would cost more than the blocked convs save).
Where a blocked region starts is decided per conv: one reading an NCHW input starts it unless
that would pad its channels past max_padded_input_channels_ratio (an RGB stem) or it narrows
(K < C) at a plane larger than max_region_start_plane: there the next conv starts it, with the
narrower tensor transformed in (MobileNet-v2: NCHW through its 32->16 at 112x112, blocked from
the 16->96 expand on).

The thresholds are a BlockedLayoutGuard, today's measured values its defaults; PassContext config
"relayjit.blocked_layout_guard" {field: value} overrides them (tests, A/B measurements, later
tuning). On by default (PassContext config "relayjit.blocked_layout": False turns it off). One thread, CPU time, same process (benchmarks/blocked_layout_models.py), blocked / NCHW:
ResNet-50 0.91-0.94, DenseNet-121 0.89, SqueezeNet 0.94-0.96, Inception-v2 0.96-0.97,
Inception-v1 0.99-1.01, VGG-19 0.99-1.01; models it leaves NCHW unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import Call, Constant, Function, If, Let, Op, RelayExpr, Tuple
from compiler.ir.traversal import children, post_order, rewrite_post_order, with_children
from compiler.ir.types import TensorType
from compiler.op.blocked_layout import BLOCKED_FORM
from compiler.op.nn_depthwise_nchwc import blocked_depthwise, depthwise_blockable
from compiler.op.nn_nchwc import contrib_conv2d_NCHWc
from compiler.op.nn_norm import pad
from compiler.op.nn_pool import global_avg_pool2d, global_max_pool2d
from compiler.op.registry import OpPattern, get_def, make_call
from compiler.op.strategy import blocked_conv_supported
from compiler.op.tensor import add
from compiler.op.transform import concatenate, layout_transform, reshape
from compiler.op.transform_slice import strided_slice
from compiler.target import codegen_options
from compiler.transform import PassContext, function_pass, register_pass

__all__ = ["ConvertBlockedLayout", "convert_blocked_layout", "BLOCKED_LAYOUT",
           "BLOCKED_LAYOUT_GUARD", "BlockedLayoutGuard", "blocked_layout_guard"]

BLOCKED_LAYOUT = "relayjit.blocked_layout"
BLOCKED_LAYOUT_GUARD = "relayjit.blocked_layout_guard"

F32 = "float32"


@dataclass(frozen=True)
class BlockedLayoutGuard:
    """When carrying a function blocked pays (the pass's guard), by default as measured."""

    # The function is left in NCHW when the activations its blocked form would transform
    # (between ops, from its inputs and for its results) have more than this many elements per
    # FLOP of its blocked convs: a transform costs ~0.5 ns an element, a blocked conv saves ~5%
    # of its time at ~130 GFLOP/s, so transforms pay below ~1/1300; measured, MobileNet-v2
    # blocked from its 16@112 tensor on (1/1149) ran 0.98x, blocked after its stem (1/607)
    # 1.02x, whence 1/1000. ResNet-50 (1/39552), DenseNet-121 (1/13533), SqueezeNet (1/3387),
    # Inception-v1 (around its LRNs, 1/2490) pass; UNet (1/855) does not.
    max_transform_elements_per_flop: float = 1 / 1000
    # A conv whose input is NCHW (not blocked yet) goes blocked only when padding its channels
    # to whole blocks multiplies them by at most this (24 -> 32 does; an RGB stem's 3 -> 16 does
    # not, its FLOPs would be 5x; it stays NCHW and its output is transformed).
    max_padded_input_channels_ratio: float = 1.5
    # A narrowing conv (K < C) whose input is NCHW (it would start a blocked region) stays NCHW
    # when its output plane has more pixels than this, so the region starts at the next conv
    # and the transform in moves the narrower tensor: MobileNet-v2's 32->16 at 112x112 loses
    # blocked (0.128 -> 0.196 ms) and its 32@112 input's transform costs 0.118 ms; from the
    # 16->96 expand on, the blocked depthwise convs win (96 @112/2 0.351 -> 0.220 ms).
    max_region_start_plane: int = 56 * 56

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise CompilerError(f"PassContext config {BLOCKED_LAYOUT_GUARD!r}: {f.name} "
                                    f"must be a number >= 0, got {value!r}")


def blocked_layout_guard(ctx: PassContext) -> BlockedLayoutGuard:
    """The guard under ctx: the defaults with its "relayjit.blocked_layout_guard" fields."""
    given = ctx.get_config(BLOCKED_LAYOUT_GUARD, None) or {}
    names = {f.name for f in fields(BlockedLayoutGuard)}
    if not isinstance(given, dict) or set(given) - names:
        raise CompilerError(f"PassContext config {BLOCKED_LAYOUT_GUARD!r} takes a dict of "
                            f"{sorted(names)}, got {given!r}")
    return BlockedLayoutGuard(**given)
# attributes that make a broadcast op depend on the layout of its operands
_LAYOUT_ATTRS = ("axis", "shape")
# reductions over H, W that are global pools (blocked: one vector load per block and pixel,
# 0.003 ms at 1024@7 against 0.011 ms for the generic strided reduction of the blocks)
_GLOBAL_POOL_OF = {"mean": global_avg_pool2d, "max": global_max_pool2d}


def _op_name(node: RelayExpr) -> str | None:
    return node.op.name if type(node) is Call and isinstance(node.op, Op) else None


def _nchw_channels(ty, x: int) -> int | None:
    """C of a 4-D float32 tensor type whose channels are whole blocks of x, else None."""
    if isinstance(ty, TensorType) and ty.dtype == F32 and len(ty.shape) == 4 \
            and not ty.is_dynamic and ty.shape[1] % x == 0 and ty.shape[1] > 0:
        return ty.shape[1]
    return None


def _any_channels(ty) -> int | None:
    """C of a 4-D float32 tensor type (blocked padded to whole blocks when C % x), else None."""
    if isinstance(ty, TensorType) and ty.dtype == F32 and len(ty.shape) == 4 \
            and not ty.is_dynamic and ty.shape[1] > 0:  # a dynamic (Any) shape stays NCHW
        return ty.shape[1]
    return None


def _padded(c: int, x: int) -> int:
    return -(-c // x) * x


def _pad_channels(node: RelayExpr, rank: int, axis: int, c: int, x: int) -> RelayExpr:
    """node with its axis `axis` of size c zero-padded to whole blocks of x."""
    if c % x == 0:
        return node
    width = [(0, 0)] * rank
    width[axis] = (0, _padded(c, x) - c)
    return pad(node, tuple(width))


def _spatial_reducible(call: Call) -> bool:
    """A one-input reduction (the registry's COMM_REDUCE) with only axis/keepdims/exclude."""
    d = get_def(call.op.name)
    return d.pattern == OpPattern.COMM_REDUCE and d.num_inputs == 1 \
        and set(d.attrs) == {"axis", "keepdims", "exclude"}


def _layout_agnostic(call: Call) -> bool:
    """Elementwise or broadcast (the registry's pattern) with no axis/shape attribute."""
    d = get_def(call.op.name)
    return d.pattern <= OpPattern.BROADCAST and not d.stateful \
        and not any(a in d.attrs for a in _LAYOUT_ATTRS)


class _Converter:
    """The rewrite's state: which new nodes are blocked, and the transforms made between the
    layouts (each made once per node and direction, pairs cancelled)."""

    def __init__(self, x: int):
        self.x = x
        self.layout = f"NCHW{x}c"
        self.blocked: set = set()  # new nodes holding blocked values
        self.to_nchw: dict = {}  # blocked node -> its transform back
        self.to_blocked: dict = {}  # NCHW node -> its transform to blocked
        self.origin: dict = {}  # a transform we made -> the node it transformed
        self.made: list = []  # (transform, elements): activation transforms (not cancelled)
        self.old_of: dict = {}  # rewritten node -> the node it replaces (for its type)
        self.flops = 0  # of the convs made blocked
        self.nchw_shape: dict = {}  # a blocked node made by a rule -> its NCHW shape
        # a blocked node whose C is not whole blocks -> the value its padding channels hold
        # (finite: convs read them with zero weights; 0 from a transform or a conv)
        self.pad_value: dict = {}

    def padding_of(self, node: RelayExpr) -> float:
        """The padding channels' value of a blocked node (0 when its channels are whole)."""
        return self.pad_value.get(node, 0.0)

    def nchw(self, node: RelayExpr) -> RelayExpr:
        if node not in self.blocked:
            return node
        if node not in self.to_nchw:
            back = self.origin.get(node)  # node = transform(y NCHW): y itself
            shape = self.nchw_shape.get(node)
            c = shape[1] if shape is not None else 0
            cp = _padded(c, self.x)
            if back is None and shape is not None and shape[2] * shape[3] == 1:
                # one pixel: the blocks are NCHW's order
                back = reshape(node, (shape[0], cp, 1, 1))
            elif back is None:
                back = layout_transform(node, self.layout, "NCHW")
                self.made.append((back, math.prod(shape) if shape else 0))
            if back is not None and cp != c and back is not self.origin.get(node):
                back = strided_slice(back, [0], [c], axes=[1])  # drop the padding channels
            self.to_nchw[node] = back
            self.origin.setdefault(back, node)
        return self.to_nchw[node]

    def block(self, node: RelayExpr) -> RelayExpr:
        if node in self.blocked:
            return node
        if node not in self.to_blocked:
            back = self.origin.get(node)  # node = transform(y blocked): y itself
            if back is not None and back in self.blocked:
                out = back
            else:
                ty = self.old_of.get(node, node).checked_type
                out = layout_transform(_pad_channels(node, 4, 1, ty.shape[1], self.x),
                                       "NCHW", self.layout)
                self.made.append((out, math.prod(ty.shape)))
            self.to_blocked[node] = out
            self.blocked.add(out)
            self.origin.setdefault(out, node)
        return self.to_blocked[node]

    def operand(self, node: RelayExpr, ty, channels: int) -> RelayExpr | None:
        """An operand of a blocked broadcast op, in a shape that broadcasts against
        [N, C/x, H, W, x]; None when it cannot (a rank over 4, channels not C or 1)."""
        if node in self.blocked:
            return node
        if not isinstance(ty, TensorType) or len(ty.shape) > 4:
            return None
        shape = (1,) * (4 - len(ty.shape)) + tuple(ty.shape)
        if all(d == 1 for d in shape):
            return node
        if shape[1] == 1:  # the same over channels: one block lane axis of 1
            return reshape(node, (shape[0], 1, shape[2], shape[3], 1))
        if shape[1] != channels:
            return None
        shaped = node if len(ty.shape) == 4 else reshape(node, shape)
        return layout_transform(_pad_channels(shaped, 4, 1, channels, self.x), "NCHW",
                                self.layout)

    def mark(self, node: RelayExpr) -> RelayExpr:
        self.blocked.add(node)
        return node

    def padded(self, node: RelayExpr, value) -> RelayExpr:
        """Record a blocked node's padding value (a float, None: finite, unknown)."""
        if value is None or value != 0:
            self.pad_value[node] = value
        return node

    def transform_elements(self) -> int:
        """Elements of the activation transforms made, the graph's inputs and results
        included (a one-conv graph pays both of its transforms, 14% of a 256->64 1x1 at
        56x56)."""
        return sum(n for _, n in self.made)

    def count_conv(self, old: Call) -> None:
        """A conv made blocked: its FLOPs, as the registry counts them."""
        flops = get_def(old.op.name).flops
        if flops is not None:
            self.flops += flops([a.checked_type for a in old.args], old.attrs, old.checked_type)


def convert_blocked_layout(func: Function, x: int | None = None,
                           guard: BlockedLayoutGuard | None = None) -> Function:
    """func with its packed convs over whole channel blocks in NCHW<x>c (x: the current
    target's vector width by default) and the layout carried through what can take it, where
    `guard` (default: BlockedLayoutGuard()) says it pays."""
    x = codegen_options().vector_width if x is None else x
    guard = BlockedLayoutGuard() if guard is None else guard
    nodes = post_order(func.body)
    if any(type(n) in (Let, If, Function) for n in nodes):
        return func
    readers: dict = {}
    for n in nodes:
        for c in children(n):
            readers[c] = readers.get(c, 0) + 1
    cv = _Converter(x)

    def conv(old: Call, new: Call) -> RelayExpr | None:
        """A packed conv: channels not in whole blocks are zero-padded, the input's by zero
        weights for its padding channels (what they hold is multiplied by 0), the output's by
        the packed weight's zero rows past K (its padding channels are 0 before the epilogue).
        An NCHW input is padded only up to max_padded_input_channels_ratio (a stem's 3
        channels as 16 would be 5x the FLOPs: it stays NCHW and its output is transformed)."""
        a = old.attrs
        data_t, w_t = old.args[0].checked_type, old.args[1].checked_type
        c, k = _any_channels(data_t), _any_channels(old.checked_type)
        if c is None or k is None or a.out_dtype not in ("", F32) \
                or (new.args[0] not in cv.blocked
                    and (_padded(c, x) > guard.max_padded_input_channels_ratio * c
                         or (math.prod(old.checked_type.shape[2:])
                             > guard.max_region_start_plane and k < c))) \
                or not blocked_conv_supported(_padded(c, x), _padded(k, x), a.groups,
                                              w_t.shape[-1], x) \
                or _padded(k, x) > w_t.shape[1] * w_t.shape[-1]:
            return None
        cv.count_conv(old)
        return cv.mark(contrib_conv2d_NCHWc(
            cv.block(new.args[0]), _pad_channels(new.args[1], 6, 2, c, x),
            channels=_padded(k, x), kernel_block=w_t.shape[-1],
            strides=a.strides, padding=a.padding, dilation=a.dilation,
            kernel_size=a.kernel_size, data_layout=cv.layout, out_dtype=a.out_dtype))

    def depthwise(old: Call, new: Call) -> RelayExpr | None:
        """A depthwise conv2d over a blocked input: nn.contrib_depthwise_conv2d_NCHWc."""
        if new.args[0] not in cv.blocked or not depthwise_blockable(
                old.attrs, old.args[0].checked_type, old.args[1].checked_type, x):
            return None
        cv.count_conv(old)
        return cv.mark(blocked_depthwise(new.attrs, new.args[0], new.args[1], x))

    def spatial_reduce(old: Call, new: Call) -> RelayExpr | None:
        """A float reduction (the registry's COMM_REDUCE, one input) over exactly H and W of a
        blocked input reduces the same axes of the blocks: a blocked global pool for mean /
        max, the reduction over the blocks' H, W otherwise; blocked with keepdims, else
        [N, C] reshaped (the one-pixel blocks are NCHW's order)."""
        a, data_t = old.attrs, old.args[0].checked_type
        if new.args[0] not in cv.blocked or a.exclude or a.axis is None \
                or not isinstance(old.checked_type, TensorType) \
                or old.checked_type.dtype != F32 or len(data_t.shape) != 4:
            return None
        axes = sorted(int(v) % 4 for v in ((a.axis,) if isinstance(a.axis, int) else a.axis))
        pool = _GLOBAL_POOL_OF.get(old.op.name)
        padding = cv.padding_of(new.args[0])
        if axes != [2, 3] or (padding != 0 and pool is None):
            return None  # (a sum's padding would be the padding times H * W)
        if pool is not None:
            out = pool(new.args[0], layout=cv.layout)
        else:
            attrs = {key: new.attrs[key] for key in get_def(old.op.name).attrs}
            attrs["axis"] = (2, 3)
            attrs["keepdims"] = True
            out = make_call(old.op.name, [new.args[0]], **attrs)
        if a.keepdims:
            return cv.padded(cv.mark(out), padding)
        n, c = data_t.shape[:2]
        flat = reshape(out, (n, _padded(c, x)))
        return flat if c % x == 0 else strided_slice(flat, [0], [c], axes=[1])

    def blocked_form(old: Call, new: Call, attr: str) -> RelayExpr | None:
        """An op with a blocked form (the registry's BLOCKED_FORM: pools, Winograd convs) on
        a blocked input: the same op with its layout attribute `attr` NCHW<x>c."""
        c = _any_channels(old.checked_type)
        if new.args[0] not in cv.blocked or old.attrs[attr] != "NCHW" or c is None \
                or old.attrs.get("out_dtype", "") not in ("", F32):
            return None
        padding = None  # a max pool's all-padding windows: finite, but not the input's value
        if c % x and (len(new.args) > 1 or padding_unknown(new.args[0])):
            return None  # (a Winograd conv's weight is not padded)
        name = old.op.name
        attrs = {key: new.attrs[key] for key in get_def(name).attrs}
        attrs[attr] = cv.layout
        if "out_layout" in attrs:
            attrs["out_layout"] = cv.layout
        if len(new.args) > 1:  # an op with a weight: a conv
            cv.count_conv(old)
        out = cv.mark(make_call(name, [new.args[0], *new.args[1:]], **attrs))
        if c % x:
            zero = "avg" in name and cv.padding_of(new.args[0]) == 0  # averages of zeros
            cv.pad_value[out] = 0.0 if zero else padding
        return out

    def broadcast(old: Call, new: Call) -> RelayExpr | None:
        channels = _any_channels(old.checked_type)
        if channels is None or not any(arg in cv.blocked for arg in new.args):
            return None
        padding = 0.0
        if channels % x:
            padding = padding_after(old, new, channels)
            if padding is False:
                return None
        args = [cv.operand(n, o.checked_type, channels) for n, o in zip(new.args, old.args)]
        if any(a is None for a in args):
            return None
        return cv.padded(cv.mark(Call(new.op, args, new.attrs, new.type_args, new.span)),
                         padding)

    def padding_unknown(node: RelayExpr) -> bool:
        return node in cv.pad_value and cv.pad_value[node] is None

    def padding_after(old: Call, new: Call, channels: int):
        """The padding channels' value after an elementwise / broadcast op: its reference on
        what its operands hold there (a blocked operand's padding, 0 for an operand padded
        here, a constant broadcast over channels as it is). None: finite but not one value;
        False: not finite or not known (the op then reads NCHW)."""
        values = []
        for n, o in zip(new.args, old.args):
            ty = o.checked_type
            if n in cv.blocked:
                if padding_unknown(n):
                    return False
                values.append(np.float32(cv.padding_of(n)))
            elif not isinstance(ty, TensorType) or len(ty.shape) > 4:
                return False
            elif ((1,) * (4 - len(ty.shape)) + tuple(ty.shape))[1] not in (1, channels):
                return False  # as operand(): it does not broadcast over the channels
            elif ((1,) * (4 - len(ty.shape)) + tuple(ty.shape))[1] != 1:
                values.append(np.float32(0))  # per channel: operand() pads it with zeros
            elif type(n) is Constant:
                values.append(n.data.numpy())  # the same over channels: broadcast as it is
            else:
                return False  # a variable the same over channels: unknown there
        try:
            with np.errstate(all="ignore"):
                got = np.asarray(get_def(old.op.name).reference(values, new.attrs))
        except Exception:  # noqa: BLE001 - a reference that needs full shapes: keep NCHW
            return False
        if got.dtype.kind != "f" or not np.all(np.isfinite(got)):
            return False
        return float(got.flat[0]) if np.all(got == got.flat[0]) else None

    def bias_add(old: Call, new: Call) -> RelayExpr | None:
        """bias_add over the channel axis: an add of the bias as [1, C/x, 1, 1, x]."""
        channels = _any_channels(old.checked_type)
        bias_t = old.args[1].checked_type
        if channels is None or old.attrs.axis not in (1, -3) or new.args[0] not in cv.blocked \
                or padding_unknown(new.args[0]) \
                or not isinstance(bias_t, TensorType) or tuple(bias_t.shape) != (channels,):
            return None
        bias = layout_transform(_pad_channels(reshape(new.args[1], (1, channels, 1, 1)), 4, 1,
                                              channels, x), "NCHW", cv.layout)
        return cv.padded(cv.mark(add(new.args[0], bias)), cv.padding_of(new.args[0]))

    def concat(old: Call, new: Call) -> RelayExpr | None:
        fields = new.args[0]
        if type(fields) is not Tuple or old.attrs.axis not in (1, -3) \
                or _nchw_channels(old.checked_type, x) is None \
                or not any(f in cv.blocked for f in fields.fields) \
                or any(_nchw_channels(f.checked_type, x) is None for f in old.args[0].fields):
            return None
        return cv.mark(concatenate(Tuple([cv.block(f) for f in fields.fields]), axis=1))

    rules = {"nn.contrib_conv2d_packed": conv, "nn.conv2d": depthwise, "nn.bias_add": bias_add,
             "concatenate": concat}

    # tuples a concatenate is the only reader of
    concat_tuples = {n.args[0] for n in nodes if _op_name(n) == "concatenate"
                     and type(n.args[0]) is Tuple and readers.get(n.args[0], 0) == 1}

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        name = _op_name(new)
        if name is not None:
            rule, form = rules.get(name), get_def(name).get_attr(BLOCKED_FORM)
            if form is not None:
                out = blocked_form(old, new, form)
            else:
                if rule is None and _layout_agnostic(new):
                    rule = broadcast
                elif rule is None and _spatial_reducible(new):
                    rule = spatial_reduce
                out = rule(old, new) if rule is not None else None
            if out is not None:
                if out in cv.blocked:
                    cv.nchw_shape[out] = tuple(old.checked_type.shape)
                cv.old_of[out] = old
                return out
        if old in concat_tuples:
            return new  # its concatenate decides
        if name == "concatenate" and type(new.args[0]) is Tuple:  # not blocked: NCHW fields
            fields = Tuple([cv.nchw(f) for f in new.args[0].fields], new.args[0].span)
            out = Call(new.op, [fields], new.attrs, new.type_args, new.span)
            cv.old_of[out] = old
            return out
        kids = children(new)
        out = with_children(new, [cv.nchw(k) for k in kids])
        cv.old_of[out] = old
        return out

    body = cv.nchw(rewrite_post_order(func.body, rewrite))
    if body is func.body or cv.transform_elements() \
            > guard.max_transform_elements_per_flop * cv.flops:
        return func
    return Function(func.params, body, func.ret_type, func.type_params, func.attrs, func.span)


def blocked_layout_enabled(ctx: PassContext) -> bool:
    return bool(ctx.get_config(BLOCKED_LAYOUT, True))


@register_pass
def ConvertBlockedLayout():  # noqa: N802  (a pass factory, CapWords as TVM's)
    """Carry packed convs' activations in NCHW<x>c (relay.build, opt_level 2, after the weights
    are packed and before FoldConstant; PassContext config "relayjit.blocked_layout")."""

    @function_pass(opt_level=2, name="ConvertBlockedLayout", required=["InferType"])
    def convert_blocked_layout_pass(func: Function, mod, ctx) -> Function:
        if not blocked_layout_enabled(ctx) or not codegen_options().vectorize:
            return func  # off, or a build without vectors (no blocked schedule runs)
        return convert_blocked_layout(func, guard=blocked_layout_guard(ctx))

    return convert_blocked_layout_pass
