"""well_formed: each var is bound once, and a bound var is only used inside its scope."""
from __future__ import annotations

from compiler.ir.expr import Function, Let, RelayExpr, Var
from compiler.ir.traversal import children

_EXIT = object()


def well_formed(expr: RelayExpr) -> bool:
    """True when no var is bound twice (by params or lets) or used outside its binding's scope.

    Walks with an explicit stack that records scope exits; shared sub-expressions are checked
    at their first occurrence only (as TVM's memoised checker does)."""
    bound_ever: set = set()
    in_scope: set = set()
    seen: set = set()
    stack: list = [(expr, None)]
    while stack:
        node, scoped = stack.pop()
        if node is _EXIT:
            in_scope.difference_update(scoped)
            continue
        if type(node) is Var:
            if node not in in_scope and node in bound_ever:
                return False
            continue
        if node in seen:
            continue
        seen.add(node)
        kind = type(node)
        if kind is Let or kind is Function:
            binds = (node.var,) if kind is Let else node.params
            for v in binds:
                if v in bound_ever:
                    return False
                bound_ever.add(v)
                in_scope.add(v)
            stack.append((_EXIT, binds))
            todo = (node.value, node.body) if kind is Let else (node.body,)
        else:
            todo = children(node)
        stack.extend((c, None) for c in reversed(todo))
    return True
