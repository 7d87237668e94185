"""ToANormalForm: make every intermediate value explicit with a let, as TVM's to_a_normal_form.cc.

In A-normal form every argument is atomic (a var, an op, a global) and every compound
sub-expression (call, tuple, projection, constant, if, inner function) is bound once by a
let. Implicit sharing in the graph becomes explicit: a node used twice is bound once and its
var used twice. The question is *where* each let goes. Three explicit-stack phases:

1. Dependency graph. Edges go from a node to its operands. A function body and each if
   branch open a new scope; the edge into them carries that sub-scope.
2. Scopes. In topological order (users before operands), a node's scope is the lowest common
   ancestor, in the scope tree, of the scopes of all edges into it. So an expression used only
   inside one if branch is bound inside that branch; one shared by both branches, or by a
   function body and the code around it, is bound once in the enclosing scope.
3. Fill. Walk in evaluation order; each compound node, once its operands are atoms, is pushed
   onto its scope's let list under a fresh var (or under the original var for an existing
   `let`). Closing a scope (branch or body done) wraps its let list around the scope's result.
   Existing lets are flattened into their scope: `let %v = value; body` binds value to %v
   there and the let stands for body's atom. Primitive functions are left as they are (but
   bound, being compound); the outermost function is not bound.

Nothing recurses per node: a 10,000-op chain or let chain needs no recursion at all.
"""
from __future__ import annotations

from compiler.ir.expr import Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Var
from compiler.ir.module import IRModule
from compiler.ir.traversal import children, post_order, with_children
from compiler.transform import module_pass, register_pass

_ATOMS = (Var, Op, GlobalVar)


class _Scope:
    """A node of the scope tree with the let bindings placed in it so far."""

    __slots__ = ("parent", "level", "bindings", "in_function")

    def __init__(self, parent: _Scope | None = None, opens_function: bool = False):
        self.parent = parent
        self.level = 0 if parent is None else parent.level + 1
        self.in_function = opens_function or (parent is not None and parent.in_function)
        self.bindings: list = []

    def push(self, var: Var, value: RelayExpr) -> Var:
        self.bindings.append((var, value))
        return var

    def wrap(self, body: RelayExpr) -> RelayExpr:
        for var, value in reversed(self.bindings):
            body = Let(var, value, body)
        self.bindings = []
        return body


def _lca(a: _Scope, b: _Scope) -> _Scope:
    while a is not b:
        if a.level > b.level:
            a = a.parent
        elif a.level < b.level:
            b = b.parent
        else:
            a, b = a.parent, b.parent
    return a


def _edges(node: RelayExpr) -> tuple:
    """(operand, sub-scope index or None) for each operand that is not atomic."""
    kind = type(node)
    if kind is If:
        pairs = ((node.cond, None), (node.true_branch, 1), (node.false_branch, 2))
    elif kind is Function:
        pairs = () if node.is_primitive else ((node.body, 0),)
    elif kind is Let:
        pairs = ((node.value, None), (node.body, None))
    else:
        pairs = tuple((c, None) for c in children(node))
    return tuple(p for p in pairs if type(p[0]) not in _ATOMS)


def _topological(root: RelayExpr) -> list:
    """Compound nodes reachable from root, every user before its operands."""
    order = post_order(root, children_of=lambda node: tuple(c for c, _ in _edges(node)))
    order.reverse()
    return order


def _calc_scopes(root: RelayExpr) -> tuple[dict, dict]:
    """Each compound node's scope, and the sub-scopes (node, index) of bodies and branches."""
    scope: dict = {}
    subs: dict = {}
    incoming: dict = {root: _Scope()}
    for node in _topological(root):
        here = scope[node] = incoming.pop(node)
        for child, index in _edges(node):
            if index is None:
                edge = here
            else:
                edge = subs.get((node, index))
                if edge is None:
                    edge = subs[(node, index)] = _Scope(here, type(node) is Function)
            seen = incoming.get(child)
            incoming[child] = edge if seen is None else _lca(seen, edge)
    return scope, subs


