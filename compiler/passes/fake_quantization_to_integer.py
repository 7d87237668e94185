"""FakeQuantizationToInteger: regions of float ops between qnn.dequantize and qnn.quantize
become integer ops, as TVM's pass (src/relay/transforms/fake_quantization_to_integer.cc).

A QDQ model (onnxruntime's quantizer, or relay.quantize) computes in float32 between
dequantize and quantize. Algorithm, one bottom-up walk over the function (explicit stack):

1. Every qnn.quantize is an anchor. Its subgraph is found by walking up from its argument
   through op calls, tuples and projections, stopping at qnn.dequantize calls (the leaves)
   and constants. A variable, a function call, control flow or another qnn.quantize on the
   way, no dequantize at all, or an op without a rewrite rule (the op attribute
   FTVMFakeQuantizationToInteger) leaves the anchor alone.
2. The subgraph is rewritten in topological order. A dequantize becomes its integer argument
   with the affine type (scale, zero point, dtype, axis) its parameters describe; every other
   call is handed, with its arguments rewritten, to its op's rule, which returns the integer
   expression and its affine type. Rules read the types of their arguments from the type
   map; type_map[expr] is the anchor's type, the output type for ops whose output
   parameters cannot be deduced (qnn.add's); type_map.source is the float call being
   replaced (typed: shapes and attributes).
3. The anchor becomes the rewritten argument, in the anchor's type when it differs: an int32
   accumulator through qnn.requantize (float32, ties to even: onnxruntime's requantisation),
   an 8-bit value through dequantize and quantize (the float program's own arithmetic).
A rule that cannot handle its case raises RewriteNotApplicable: the anchor keeps its float
region (hard_fail=True turns that into an error). Float values that a region reads and other
code also reads are left in place for the other readers, as in TVM.
"""
from __future__ import annotations

from compiler.errors import CompilerError
from compiler.ir.expr import Call, Constant, Function, Op, RelayExpr, Tuple, TupleGetItem
from compiler.ir.traversal import post_order, rewrite_post_order
from compiler.ir.type_infer import infer_type_local
from compiler.op.registry import get_op
from compiler.transform import function_pass, register_pass
from . import fq2i_rules  # noqa: F401  (registers the rules on the ops)
from .fq2i_types import (FQ2I, AffineTypeMap, RewriteNotApplicable, TensorAffineType,
                         TupleAffineType, register_fake_quantization_to_integer, requantize_to,
                         type_of)

__all__ = ["FakeQuantizationToInteger", "TensorAffineType", "TupleAffineType",
           "RewriteNotApplicable", "register_fake_quantization_to_integer", "FQ2I"]

_QUANTIZE, _DEQUANTIZE = get_op("qnn.quantize"), get_op("qnn.dequantize")


def _rule(node: RelayExpr):
    if type(node) is not Call or type(node.op) is not Op:
        return None
    return node.op.op_def.get_attr(FQ2I)


def _affine_of(call: Call, dtype: str) -> TensorAffineType:
    ndim = len(type_of(call.args[0]).shape)
    axis = call.attrs.axis
    return TensorAffineType(call.args[1], call.args[2], dtype,
                            axis % ndim if ndim and -ndim <= axis < ndim else -1)


def _extract(anchor: Call) -> list | None:
    """The subgraph below an anchor (original nodes, in topological order), or None."""
    nodes, seen, stack, leaves = [], set(), [anchor.args[0]], 0
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        kind = type(node)
        if kind is Constant:
            continue
        if kind is Call and type(node.op) is Op:
            if node.op is _QUANTIZE:
                return None
            nodes.append(node)
            if node.op is _DEQUANTIZE:
                leaves += 1
            else:
                stack.extend(node.args)
        elif kind is Tuple:
            nodes.append(node)
            stack.extend(node.fields)
        elif kind is TupleGetItem:
            nodes.append(node)
            stack.append(node.tuple_value)
        else:  # a variable, a function call, control flow: not a fake-quantized region
            return None
    if not leaves:
        return None
    order = {n: i for i, n in enumerate(post_order(anchor.args[0]))}
    return sorted(nodes, key=order.__getitem__)


def _rewrite_region(anchor: Call, memo: dict, hard_fail: bool) -> RelayExpr | None:
    nodes = _extract(anchor)
    if nodes is None:
        return None
    missing = [n.op.name for n in nodes if type(n) is Call and n.op is not _DEQUANTIZE
               and _rule(n) is None]
    if missing:
        if hard_fail:
            raise CompilerError(f"FakeQuantizationToInteger: no rewrite rule for "
                                f"{sorted(set(missing))} below {anchor.op.name}")
        return None
    out_type = _affine_of(anchor, anchor.attrs.out_dtype)
    new: dict = {}   # original node -> rewritten expression
    types: dict = {}  # original node -> affine type

    def arg(a):
        return new[a] if a in new else memo.get(a, a)
    try:
        for node in nodes:
            if type(node) is Tuple:
                new[node] = Tuple([arg(f) for f in node.fields])
                if any(f not in types for f in node.fields):
                    raise RewriteNotApplicable("a tuple field is not quantized")
                types[node] = TupleAffineType(tuple(types[f] for f in node.fields))
            elif type(node) is TupleGetItem:
                new[node] = TupleGetItem(arg(node.tuple_value), node.index)
                types[node] = types[node.tuple_value].types[node.index]
            elif node.op is _DEQUANTIZE:
                new[node] = arg(node.args[0])
                leaf = _affine_of(node, type_of(node.args[0]).dtype)
                types[node] = TensorAffineType(arg(node.args[1]), arg(node.args[2]),
                                               leaf.dtype, leaf.axis)
            else:
                call = Call(node.op, [arg(a) for a in node.args], node.attrs)
                type_map = AffineTypeMap({call.args[i]: types[a]
                                          for i, a in enumerate(node.args) if a in types})
                type_map[call] = out_type
                type_map.source = node
                new[node], types[node] = _rule(node)(call, type_map)
        top = anchor.args[0]
        return requantize_to(new[top], types[top], TensorAffineType(
            arg(anchor.args[1]), arg(anchor.args[2]), out_type.dtype, out_type.axis))
    except RewriteNotApplicable as err:
        if hard_fail:
            raise CompilerError(f"FakeQuantizationToInteger: {err}") from None
        return None


def fake_quantization_to_integer(func: Function, hard_fail: bool = False) -> Function:
    """func with its fake-quantized regions in integer ops."""
    func = infer_type_local(func)  # a pass called directly gets no InferType first
    memo: dict = {}

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if type(old) is Call and old.op is _QUANTIZE:
            region = _rewrite_region(old, memo, hard_fail)
            if region is not None:
                return region
        return new
    return rewrite_post_order(func, rewrite, memo)


@register_pass
def FakeQuantizationToInteger(hard_fail: bool = False, use_qat: bool = False,
                              optional_qnn_ops=None):
    """Rewrite dequantize -> float ops -> quantize regions as integer QNN ops (TVM's pass).

    The activations TVM converts only when listed in optional_qnn_ops (softmax, sigmoid, ...)
    are always converted here: their QNN ops are defined as the same float computation."""
    if use_qat:
        raise CompilerError("FakeQuantizationToInteger(use_qat=True) is not supported: "
                            "relayjit rewrites regions that end in qnn.quantize")

    @function_pass(opt_level=0, name="FakeQuantizationToInteger", required=["InferType"])
    def fq2i(func: Function, mod, ctx) -> Function:
        if not any(type(n) is Call and n.op is _QUANTIZE for n in post_order(func)):
            return func
        return fake_quantization_to_integer(func, hard_fail)

    return fq2i


