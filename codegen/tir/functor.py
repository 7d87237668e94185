"""Generic traversal of expressions: children, rebuild, substitute (iterative, memoised DAGs)."""
from __future__ import annotations

from typing import Callable

from .expr import (
    BinaryOp, Call, Cast, Expr, FloatImm, IfThenElseExpr, IntImm, Load, Not, Reduce, Reinterpret,
    Select, Var,
)


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions of e."""
    t = type(e)
    if t is BinaryOp:
        return (e.a, e.b)
    if t is Load:
        return e.indices
    if t is Cast or t is Not or t is Reinterpret:
        return (e.a,) if t is Not else (e.value,)
    if t is Select or t is IfThenElseExpr:
        return (e.cond, e.a, e.b)
    if t is Call:
        return e.args
    if t is Reduce:
        return (e.source,) if e.where is None else (e.source, e.where)
    return ()


def with_children(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """e rebuilt with new children (returns e itself when nothing changed)."""
    old = children(e)
    if all(a is b for a, b in zip(old, new)):
        return e
    t = type(e)
    if t is BinaryOp:
        return BinaryOp(e.kind, new[0], new[1], e.dtype)
    if t is Load:
        return Load(e.buffer, tuple(new), e.dtype)
    if t is Cast:
        return Cast(e.dtype, new[0])
    if t is Reinterpret:
        return Reinterpret(e.dtype, new[0])
    if t is Not:
        return Not(new[0])
    if t is Select:
        return Select(new[0], new[1], new[2], e.dtype)
    if t is IfThenElseExpr:
        return IfThenElseExpr(new[0], new[1], new[2], e.dtype)
    if t is Call:
        return Call(e.name, tuple(new), e.dtype)
    if t is Reduce:
        return Reduce(e.kind, new[0], e.axis, e.dtype, new[1] if len(new) > 1 else None)
    raise TypeError(f"with_children: {t.__name__} has no children")


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None], memo: dict | None = None) -> Expr:
    """Post-order rebuild: fn(node with rewritten children) returns a replacement or None.

    Iterative (explicit stack) and memoised on node identity, so depth and sharing are free:
    a chain of 10^5 nodes or a DAG with exponentially many paths costs one visit per node.
    """
    memo = {} if memo is None else memo
    got = memo.get(id(e))
    if got is not None:
        return got[1]
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in memo:
            continue
        kids = children(node)
        if not expanded and kids:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(kids) if id(c) not in memo)
            continue
        new = with_children(node, tuple(memo[id(c)][1] for c in kids)) if kids else node
        out = fn(new)
        memo[id(node)] = (node, new if out is None else out)  # keep node alive: ids stay unique
    return memo[id(e)][1]


def substitute(e: Expr, mapping: dict[Var, Expr]) -> Expr:
    """Replace variables by expressions (sharing is preserved)."""
    if not mapping:
        return e
    return rewrite(e, lambda n: mapping.get(n) if type(n) is Var else None)


def post_order(e: Expr) -> list[Expr]:
    """Unique nodes of e, children before parents."""
    seen: set[int] = set()
    out: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for c in reversed(children(node)):
            if id(c) not in seen:
                stack.append((c, False))
    return out


def is_leaf(e: Expr) -> bool:
    """True for constants and variables."""
    return type(e) in (IntImm, FloatImm, Var)
