"""Which expressions are built from constants only (FoldConstant would turn them into one)."""
from __future__ import annotations

from compiler.ir.expr import Call, Constant, Op, RelayExpr, Tuple, TupleGetItem


def is_constant_foldable(node: RelayExpr, known: dict) -> bool:
    """True when node computes from constants only; `known` holds the answer for its children
    (callers walk bottom-up and record each answer, so this never recurses)."""
    kind = type(node)
    if kind is Constant:
        return True
    if kind is Call:
        return isinstance(node.op, Op) and bool(node.args) and \
            not node.op.op_def.stateful and all(known.get(a, False) for a in node.args)
    if kind is Tuple:
        return all(known.get(f, False) for f in node.fields)
    if kind is TupleGetItem:
        return known.get(node.tuple_value, False)
    return False
