"""ExprVisitor / ExprMutator with TVM's method names, memoised and non-recursive on data flow.

Like TVM's MixedModeMutator: calls, tuples, tuple projections and let chains are expanded
with an explicit stack before their parents are dispatched, so the visit_* methods find
their children already in the memo. Function bodies and If branches are entered when the
visit_function / visit_if method asks for them, so overriding those methods can stop descent.
"""
from __future__ import annotations

from .expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,
                   TupleGetItem, Var)
from .traversal import post_order

_EXPANDED = (Call, Tuple, TupleGetItem, Let)
_METHODS = {Var: "visit_var", Constant: "visit_constant", Op: "visit_op",
            GlobalVar: "visit_global_var", Call: "visit_call", Tuple: "visit_tuple",
            TupleGetItem: "visit_tuple_getitem", Let: "visit_let", If: "visit_if",
            Function: "visit_function"}


def _expand(node) -> bool:
    return type(node) in _EXPANDED


class ExprFunctor:
    """Dispatch on the node type to visit_<kind>, memoising results by node identity."""

    def __init__(self):
        self.memo_map: dict = {}

    def visit(self, expr: RelayExpr):
        memo = self.memo_map
        if expr in memo:
            return memo[expr]
        if not isinstance(expr, RelayExpr):
            raise TypeError(f"{type(self).__name__}.visit expects a relay expression, got "
                            f"{type(expr).__name__}")
        for node in post_order(expr, memo, _expand):
            if node not in memo:
                memo[node] = getattr(self, _METHODS[type(node)])(node)
        return memo[expr]


class ExprVisitor(ExprFunctor):
    """Visits every node once; override visit_* to look at nodes."""

    def visit_var(self, var):
        return None

    def visit_constant(self, const):
        return None

    def visit_op(self, op):
        return None

    def visit_global_var(self, gv):
        return None

    def visit_call(self, call):
        self.visit(call.op)
        for arg in call.args:
            self.visit(arg)

    def visit_tuple(self, tup):
        for field in tup.fields:
            self.visit(field)

    def visit_tuple_getitem(self, item):
        self.visit(item.tuple_value)

    def visit_let(self, let):
        self.visit(let.var)
        self.visit(let.value)
        self.visit(let.body)

    def visit_if(self, node):
        self.visit(node.cond)
        self.visit(node.true_branch)
        self.visit(node.false_branch)

    def visit_function(self, fn):
        for param in fn.params:
            self.visit(param)
        self.visit(fn.body)


class ExprMutator(ExprFunctor):
    """Rebuilds changed nodes; returns the very same node when no child changed."""

    def visit_var(self, var):
        return var

    def visit_constant(self, const):
        return const

    def visit_op(self, op):
        return op

    def visit_global_var(self, gv):
        return gv

    def visit_call(self, call):
        op = self.visit(call.op)
        args = [self.visit(a) for a in call.args]
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return Call(op, args, call.attrs, call.type_args, call.span)

    def visit_tuple(self, tup):
        fields = [self.visit(f) for f in tup.fields]
        if all(a is b for a, b in zip(fields, tup.fields)):
            return tup
        return Tuple(fields, tup.span)

    def visit_tuple_getitem(self, item):
        value = self.visit(item.tuple_value)
        if value is item.tuple_value:
            return item
        return TupleGetItem(value, item.index, item.span)

    def visit_let(self, let):
        var, value, body = self.visit(let.var), self.visit(let.value), self.visit(let.body)
        if var is let.var and value is let.value and body is let.body:
            return let
        return Let(var, value, body, let.span)

    def visit_if(self, node):
        cond = self.visit(node.cond)
        then, other = self.visit(node.true_branch), self.visit(node.false_branch)
        if cond is node.cond and then is node.true_branch and other is node.false_branch:
            return node
        return If(cond, then, other, node.span)

    def visit_function(self, fn):
        params = [self.visit(p) for p in fn.params]
        body = self.visit(fn.body)
        if body is fn.body and all(a is b for a, b in zip(params, fn.params)):
            return fn
        return Function(params, body, fn.ret_type, fn.type_params, fn.attrs, fn.span)
