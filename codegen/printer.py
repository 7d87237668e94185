"""Readable text for TIR (in the spirit of TVM's TIR script) for debugging and tests."""
from __future__ import annotations

import math

from .tir.expr import (
    BinaryOp, Call, Cast, Expr, FloatImm, IfThenElseExpr, IntImm, Load, Not, Reduce, Reinterpret,
    Select, Var,
)
from .tir.functor import children, post_order
from .tir.stmt import (
    Allocate, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, Store,
)

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "and": "&&", "or": "||", "bitand": "&",
          "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}
_SUFFIX = {"float16": "f16", "float32": "f", "float64": "f64", "int32": "", "int64": "i64"}


def _float(v: float, dtype: str) -> str:
    if math.isnan(v):
        text = "nan"
    elif math.isinf(v):
        text = "inf" if v > 0 else "-inf"
    else:
        text = repr(v)
        text = text[:-2] if text.endswith(".0") else text
    return text + _SUFFIX.get(dtype, f"<{dtype}>")


_SHARE_MIN = 12  # a sub-expression used twice is bound to a name when its text is longer


def expr_str(e: Expr) -> str:
    """One-line text of an expression; long shared sub-expressions print once as `let`s."""
    lets, (root,) = _expr_lets(e)
    return "".join(f"let {name} = {text}; " for name, text in lets) + root


def _expr_lets(*roots: Expr) -> tuple[list[tuple[str, str]], list[str]]:
    """(let bindings, texts of the roots): linear in the DAG size, no recursion."""
    order = post_order_many(roots)
    uses: dict[int, int] = {}
    for n in order:
        for c in children(n):
            uses[id(c)] = uses.get(id(c), 0) + 1
    text: dict[int, str] = {}
    lets: list[tuple[str, str]] = []
    for n in order:
        t = _node_str(n, [text[id(c)] for c in children(n)])
        if uses.get(id(n), 0) > 1 and len(t) > _SHARE_MIN:
            name = f"%{len(lets)}"
            lets.append((name, _strip_parens(t)))
            t = name
        text[id(n)] = t
    return lets, [text[id(r)] for r in roots]


def post_order_many(roots: tuple[Expr, ...]) -> list[Expr]:
    """Unique nodes under several roots, children first."""
    seen: set[int] = set()
    out: list[Expr] = []
    for r in roots:
        for n in post_order(r):
            if id(n) not in seen:
                seen.add(id(n))
                out.append(n)
    return out


def _node_str(e: Expr, kids: list[str]) -> str:
    """Text of one node given the texts of its children."""
    t = type(e)
    if t is IntImm:
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) + _SUFFIX.get(e.dtype, f"<{e.dtype}>")
    if t is FloatImm:
        return _float(e.value, e.dtype)
    if t is Var:
        return e.name
    if t is BinaryOp:
        if e.kind in _INFIX:
            return f"({kids[0]} {_INFIX[e.kind]} {kids[1]})"
        return f"{e.kind}({kids[0]}, {kids[1]})"
    if t is Not:
        return f"!{kids[0]}"
    if t is Select or t is IfThenElseExpr:
        name = "select" if t is Select else "if_then_else"
        return f"{name}({kids[0]}, {kids[1]}, {kids[2]})"
    if t is Cast:
        return f"{e.dtype}({kids[0]})"
    if t is Reinterpret:
        return f"reinterpret({kids[0]}, {e.dtype})"
    if t is Load:
        idx = ", ".join(_index_text(i, k) for i, k in zip(e.indices, kids))
        return f"{e.buffer.name}[{idx}]"
    if t is Call:
        return f"{e.name}({', '.join(kids)})"
    if t is Reduce:
        axes = ", ".join(f"{v.name}:{v.dom}" for v in e.axis)
        where = "" if e.where is None else f", where={kids[1]}"
        return f"reduce_{e.kind}({kids[0]}, axis=[{axes}]{where})"
    return f"<{t.__name__}>"


def _strip_parens(text: str) -> str:
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def _index_text(e: Expr, text: str) -> str:
    return text.removesuffix("i64") if type(e) is IntImm else _strip_parens(text)


def stmt_str(s: Stmt, indent: int = 0) -> str:
    """Multi-line text of a statement (explicit stack: let chains may be long)."""
    out: list[str] = []
    work: list[tuple[Stmt | str, int]] = [(s, indent)]
    while work:
        item, ind = work.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        work.extend(reversed(_stmt(item, ind, out)))
    return "\n".join(out)


def _exprs(pad: str, out: list[str], *roots: Expr) -> list[str]:
    """Index-style texts of the roots of one statement, after `let` lines for shared parts."""
    lets, texts = _expr_lets(*roots)
    out.extend(f"{pad}let {name} = {text}" for name, text in lets)
    return [_index_text(r, t) for r, t in zip(roots, texts)]


def _stmt(s: Stmt, ind: int, out: list[str]) -> list[tuple[Stmt | str, int]]:
    """Print the head of s into out; return what follows it (bodies, closing braces)."""
    pad = "  " * ind
    t = type(s)
    if t is SeqStmt:
        return [(c, ind) for c in s.stmts]
    if t is For:
        kind = "" if s.kind == "serial" else f" {s.kind}"
        kind += f" (threads <= {s.threads})" if s.threads else ""
        out.append(f"{pad}for ({s.var.name}, 0, {s.extent}){kind} {{")
        return [(s.body, ind + 1), (pad + "}", ind)]
    if t is Store:
        *idx, value = _exprs(pad, out, *s.indices, s.value)
        out.append(f"{pad}{s.buffer.name}[{', '.join(idx)}] = {value}")
        return []
    if t is Allocate:
        b = s.buffer
        size = b.size if s.size is None else _exprs(pad, out, s.size)[0]
        out.append(f"{pad}allocate {b.name}[{b.dtype} * {size}] {{")
        return [(s.body, ind + 1), (pad + "}", ind)]
    if t is IfThenElse:
        (cond,) = _exprs(pad, out, s.cond)
        out.append(f"{pad}if ({cond}) {{")
        rest: list[tuple[Stmt | str, int]] = [(s.then_body, ind + 1)]
        if s.else_body is not None:
            rest += [(pad + "} else {", ind), (s.else_body, ind + 1)]
        return rest + [(pad + "}", ind)]
    if t is LetStmt:
        (value,) = _exprs(pad, out, s.value)
        out.append(f"{pad}let {s.var.name}: {s.var.dtype} = {value}")
        return [(s.body, ind)]
    if t is Evaluate:
        (value,) = _exprs(pad, out, s.value)
        out.append(pad + value)
        return []
    out.append(f"{pad}<{t.__name__}>")
    return []


def primfunc_str(f: PrimFunc) -> str:
    """Text of a whole kernel with its buffer signature."""
    params = ", ".join(f"{b.name}: Buffer({b.shape}, {b.dtype})" for b in f.params)
    return f"primfn {f.name}({params}) {{\n{stmt_str(f.body, 1)}\n}}"
