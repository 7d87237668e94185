"""Which ONNX ops take bfloat16 (or float8) tensors: those whose results do not depend on
where rounding happens (casts, data movement, comparisons, selections).

relayjit computes bfloat16 as it computes float16: each op in float32, its result rounded to
bfloat16 (codegen/tir/half.py). ONNX's reference, and the conformance data made with it,
computes a bfloat16 graph in float32 and rounds where the graph casts and at its outputs, so
an arithmetic op (Celu, MatMul, Softmax...) can differ from it in the last bit. Rather than
give such a different answer, the frontend refuses arithmetic on bfloat16 tensors, naming the
node; a model casts to float32 for that part (as most bfloat16 exports of CPU models do).
The float8 and sub-byte integer types hold data only (codegen/tir/dtype.py DATA_ONLY): the
same ops take them, except comparisons and selections, which would compute on them.
"""
from __future__ import annotations

from codegen.tir.dtype import DATA_ONLY
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


COMPUTING_OPS = frozenset({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                           "IsNaN", "IsInf", "Max", "Min", "ArgMax", "ArgMin", "ReduceMax",
                           "ReduceMin", "TopK", "Abs", "Neg", "Relu", "Sign", "Unique",
                           "NonZero", "Compress"})


def _narrow_dtype(ty) -> str | None:
    """The first bfloat16 or data-only element type in ty (a tensor or tuples of them)."""
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, TensorType) and (t.dtype == "bfloat16" or t.dtype in DATA_ONLY):
            return t.dtype
    return None


# they take data-only values to cast them to float32 (or give them by a cast)
CASTING_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


def check_bfloat16(ctx, inputs: list) -> None:
    """A node computing on bfloat16 inputs must be one of EXACT_OPS, and on float8 or
    sub-byte int inputs one of those that only move data (see the docstring)."""
    op_type = ctx.node.op_type
    if op_type in EXACT_OPS and op_type not in COMPUTING_OPS:
        return
    for value in inputs:
        if value is None or isinstance(value, OptionalValue):
            continue
        dtype = _narrow_dtype(infer_type(value, ctx.graph.types))
        if dtype == "bfloat16" and op_type not in EXACT_OPS:
            raise ctx.error(f"{op_type} on bfloat16 tensors is not supported: "
                            "relayjit rounds each op's bfloat16 result, ONNX's reference "
                            "computes in float32 and rounds once; cast to float32 first")
        if dtype in DATA_ONLY and op_type not in CASTING_OPS:
            raise ctx.error(f"{op_type} on {dtype} tensors is not supported: {dtype} values "
                            "are only cast and moved; cast to float32 first")
