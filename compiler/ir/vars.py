"""free_vars / bound_vars / all_vars: which variables an expression uses and which it binds."""
from __future__ import annotations

from .expr import Function, Let, RelayExpr, Var
from .traversal import post_order


def _scan(expr: RelayExpr) -> tuple[list, set]:
    """All vars in order of first occurrence, and the set bound by a function or a let."""
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"expected a relay expression, got {type(expr).__name__}")
    order, bound = [], set()
    for node in post_order(expr):
        kind = type(node)
        if kind is Var:
            order.append(node)
        elif kind is Let:
            bound.add(node.var)
        elif kind is Function:
            bound.update(node.params)
    return order, bound


def free_vars(expr: RelayExpr) -> list:
    """Vars used but bound nowhere in expr (a module's inputs), in order of first occurrence."""
    order, bound = _scan(expr)
    return [v for v in order if v not in bound]


def bound_vars(expr: RelayExpr) -> list:
    """Vars bound in expr by function params or lets, in order of first occurrence."""
    order, bound = _scan(expr)
    return [v for v in order if v in bound]


def all_vars(expr: RelayExpr) -> list:
    """Every var in expr, free or bound, in order of first occurrence."""
    return _scan(expr)[0]
