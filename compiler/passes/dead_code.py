"""DeadCodeElimination: drop (and optionally inline) let bindings, as TVM's dead_code.cc.

Data-flow nodes nobody uses are already gone (nothing points at them); what remains dead are
let bindings. The pass works per global function in three explicit-stack phases:

1. Purity. A let-bound value may be dropped or moved only if evaluating it is pure. Calls to
   stateful ops (OpDef.stateful, e.g. nn.dropout) are impure; a call of a function (literal,
   let-bound, or global) is as pure as that function's body; calls through function-typed
   parameters or tuple fields are assumed impure. `ignore_impurity=True` treats all as pure.
2. Usage. Walk the function counting uses of each let var. The value of a *pure* let is only
   walked once its var has its first use, so a chain of dead lets (x used only by dead y)
   dies in one run. Impure values are always walked. A var used inside a function nested
   below its binding counts twice (the function may run many times, so never inline into it).
   Each node is expanded at most twice: enough to tell 0, 1 and "many" uses apart.
3. Rewrite, bottom-up: a pure let with no use is replaced by its body; with
   `inline_once=True` a pure let used exactly once is replaced by its body and the use by the
   (rewritten) value. Let chains are flattened on the explicit stack, never recursed.

Registered as a module pass (opt_level 1, requires InferType) like TVM's, so it does not run a
trailing InferType of its own.
"""
from __future__ import annotations

from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,
                              TupleGetItem, Var)
from compiler.ir.module import IRModule
from compiler.ir.traversal import children, with_children
from compiler.ir.types import FuncType
from compiler.transform import module_pass, register_pass

_PURE = (True, True)  # (pure to evaluate, pure to call)


def _first_order(expr: RelayExpr) -> bool:
    ty = expr._checked_type
    if ty is None and type(expr) is Var:
        ty = expr.type_annotation
    return not isinstance(ty, FuncType)


class _Purity:
    """Purity of every let-bound value of the module's functions (phase 1)."""

    def __init__(self, mod: IRModule | None):
        self.mod = mod
        self.var_purity: dict = {}
        self.global_purity: dict = {}
        self.memo: dict = {}

    def of_global(self, gv: GlobalVar) -> tuple:
        if gv in self.global_purity:
            return self.global_purity[gv]
        func = self.mod[gv] if self.mod is not None and gv in self.mod else None
        if not isinstance(func, Function) or func.get_attr("Extern"):
            return (True, False)  # externals are assumed call-impure
        self.global_purity[gv] = _PURE  # a recursive call assumes the body is pure
        self.global_purity[gv] = self.analyse(func)
        return self.global_purity[gv]

    def _var(self, var: Var) -> tuple:
        return (True, self.var_purity.get(var, _PURE)[1])

    def _get(self, node: RelayExpr) -> tuple:
        if type(node) is Var:
            return self._var(node)
        if type(node) is GlobalVar:
            return (True, self.of_global(node)[1])
        return self.memo[node]

    def analyse(self, root: RelayExpr) -> tuple:
        # explicit stack: a let var's purity is recorded after its value and before its body,
        # a function's parameters before its body (uses look their var up when reached)
        stack = [("visit", root)]
        while stack:
            step, node = stack.pop()
            if step == "exit":
                self.memo[node] = self._node(node)
            elif step == "bind":
                self.var_purity[node.var] = self._get(node.value)
            elif node not in self.memo and type(node) not in (Var, GlobalVar):
                kind = type(node)
                stack.append(("exit", node))
                if kind is Let:
                    stack += [("visit", node.body), ("bind", node), ("visit", node.value)]
                    continue
                if kind is Function:
                    for p in node.params:
                        self.var_purity[p] = (True, _first_order(p))
                    stack.append(("visit", node.body))
                    continue
                stack.extend(("visit", c) for c in reversed(children(node)))
        return self._get(root)

    def _node(self, node: RelayExpr) -> tuple:
        kind = type(node)
        if kind is Constant:
            return _PURE
        if kind is Op:
            return (True, not node.op_def.stateful)
        if kind is Function:
            body = self._get(node.body)
            return (True, body[0] and body[1])
        if kind is Let:
            value, body = self._get(node.value), self._get(node.body)
            return (value[0] and body[0], body[1])
        if kind is Call:
            callee = self._get(node.op)
            args = all(self._get(a)[0] for a in node.args)
            return (args and callee[0] and callee[1], _first_order(node) or callee[1])
        if kind is If:
            parts = [self._get(c) for c in (node.cond, node.true_branch, node.false_branch)]
            return (all(p[0] for p in parts), parts[1][1] and parts[2][1])
        if kind is Tuple:
            return (all(self._get(f)[0] for f in node.fields), True)
        if kind is TupleGetItem:
            return (self._get(node.tuple_value)[0], _first_order(node))
        return _PURE


