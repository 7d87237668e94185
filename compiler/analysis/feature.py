"""detect_feature: which kinds of Relay constructs a program uses (TVM's relay.analysis.Feature).

Passes use it to state what they accept (ToANormalForm's output has fLet and no fGraph, ...).
fGraph means a non-atomic node is used in more than one place (the program is a DAG, not a
tree); fLetRec means a let var occurs in its own value. The inside of a Primitive function is
not looked at, as in TVM. Ref, ADT constructor and match features exist in the enum for
TVM's numbering; relayjit's IR has no such nodes, so they are never reported.
"""
from __future__ import annotations

from enum import IntEnum

from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr,
                              Tuple, TupleGetItem, Var)
from compiler.ir.module import IRModule
from compiler.ir.traversal import children, post_order


class Feature(IntEnum):
    """TVM's feature numbering."""

    fVar = 0  # noqa: N815  (TVM's names)
    fGlobalVar = 1  # noqa: N815
    fConstant = 2  # noqa: N815
    fTuple = 3  # noqa: N815
    fTupleGetItem = 4  # noqa: N815
    fFunction = 5  # noqa: N815
    fOp = 6  # noqa: N815
    fCall = 7  # noqa: N815
    fLet = 8  # noqa: N815
    fIf = 9  # noqa: N815
    fRefCreate = 10  # noqa: N815
    fRefRead = 11  # noqa: N815
    fRefWrite = 12  # noqa: N815
    fConstructor = 13  # noqa: N815
    fMatch = 14  # noqa: N815
    fGraph = 15  # noqa: N815
    fLetRec = 16  # noqa: N815


_NODE_FEATURE = {Var: Feature.fVar, GlobalVar: Feature.fGlobalVar, Constant: Feature.fConstant,
                 Tuple: Feature.fTuple, TupleGetItem: Feature.fTupleGetItem,
                 Function: Feature.fFunction, Op: Feature.fOp, Call: Feature.fCall,
                 Let: Feature.fLet, If: Feature.fIf}
_ATOMIC = (Var, GlobalVar, Constant, Op)


def _expand(node: RelayExpr) -> bool:
    return not (type(node) is Function and node.is_primitive)


def _expr_features(expr: RelayExpr) -> set:
    found: set = set()
    referenced: set = set()
    for node in post_order(expr, expand=_expand):
        found.add(_NODE_FEATURE[type(node)])
        if not _expand(node):
            continue
        for child in children(node):
            if isinstance(child, _ATOMIC):
                continue
            if child in referenced:
                found.add(Feature.fGraph)
            referenced.add(child)
        if type(node) is Let and node.var in post_order(node.value, expand=_expand):
            found.add(Feature.fLetRec)
    return found


def detect_feature(a, b=None) -> set:
    """The set of Features used by an expression and/or an IRModule (either order)."""
    if isinstance(a, IRModule):
        a, b = b, a
    found: set = set()
    if a is not None:
        found |= _expr_features(a)
    if b is not None:
        for func in b.functions.values():
            found |= _expr_features(func)
    return found