class _Fill:
    """Phase 3: bind every compound node in its scope, in evaluation order."""

    def __init__(self, root: RelayExpr):
        self.scope, self.subs = _calc_scopes(root)
        self.memo: dict = {}
        self.closed: dict = {}

    def atom(self, node: RelayExpr) -> RelayExpr:
        return node if type(node) in _ATOMS else self.memo[node]

    def run(self, root: RelayExpr) -> RelayExpr:
        if type(root) in _ATOMS:
            return root
        stack = [("visit", root, None)]
        while stack:
            step, node, extra = stack.pop()
            if step == "visit":
                if type(node) not in _ATOMS and node not in self.memo:
                    self._visit(node, extra, stack)
            elif step == "build":
                self._build(node, extra)
            elif step == "close":
                branch = (node.body,) if type(node) is Function else (
                    None, node.true_branch, node.false_branch)
                result = self.atom(branch[extra])
                sub = self.subs.get((node, extra))  # none when the branch itself is atomic
                self.closed[(node, extra)] = result if sub is None else sub.wrap(result)
            elif step == "let_value":
                value = node.value
                if type(value) in _ATOMS or value in self.memo:
                    self.scope[node].push(node.var, self.atom(value))
                else:
                    stack.append(("visit", value, node.var))
            else:  # let_done
                result = self.atom(node.body)
                if extra is not None:
                    result = self.scope[node].push(extra, result)
                self.memo[node] = result
        return self.scope[root].wrap(self.atom(root))

    def _visit(self, node: RelayExpr, var: Var | None, stack: list) -> None:
        kind = type(node)
        if kind is Let:
            stack += [("let_done", node, var), ("visit", node.body, None),
                      ("let_value", node, None)]
            return
        stack.append(("build", node, var))
        if kind is Function:
            if not node.is_primitive:
                stack += [("close", node, 0), ("visit", node.body, None)]
        elif kind is If:
            stack += [("close", node, 2), ("visit", node.false_branch, None),
                      ("close", node, 1), ("visit", node.true_branch, None),
                      ("visit", node.cond, None)]
        elif kind is Call:  # arguments first, then the callee, as TVM's Fill
            stack.append(("visit", node.op, None))
            stack.extend(("visit", a, None) for a in reversed(node.args))
        else:
            stack.extend(("visit", c, None) for c in reversed(children(node)))

    def _build(self, node: RelayExpr, var: Var | None) -> None:
        kind = type(node)
        if kind is Function:
            new = node if node.is_primitive else Function(
                node.params, self.closed.pop((node, 0)), node.ret_type, node.type_params,
                node.attrs, node.span)
            if var is None and not self.scope[node].in_function:
                self.memo[node] = new  # a function outside any function stays a value
                return
        elif kind is If:
            new = If(self.atom(node.cond), self.closed.pop((node, 1)),
                     self.closed.pop((node, 2)), node.span)
        elif kind is Constant:
            new = node
        else:
            new = with_children(node, [self.atom(c) for c in children(node)])
        self.memo[node] = self.scope[node].push(var if var is not None else Var("x"), new)


def to_a_normal_form_expr(expr: RelayExpr) -> RelayExpr:
    """relay.transform.ToANormalFormExpr: the A-normal form of one expression."""
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"to_a_normal_form_expr expects a relay expression, got "
                        f"{type(expr).__name__}")
    return _Fill(expr).run(expr)


ToANormalFormExpr = to_a_normal_form_expr


@register_pass
def ToANormalForm():
    """Bind every compound sub-expression with a let, each at the scope that dominates its uses."""

    @module_pass(opt_level=1, name="ToANormalForm")
    def to_a_normal_form(mod: IRModule, ctx) -> IRModule:
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and not func.get_attr("Compiler"):
                new = to_a_normal_form_expr(func)
                if new is not func:
                    mod.update_func(gv, new)
        return mod

    return to_a_normal_form
