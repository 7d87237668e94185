"""Explicit-stack graph traversal: nothing here recurses per node, so 10,000-node chains are fine."""
from __future__ import annotations

from typing import Callable, Iterable

from .expr import Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple, TupleGetItem, Var


def children(node: RelayExpr) -> tuple:
    """The sub-expressions of a node, in evaluation (and printing) order."""
    kind = type(node)
    if kind is Call:
        return (node.op, *node.args)
    if kind is Tuple:
        return node.fields
    if kind is TupleGetItem:
        return (node.tuple_value,)
    if kind is Let:
        return (node.var, node.value, node.body)
    if kind is If:
        return (node.cond, node.true_branch, node.false_branch)
    if kind is Function:
        return (*node.params, node.body)
    return ()


def post_order(root: RelayExpr, visited: set | dict | None = None,
               expand: Callable[[RelayExpr], bool] | None = None,
               children_of: Callable[[RelayExpr], tuple] = children) -> list:
    """Every node reachable from root once, children before parents.

    Nodes in `visited` are neither returned nor expanded (it is read, never copied or changed,
    so a growing memo table costs nothing per call); `expand(node)` False keeps a node's
    children out (the node itself is still returned); `children_of` replaces `children` when a
    traversal follows other edges (ToANormalForm's non-atomic operands)."""
    done = () if visited is None else visited
    seen: set = set()
    order = []
    stack = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if ready:
            order.append(node)
            continue
        if node in seen or node in done:
            continue
        seen.add(node)
        stack.append((node, True))
        if expand is None or expand(node):
            for child in reversed(children_of(node)):
                if child not in seen and child not in done:
                    stack.append((child, False))
    return order


def post_order_visit(expr: RelayExpr, fvisit: Callable[[RelayExpr], None]) -> None:
    """relay.analysis.post_order_visit: call fvisit on every node once, children first."""
    for node in post_order(expr):
        fvisit(node)


def rewrite_post_order(root: RelayExpr, rewrite: Callable[[RelayExpr, RelayExpr], RelayExpr],
                       memo: dict | None = None) -> RelayExpr:
    """Rebuild root bottom-up: rewrite(old, with_new_children) gives each node's replacement.

    with_new_children is `old` itself when no child changed, so identity is preserved."""
    memo = {} if memo is None else memo
    for node in post_order(root, memo):
        memo[node] = rewrite(node, with_children(node, [memo.get(c, c) for c in children(node)]))
    return memo[root] if root in memo else root


def with_children(node: RelayExpr, new: list) -> RelayExpr:
    """The node rebuilt over new children (the same object when nothing changed)."""
    old = children(node)
    if all(a is b for a, b in zip(old, new)):
        return node
    kind = type(node)
    if kind is Call:
        return Call(new[0], new[1:], node.attrs, node.type_args, node.span)
    if kind is Tuple:
        return Tuple(new, node.span)
    if kind is TupleGetItem:
        return TupleGetItem(new[0], node.index, node.span)
    if kind is Let:
        return Let(new[0], new[1], new[2], node.span)
    if kind is If:
        return If(new[0], new[1], new[2], node.span)
    if kind is Function:
        return Function(new[:-1], new[-1], node.ret_type, node.type_params, node.attrs, node.span)
    raise TypeError(f"{kind.__name__} has no children to replace")


LEAF_TYPES = (Var, Constant, Op, GlobalVar)


def iter_nodes(roots: Iterable[RelayExpr]) -> list:
    """post_order over several roots sharing one visited set."""
    seen: set = set()
    order = []
    for root in roots:
        part = post_order(root, seen)
        seen.update(part)
        order.extend(part)
    return order
