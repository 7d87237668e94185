"""The Relay text printer: prints what TVM's RelayTextPrinter prints (str(expr), str(mod)).

TVM's rules, which this module follows:
- Vars, constants, ops and global vars are always printed inline. Any other expression is
  bound to a temporary (`%0 = ...;`) unless it ends a scope (function body, if branch, let
  body, let value) and is used at most once in the printed graph. Temporaries are numbered in
  the order they are printed, by one counter shared by nested functions and by all functions
  of a module (so a fused function's body takes %0, %1 and the function itself %2).
- Call arguments are printed before the callee, so a fused function is bound just before the
  call that uses it. A free var is declared by a `free_var %x: T;` line where first used.
- Var names are made unique per printout: a second `%p0` prints as `%p01`.
- `/* ty=T */` follows calls and constants whose checked_type is set (TVM 0.8's rule: vars,
  tuples and functions carry no annotation, so params read `%x: T` and nothing more).
- Scalar constants print as literals (`1f`, `1`, `1i64`, `1f64`, `1i16`, `1f16`, `True`);
  other constants as `meta[relay.Constant][k]`, k in order of first appearance.
- Call attributes print as `key=value` after the arguments, only those that differ from the
  op's schema default (OpDef.attrs; a None is left out where None is the default). Function
  attributes print after the params (`fn (%p0, Primitive=1)`).

`astext()` of a module or expression begins with TVM's `#[version = "0.0.5"]` header;
`str()` leaves it out, as TVM's printing does. Choices where TVM's output has parts we leave
out: no metadata section (nor TVM's "metadata section has been omitted" comment), and no trailing
newline after a module's last function, whatever show_meta_data says. Functions of a module
print in insertion order, separated by a blank line.

Nothing here recurses per node: each node's printing is a generator that yields the printing
of its children to a driver loop with an explicit stack (see `_Printer.run`).
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any, Union

import numpy as np

from compiler.errors import CompilerError
from .attrs import Attrs, _freeze
from .expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,
                   TupleGetItem, Var)
from .module import IRModule
from .traversal import children, post_order
from .types import Type, type_to_str

Printing = Generator[Any, str, str]
Request = Union[str, Printing]

_ALWAYS_INLINE = (Var, Constant, Op, GlobalVar)
_TYPE_ANNOTATED = (Call, Constant)
_SCALAR_SUFFIX = {"int16": "i16", "int32": "", "int64": "i64", "float16": "f16", "float32": "f",
                  "float64": "f64"}


def astext(node, show_meta_data: bool = True, annotate: Callable | None = None) -> str:
    """The TVM text form of an expression, a module or a type (without the version header
    IRModule.astext / RelayExpr.astext put first). annotate(expr) -> str, as TVM's, replaces
    the `/* ty=... */` comment of calls and constants with its (raw) text."""
    if annotate is not None and not callable(annotate):
        raise TypeError(f"astext: annotate must be callable, got {type(annotate).__name__}")
    if isinstance(node, (IRModule, RelayExpr)):
        return _Printer(annotate).print(node)
    if isinstance(node, Type):
        return type_to_str(node)
    if isinstance(node, Attrs):
        return "{" + ", ".join(f"{k}={attr_value(v)}" for k, v in node.items()) + "}"
    raise TypeError(f"astext expects a relay expression, IRModule or Type, got "
                    f"{type(node).__name__}")


def meta_table(node: IRModule | RelayExpr) -> dict[str, list[Constant]]:
    """The constants astext(node) prints as `meta[relay.Constant][k]`, in index order: the
    text does not carry their values, so compiler.ir.parser.parse takes this as init_meta_table."""
    printer = _Printer()
    printer.print(node)
    return {"relay.Constant": list(printer.meta)}


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("\t", "\\t") + '"'


def _float_text(value: float, dtype: str = "float64") -> str:
    """C++ ostream's default float format (6 significant digits), which TVM uses, unless it
    loses precision: then the shortest text that reads back as the same `dtype` value, so
    that the parser (compiler.ir.parser) gets back exactly what was printed."""
    short = format(float(value), "g")
    exact = np.dtype(dtype).type(value)
    if np.isnan(exact) or np.dtype(dtype).type(short) == exact:
        return short
    return str(exact)


def attr_value(value: Any) -> str:
    """One attribute value as TVM prints it: 1, 1e-05f, "NCHW", [1, 1], True."""
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _float_text(value) + "f"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(attr_value(v) for v in value) + "]"
    if isinstance(value, Type):
        return type_to_str(value)
    if isinstance(value, np.dtype):
        return _quote(value.name)
    if isinstance(value, GlobalVar):
        return f"'{value.name_hint}'"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{attr_value(k)}={attr_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def scalar_text(data) -> str | None:
    """A 0-d constant as a literal (1f, 2, 3i64, True), or None when TVM makes it a meta node."""
    if data.ndim != 0:
        return None
    dtype = data.dtype
    value = data.numpy().item()
    if dtype == "bool":
        return "True" if value else "False"
    suffix = _SCALAR_SUFFIX.get(dtype)
    if suffix is None:
        return None
    text = _float_text(value, dtype) if dtype.startswith("float") else str(int(value))
    return text + suffix


def _same_value(value: Any, default: Any) -> bool:
    default = _freeze(default)
    if isinstance(value, bool) != isinstance(default, bool):
        return False
    try:
        return bool(value == default)
    except Exception:  # noqa: BLE001 - incomparable values are simply different
        return False


def _attr_defaults(op: RelayExpr) -> dict | None:
    """The attribute schema of a registered op (None for unknown ops and non-op callees)."""
    if not isinstance(op, Op):
        return None
    try:
        return op.op_def.attrs
    except CompilerError:
        return None


def call_attrs(call: Call) -> list[str]:
    """`key=value` for each attribute that differs from the op's default."""
    if not call.attrs:
        return []
    defaults = _attr_defaults(call.op) or {}
    out = []
    for key, value in call.attrs.items():
        if value is None and defaults.get(key) is None:
            continue  # None where None is the default (a None elsewhere must survive parsing)
        if value is not None and key in defaults and _same_value(value, defaults[key]):
            continue
        out.append(f"{key}={attr_value(value)}")
    return out


