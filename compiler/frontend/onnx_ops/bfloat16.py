"""Which ONNX ops take bfloat16 tensors: those whose results do not depend on where rounding
happens (casts, data movement, comparisons, selections).

relayjit computes bfloat16 as it computes float16: each op in float32, its result rounded to
bfloat16 (codegen/tir/half.py). ONNX's reference, and the conformance data made with it,
computes a bfloat16 graph in float32 and rounds where the graph casts and at its outputs, so
an arithmetic op (Celu, MatMul, Softmax...) can differ from it in the last bit. Rather than
give such a different answer, the frontend refuses arithmetic on bfloat16 tensors, naming the
node; a model casts to float32 for that part (as most bfloat16 exports of CPU models do).
"""
from __future__ import annotations

from compiler.ir.types import TensorType, TupleType

from .common import OptionalValue, infer_type

EXACT_OPS = frozenset({
    # casts and constants
    "Cast", "CastLike", "Constant", "ConstantOfShape", "Identity", "Shape", "Size",
    # data movement
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
    "Gather", "GatherElements", "GatherND", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
    "ReverseSequence", "OneHot", "Compress", "Unique", "NonZero", "Where", "ScatterElements",
    "ScatterND", "Trilu", "Pad",
    # comparisons and selections
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "IsNaN", "IsInf", "Max",
    "Min", "ArgMax", "ArgMin", "ReduceMax", "ReduceMin", "TopK", "Abs", "Neg", "Relu", "Sign",
    # sequences and optionals hold tensors without computing on them
    "SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase", "SequenceLength",
    "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
    "OptionalHasElement", "If", "Loop", "Scan", "SequenceMap",
})


def _has_bfloat16(ty) -> bool:
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, TensorType) and t.dtype == "bfloat16":
            return True
    return False


def check_bfloat16(ctx, inputs: list) -> None:
    """A node computing on bfloat16 inputs must be one of EXACT_OPS (see the docstring)."""
    if ctx.node.op_type in EXACT_OPS:
        return
    for value in inputs:
        if value is None or isinstance(value, OptionalValue):
            continue
        if _has_bfloat16(infer_type(value, ctx.graph.types)):
            raise ctx.error(f"{ctx.node.op_type} on bfloat16 tensors is not supported: "
                            "relayjit rounds each op's bfloat16 result, ONNX's reference "
                            "computes in float32 and rounds once; cast to float32 first")