class _Usage:
    """Use counts of let vars, walking pure let values only once they are used (phase 2)."""

    def __init__(self, is_pure):
        self.is_pure = is_pure
        self.values: dict = {}  # let var -> bound value
        self.uses: dict = {}
        self.level: dict = {}  # let var -> function nesting level of its binding
        self.visits: dict = {}

    def run(self, root: RelayExpr) -> None:
        stack = [(root, 0)]
        while stack:
            node, level = stack.pop()
            count = self.visits.get(node, 0) + 1
            self.visits[node] = count
            if count > 2:
                continue
            kind = type(node)
            if kind is Var:
                self._use(node, level, stack)
            elif kind is Let:
                self._bind(node, level, stack)
            elif kind is Function:
                stack.append((node.body, level + 1))
            else:
                stack.extend((child, level) for child in reversed(children(node)))

    def _bind(self, let: Let, level: int, stack: list) -> None:
        var = let.var
        self.values[var] = let.value
        self.uses.setdefault(var, 0)
        self.level[var] = level
        stack.append((let.body, level))
        if not self.is_pure(var):
            stack.append((let.value, level))  # must be evaluated whether used or not

    def _use(self, var: Var, level: int, stack: list) -> None:
        if var not in self.values:
            return  # a parameter or a free var
        self.uses[var] += 1
        if self.uses[var] == 1 and self.is_pure(var):
            stack.append((self.values[var], self.level[var]))
        if self.level[var] < level:
            self.uses[var] += 1


def _eliminate(root: RelayExpr, action) -> RelayExpr:
    """Phase 3: rebuild root bottom-up, eliding/inlining lets as `action(var)` says."""
    memo: dict = {}
    done: set = set()
    stack = [(root, False)]
    while stack:
        node, ready = stack.pop()
        kind = type(node)
        if ready:
            memo[node] = _rebuild(node, memo, action)
            continue
        if node in done:
            continue
        done.add(node)
        stack.append((node, True))
        if kind is Let:
            kids = (node.body,) if action(node.var) == "elide" else (node.value, node.body)
        elif kind is Var:
            kids = (action.values[node],) if action(node) == "inline" else ()
        elif kind is Function:
            kids = (node.body,)
        else:
            kids = children(node)
        stack.extend((k, False) for k in reversed(kids) if k not in done)
    return memo[root]


def _rebuild(node: RelayExpr, memo: dict, action) -> RelayExpr:
    kind = type(node)
    if kind is Var:
        if action(node) == "inline":
            return memo.get(action.values[node], node)
        return node
    if kind is Let:
        if action(node.var) != "keep":
            return memo[node.body]
        value, body = memo[node.value], memo[node.body]
        if value is node.value and body is node.body:
            return node
        return Let(node.var, value, body, node.span)
    if kind is Function:
        body = memo[node.body]
        if body is node.body:
            return node
        return Function(node.params, body, node.ret_type, node.type_params, node.attrs,
                        node.span)
    return with_children(node, [memo.get(c, c) for c in children(node)])


class _Action:
    """What to do with each let var: keep, elide (no use) or inline (one use)."""

    def __init__(self, usage: _Usage, inline_once: bool):
        self.values = usage.values
        self.usage = usage
        self.inline_once = inline_once

    def __call__(self, var: Var) -> str:
        if var not in self.values or not self.usage.is_pure(var):
            return "keep"
        uses = self.usage.uses.get(var, 0)
        if uses == 0:
            return "elide"
        if uses == 1 and self.inline_once:
            return "inline"
        return "keep"


def eliminate_dead_code(expr: RelayExpr, inline_once: bool = False,
                        ignore_impurity: bool = False, mod: IRModule | None = None) -> RelayExpr:
    """DCE over one expression (a module gives the purity of the global functions it calls)."""
    if ignore_impurity:
        def is_pure(var):
            return True
    else:
        purity = _Purity(mod)
        purity.analyse(expr)

        def is_pure(var):
            return purity.var_purity.get(var, _PURE)[0]
    usage = _Usage(is_pure)
    usage.run(expr)
    return _eliminate(expr, _Action(usage, inline_once))


@register_pass
def DeadCodeElimination(inline_once: bool = False, ignore_impurity: bool = False):
    """Remove unused let bindings; with inline_once, inline the ones used exactly once."""

    @module_pass(opt_level=1, name="DeadCodeElimination", required=["InferType"])
    def dead_code_elimination(mod: IRModule, ctx) -> IRModule:
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                new = eliminate_dead_code(func, inline_once, ignore_impurity, mod)
                if new is not func:
                    mod.update_func(gv, new)
        return mod

    return dead_code_elimination