def _use_counts(root: RelayExpr) -> dict:
    """How many parent edges each node has (TVM's DependencyGraph, to decide inlining)."""
    counts: dict = {}
    for node in post_order(root):
        for child in children(node):
            counts[child] = counts.get(child, 0) + 1
    return counts


class _Printer:
    """One printout: names, temporaries and meta indices are shared by everything printed."""

    def __init__(self, annotate: Callable | None = None):
        self.annotate = annotate
        self.memo: dict = {}
        self.names: dict[str, int] = {}
        self.temps = 0
        self.meta: dict = {}
        self.uses: dict = {}
        self.scopes: list[list[str]] = []
        self.visit = {Call: self._call, Tuple: self._tuple, TupleGetItem: self._getitem,
                      If: self._if, Let: self._let, Function: self._function}

    # drivers ---------------------------------------------------------------------------------
    def print(self, node: IRModule | RelayExpr) -> str:
        return self.module(node) if isinstance(node, IRModule) else self.expression(node)

    def expression(self, expr: RelayExpr) -> str:
        self.uses = _use_counts(expr)
        return self.run(self._scope(expr))

    def module(self, mod: IRModule) -> str:
        parts = []
        for gv, func in mod.functions.items():
            self.uses = _use_counts(func)
            parts.append(self.run(self._function(func, f"def @{gv.name_hint}")))
        return "\n\n".join(parts)

    @staticmethod
    def run(printing: Printing) -> str:
        """Drive nested printings with an explicit stack; a str request answers itself."""
        stack = [printing]
        value = None
        while stack:
            try:
                request = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                value = done.value
                continue
            if isinstance(request, str):
                value = request
            else:
                stack.append(request)
                value = None
        return value

    # names -----------------------------------------------------------------------------------
    def _unique(self, prefix: str) -> str:
        name = prefix
        if prefix in self.names:
            while True:
                self.names[prefix] += 1
                name = f"{prefix}{self.names[prefix]}"
                if name not in self.names:
                    break
        self.names[name] = 0
        return name

    def _alloc_var(self, var: Var) -> str:
        """Name a var at its definition; returns the declaration `%x: T`."""
        if var in self.memo:
            return self.memo[var] + "-malformed-ir"
        hint = var.name_hint
        if not hint or not (hint[0].isascii() and hint[0].isalpha()):
            hint = "v" + hint
        name = self._unique("%" + hint)
        self.memo[var] = name
        if var.type_annotation is not None:
            return f"{name}: {type_to_str(var.type_annotation)}"
        return name

    def _constant(self, const: Constant) -> str:
        text = scalar_text(const.data)
        if text is None:
            index = self.meta.setdefault(const, len(self.meta))
            text = f"meta[relay.Constant][{index}]"
        return text

    # expressions -----------------------------------------------------------------------------
    def expr(self, node: RelayExpr, try_inline: bool = False) -> Request:
        """The printed reference to node: memoised text, or the printing that makes it."""
        text = self.memo.get(node)
        return text if text is not None else self._expr(node, try_inline)

    def _expr(self, node: RelayExpr, try_inline: bool) -> Printing:
        kind = type(node)
        if kind is Var:  # not defined by a param or a let: a free var
            self.scopes[-1].append(f"free_var {self._alloc_var(node)};")
            return self.memo[node]
        inline = kind in _ALWAYS_INLINE or (try_inline and self.uses.get(node, 0) <= 1)
        if kind is Constant:
            text = self._constant(node)
        elif kind is Op:
            text = node.name
        elif kind is GlobalVar:
            text = "@" + node.name_hint
        else:
            text = yield self.visit[kind](node)
            if kind is Let and not inline:
                text = "(" + _indent("\n" + text) + "\n)"
        if kind in _TYPE_ANNOTATED and self.annotate is not None:
            text += self.annotate(node) or ""
        elif kind in _TYPE_ANNOTATED and node._checked_type is not None:
            text += f" /* ty={type_to_str(node._checked_type)} */"
        if inline:
            self.memo[node] = text
            return text
        temp = f"%{self.temps}"
        self.temps += 1
        self.memo[node] = temp
        self.scopes[-1].append(f"{temp} = {text};")
        return temp

    def _scope(self, node: RelayExpr) -> Printing:
        """node's bindings followed by node itself, in a fresh list of lines."""
        self.scopes.append([])
        text = yield self.expr(node, True)
        return "\n".join(self.scopes.pop() + [text])

    def _body(self, node: RelayExpr) -> Printing:
        text = yield self._scope(node)
        return "{" + _indent("\n" + text) + "\n}"

    def _call(self, call: Call) -> Printing:
        args = []
        for arg in call.args:  # arguments first, so a callee fn is bound next to its call
            args.append((yield self.expr(arg)))
        args.extend(call_attrs(call))
        op = yield self.expr(call.op)
        return f"{op}({', '.join(args)})"

    def _tuple(self, tup: Tuple) -> Printing:
        fields = []
        for field in tup.fields:
            fields.append((yield self.expr(field)))
        return "(" + ", ".join(fields) + ("," if len(fields) == 1 else "") + ")"

    def _getitem(self, item: TupleGetItem) -> Printing:
        value = yield self.expr(item.tuple_value)
        return f"{value}.{item.index}"

    def _if(self, node: If) -> Printing:
        cond = yield self.expr(node.cond)
        then = yield self._body(node.true_branch)
        other = yield self._body(node.false_branch)
        return f"if ({cond}) {then} else {other}"

    def _let(self, let: Let) -> Printing:
        depth = 0
        body: RelayExpr = let
        while type(body) is Let:  # a let chain is one loop, not one nesting level per let
            decl = self._alloc_var(body.var)
            value = yield self.expr(body.value, True)
            self.scopes.append([f"let {decl} = {value};"])
            body = body.body
            depth += 1
        text = yield self._scope(body)
        for _ in range(depth):
            text = "\n".join(self.scopes.pop() + [text])
        return text

    def _function(self, fn: Function, prefix: str = "fn ") -> Printing:
        params = [self._alloc_var(p) for p in fn.params]
        params += [f"{key}={attr_value(value)}" for key, value in (fn.attrs or {}).items()]
        type_params = ", ".join(type_to_str(tp) for tp in fn.type_params)
        head = f"{prefix}{f'<{type_params}>' if type_params else ''}({', '.join(params)}) "
        if fn.ret_type is not None:
            head += f"-> {type_to_str(fn.ret_type)} "
        body = yield self._body(fn.body)
        return head + body
