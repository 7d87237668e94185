"""Readable text for TIR (in the spirit of TVM's TIR script) for debugging and tests."""
from __future__ import annotations

import math

from .tir.expr import (
    BinaryOp, Call, Cast, Expr, FloatImm, IfThenElseExpr, IntImm, Load, Not, Reduce, Select, Var,
)
from .tir.stmt import (
    Allocate, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, Store,
)

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "and": "&&", "or": "||"}
_SUFFIX = {"float32": "f", "float64": "f64", "int32": "", "int64": "i64"}


def _float(v: float, dtype: str) -> str:
    if math.isnan(v):
        text = "nan"
    elif math.isinf(v):
        text = "inf" if v > 0 else "-inf"
    else:
        text = repr(v)
        text = text[:-2] if text.endswith(".0") else text
    return text + _SUFFIX.get(dtype, f"<{dtype}>")


def expr_str(e: Expr) -> str:
    """One-line text of an expression (recursive: trees inside one kernel are small)."""
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
            return f"({expr_str(e.a)} {_INFIX[e.kind]} {expr_str(e.b)})"
        return f"{e.kind}({expr_str(e.a)}, {expr_str(e.b)})"
    if t is Not:
        return f"!{expr_str(e.a)}"
    if t is Select:
        return f"select({expr_str(e.cond)}, {expr_str(e.a)}, {expr_str(e.b)})"
    if t is IfThenElseExpr:
        return f"if_then_else({expr_str(e.cond)}, {expr_str(e.a)}, {expr_str(e.b)})"
    if t is Cast:
        return f"{e.dtype}({expr_str(e.value)})"
    if t is Load:
        return f"{e.buffer.name}[{', '.join(_index_str(i) for i in e.indices)}]"
    if t is Call:
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if t is Reduce:
        axes = ", ".join(f"{v.name}:{v.dom}" for v in e.axis)
        where = "" if e.where is None else f", where={expr_str(e.where)}"
        return f"reduce_{e.kind}({expr_str(e.source)}, axis=[{axes}]{where})"
    return f"<{t.__name__}>"


def _index_str(e: Expr) -> str:
    text = expr_str(e)
    if text.startswith("(") and text.endswith(")"):
        return text[1:-1]
    return text.removesuffix("i64") if type(e) is IntImm else text


def stmt_str(s: Stmt, indent: int = 0) -> str:
    """Multi-line text of a statement."""
    lines: list[str] = []
    _stmt(s, indent, lines)
    return "\n".join(lines)


def _stmt(s: Stmt, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    t = type(s)
    if t is SeqStmt:
        for c in s.stmts:
            _stmt(c, ind, out)
    elif t is For:
        kind = "" if s.kind == "serial" else f" {s.kind}"
        out.append(f"{pad}for ({s.var.name}, 0, {s.extent}){kind} {{")
        _stmt(s.body, ind + 1, out)
        out.append(pad + "}")
    elif t is Store:
        idx = ", ".join(_index_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {_index_str(s.value)}")
    elif t is Allocate:
        b = s.buffer
        out.append(f"{pad}allocate {b.name}[{b.dtype} * {b.size}] {{")
        _stmt(s.body, ind + 1, out)
        out.append(pad + "}")
    elif t is IfThenElse:
        out.append(f"{pad}if ({_index_str(s.cond)}) {{")
        _stmt(s.then_body, ind + 1, out)
        if s.else_body is not None:
            out.append(pad + "} else {")
            _stmt(s.else_body, ind + 1, out)
        out.append(pad + "}")
    elif t is LetStmt:
        out.append(f"{pad}let {s.var.name}: {s.var.dtype} = {_index_str(s.value)}")
        _stmt(s.body, ind, out)
    elif t is Evaluate:
        out.append(pad + expr_str(s.value))
    else:
        out.append(f"{pad}<{t.__name__}>")


def primfunc_str(f: PrimFunc) -> str:
    """Text of a whole kernel with its buffer signature."""
    params = ", ".join(f"{b.name}: Buffer({b.shape}, {b.dtype})" for b in f.params)
    return f"primfn {f.name}({params}) {{\n{stmt_str(f.body, 1)}\n}}"
