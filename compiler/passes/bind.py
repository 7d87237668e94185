"""relay.bind: substitute expressions for variables.

Algorithm (TVM's relay::Bind):
1. Normalise the keys: a Var keys itself; a str key names a free var of the expression or, for
   a function, one of its parameters (by name_hint). A name nothing has, or a name shared by
   several candidates, is a BindError naming it. Values that are not expressions go through
   relay.const.
2. Reject vars the expression binds itself (let vars, an inner function's parameters): their
   value is fixed by the program, not by the caller.
3. Substitute bottom-up with one explicit-stack post-order walk (rewrite_post_order), so a
   10,000-node chain needs no recursion. Bound values are spliced in, never re-walked.
4. For a Function, the bound parameters leave the parameter list. Free vars that the bound-in
   expressions brought along become new trailing parameters (so the result stays closed when
   the input was), in order of first occurrence.
"""
from __future__ import annotations

from typing import Any, Mapping

from compiler.analysis import free_vars
from compiler.errors import BindError
from compiler.ir.expr import Function, Let, RelayExpr, Var, const
from compiler.ir.traversal import post_order, rewrite_post_order


def _as_expr(key: str, value: Any) -> RelayExpr:
    if isinstance(value, RelayExpr):
        return value
    try:
        return const(value)
    except (TypeError, ValueError) as err:
        raise BindError(f"bind: the value for {key} must be a relay expression or a tensor "
                        f"value, got {type(value).__name__}: {err}") from None


def _internally_bound(expr: RelayExpr, outer: Function | None) -> dict:
    """Var -> what binds it ('a let' / "an inner function's parameters") inside expr."""
    bound: dict = {}
    for node in post_order(expr):
        if type(node) is Let:
            bound[node.var] = "a let"
        elif type(node) is Function and node is not outer:
            for param in node.params:
                bound[param] = "an inner function's parameters"
    return bound


def _name_of(var: Var) -> str:
    return f"%{var.name_hint}"


def _resolve(expr: RelayExpr, binds: Mapping, bound: dict) -> dict:
    """Turn the user's {Var | name: value} into {Var: Expr}, checking every key."""
    func = expr if isinstance(expr, Function) else None
    candidates = list(func.params) if func is not None else []
    candidates += [v for v in free_vars(expr) if v not in candidates]
    by_name: dict[str, list] = {}
    for v in candidates:
        by_name.setdefault(v.name_hint, []).append(v)
    resolved: dict = {}
    for key, value in binds.items():
        if isinstance(key, Var):
            var = key
        elif isinstance(key, str):
            found = by_name.get(key, [])
            if len(found) > 1:
                raise BindError(f"cannot bind {key!r}: {len(found)} variables are named "
                                f"%{key}; bind by Var instead")
            if not found:
                inner = [v for v in bound if v.name_hint == key]
                if inner:
                    raise BindError(f"cannot bind %{key}: it is bound by {bound[inner[0]]}")
                what = "parameter or free variable" if func is not None else "free variable"
                raise BindError(f"cannot bind {key!r}: no {what} has that name; expected one "
                                f"of {sorted(by_name)}")
            var = found[0]
        else:
            raise BindError(f"bind keys must be relay Vars or names (str), got "
                            f"{type(key).__name__}: {key!r:.60}")
        if var in bound:
            raise BindError(f"cannot bind {_name_of(var)}: it is bound by {bound[var]}")
        if var in resolved:
            raise BindError(f"cannot bind {_name_of(var)} twice (once by Var, once by name)")
        resolved[var] = _as_expr(_name_of(var), value)
    return resolved


def substitute(expr: RelayExpr, mapping: Mapping) -> RelayExpr:
    """Replace every occurrence of the vars in mapping (no checks; identity kept if unchanged)."""
    if not mapping:
        return expr

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        return mapping.get(old, new) if type(old) is Var else new

    return rewrite_post_order(expr, rewrite)


def bind(expr: RelayExpr, binds: Mapping) -> RelayExpr:
    """relay.bind: bind params of a function (removing them) or free vars of an expression."""
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"bind expects a relay expression, got {type(expr).__name__}")
    if not isinstance(binds, Mapping):
        raise TypeError(f"bind expects a mapping {{Var or name: value}}, got "
                        f"{type(binds).__name__}")
    func = expr if isinstance(expr, Function) else None
    bound = _internally_bound(expr, func)
    mapping = _resolve(expr, binds, bound)
    if func is None:
        return substitute(expr, mapping)
    body = substitute(func.body, mapping)
    params = [p for p in func.params if p not in mapping]
    if body is func.body and len(params) == len(func.params):
        return func
    result = Function(params, body, func.ret_type, func.type_params, func.attrs, func.span)
    before = set(free_vars(func))
    new_free = [v for v in free_vars(result) if v not in before]
    if new_free:
        result = Function(params + new_free, body, func.ret_type, func.type_params, func.attrs,
                          func.span)
    return result
