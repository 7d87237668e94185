"""Canonical text of a PrimFunc for the compile cache: linear in the DAG size, names left out.

Expressions are value-numbered: each node becomes one line `#n = op operands` whose
operands are earlier numbers, and a line already seen reuses its number, so shared (or
merely equal) sub-expressions are written once however often they are used. Variables and
buffers are numbered by identity in order of first appearance (two distinct `Var("i")`
stay distinct, and renaming them changes nothing). Kernel, buffer and variable names
never appear: they do not change the generated code, only symbol names. Statements are
walked with an explicit stack; nothing recurses per node.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from .expr import (
    BinaryOp, Call, Cast, Expr, FloatImm, IfThenElseExpr, IntImm, Load, Not, Reduce, Reinterpret,
    Select, Var,
)
from .functor import children
from .stmt import (
    Allocate, Buffer, ConstantBuffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, Store,
)


class _Numbering:
    """Numbers for buffers and variables (by identity) and expressions (by structure)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.values: dict[str, int] = {}
        self.nodes: dict[Expr, int] = {}  # by identity (nodes compare by identity)
        self.buffers: dict[Buffer, int] = {}
        self.vars: dict[Var, int] = {}

    def buffer(self, b: Buffer) -> str:
        k = self.buffers.get(b)
        if k is None:
            k = self.buffers[b] = len(self.buffers)
            data = (f" data {hashlib.sha256(b.data).hexdigest()}"
                    if isinstance(b, ConstantBuffer) else "")
            self.lines.append(f"buf b{k} {b.shape} {b.dtype} {b.strides} {b.alignment}{data}")
        return f"b{k}"

    def var(self, v: Var) -> str:
        k = self.vars.get(v)
        if k is None:
            k = self.vars[v] = len(self.vars)
            self.lines.append(f"var v{k} {v.dtype} {v.dom}")
        return f"v{k}"

    def expr(self, e: Expr) -> str:
        """Number of e, numbering its unseen sub-expressions first (post-order, no recursion)."""
        nodes = self.nodes
        got = nodes.get(e)
        if got is None:
            # post-order over the nodes not numbered yet: a numbered node's operands are too
            values, lines, head = self.values, self.lines, self._head
            stack: list[tuple[Expr, bool]] = [(e, False)]
            while stack:
                n, expanded = stack.pop()
                if n in nodes:
                    continue
                kids = children(n)
                if not expanded and kids:
                    stack.append((n, True))
                    stack.extend((c, False) for c in reversed(kids) if c not in nodes)
                    continue
                line = f"{head(n)} " + " ".join([f"#{nodes[c]}" for c in kids])
                k = values.get(line)
                if k is None:
                    k = values[line] = len(values)
                    lines.append(f"#{k} = {line}")
                nodes[n] = k
            got = nodes[e]
        return f"#{got}"

    def _head(self, e: Expr) -> str:
        """Everything about e except its children."""
        t = type(e)
        if t is IntImm or t is FloatImm:
            return f"const {e.dtype} {e.value!r}"
        if t is Var:
            return f"ref {self.var(e)}"
        if t is BinaryOp:
            return f"{e.kind} {e.dtype}"
        if t is Load:
            return f"load {e.dtype} {self.buffer(e.buffer)}"
        if t is Cast:
            return f"cast {e.dtype}"
        if t is Reinterpret:
            return f"reinterpret {e.dtype}"
        if t is Call:
            return f"call {e.name} {e.dtype}"
        if t is Reduce:
            axes = ",".join(self.var(v) for v in e.axis)
            return f"reduce {e.kind} {e.dtype} [{axes}] {e.where is not None}"
        if t in (Not, Select, IfThenElseExpr):
            return f"{t.__name__} {e.dtype}"
        raise TypeError(f"structural key: unknown expression {t.__name__}")


# The last kernels' texts: a build reads each kernel's text three times (the cache key, the
# micro-kernels it calls, the compile jobs' cost estimate). Entries keep their PrimFunc alive,
# so an id is never reused while cached.
_TEXTS: OrderedDict[int, tuple[PrimFunc, str]] = OrderedDict()
_TEXTS_KEPT = 256
_texts_lock = threading.Lock()


def kernel_text(func: PrimFunc) -> str:
    """Canonical, name-free text of func: equal texts give identical machine code."""
    with _texts_lock:
        known = _TEXTS.get(id(func))
    if known is not None and known[0] is func:
        return known[1]
    text = _kernel_text(func)
    with _texts_lock:
        _TEXTS[id(func)] = (func, text)
        while len(_TEXTS) > _TEXTS_KEPT:
            _TEXTS.popitem(last=False)
    return text


def _kernel_text(func: PrimFunc) -> str:
    num = _Numbering()
    params = " ".join(num.buffer(b) for b in func.params)
    body: list[str] = []
    work: list[Stmt | str] = [func.body]
    while work:
        s = work.pop()
        if isinstance(s, str):
            body.append(s)
            continue
        t = type(s)
        if t is SeqStmt:
            work.extend(reversed(s.stmts))
        elif t is For:
            extent = s.extent if isinstance(s.extent, int) else num.expr(s.extent)
            body.append(f"for {num.var(s.var)} {extent} {s.kind} {s.threads} {{")
            work += ["}", s.body]
        elif t is Store:
            idx = " ".join(num.expr(i) for i in s.indices)
            body.append(f"store {num.buffer(s.buffer)} [{idx}] {num.expr(s.value)}")
        elif t is Allocate:
            size = "" if s.size is None else f" {num.expr(s.size)}"
            body.append(f"allocate {num.buffer(s.buffer)}{size} {{")
            work += ["}", s.body]
        elif t is IfThenElse:
            body.append(f"if {num.expr(s.cond)} {{")
            work += ["}", *(() if s.else_body is None else (s.else_body, "} else {")),
                     s.then_body]
        elif t is LetStmt:
            body.append(f"let {num.var(s.var)} = {num.expr(s.value)}")
            work.append(s.body)
        elif t is Evaluate:
            body.append(f"eval {num.expr(s.value)}")
        else:
            raise TypeError(f"structural key: unknown statement {t.__name__}")
    attrs = sorted((k, repr(v)) for k, v in func.attrs.items())
    return "\n".join([f"params {params}", f"attrs {attrs}", *num.lines, "body", *body])


def structural_digest(funcs: list[PrimFunc], extra: str = "") -> str:
    """sha256 of the kernels' canonical texts (in order) and `extra` (e.g. the opt level)."""
    h = hashlib.sha256(extra.encode())
    for f in funcs:
        h.update(b"\0kernel\0")
        h.update(kernel_text(f).encode())
    return h.hexdigest()
