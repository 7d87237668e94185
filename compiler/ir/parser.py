"""The Relay text parser (TVM's tvm.parser): parse(text) -> IRModule, parse_expr(text) -> expr.

It reads what compiler.ir.printer writes, which is TVM's text format:

    #[version = "0.0.5"]
    def @main(%x: Tensor[(1, 3), float32], %w) -> Tensor[(1, 3), float32] {
      %0 = add(%x, meta[relay.Constant][0]) /* ty=Tensor[(1, 3), float32] */;
      let %y = (%0, 1f);
      nn.bias_add(%y.0, %w, axis=1)
    }

A hand-written recursive-descent parser over the tokens of compiler.ir.tokenizer. It recurses
over the nesting of the text (a call inside a call, a fn inside a fn), never once per
statement: a block's `%n = ...;` and `let` statements are read by a loop, so a 10,000-line
program parses at constant Python stack depth.

- Op calls go through the op's definition (OpDef.make_call), so the attrs object (defaults
  filled, the op's attrs type) is exactly what the relay builder makes; unknown ops and
  attributes are errors pointing at the text.
- Constants the printer writes as `meta[relay.Constant][k]` are not in the text: pass them as
  `init_meta_table={"relay.Constant": [...]}` (compiler.ir.printer.meta_table(mod) gives it).
- parse() infers the module's types (compiler.ir.type_infer), as TVM's parser does;
  parse_expr() does not.
- Errors are ParseError (a CompilerError) with the source name, line and column.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from compiler.errors import CompilerError
from compiler.ir.attrs import DictAttrs
from compiler.ir.dims import Any as AnyDim
from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr,
                              Tuple, TupleGetItem, Var, const)
from compiler.ir.module import IRModule
from compiler.ir.printer import meta_table
from compiler.ir.span import SourceName, Span
from compiler.ir.tokenizer import ParseError, Token, error_at, tokenize
from compiler.ir.tvm_metadata import read_metadata, split_metadata
from compiler.ir.type_infer import infer_module
from compiler.ir.types import (FuncType, IncompleteType, TensorType, TupleType, Type,
                               TypeVar)

__all__ = ["parse", "parse_expr", "fromtext", "ParseError", "meta_table"]

_PROJECTION = re.compile(r"(.+)\.(\d+)$")


def _literal_dtype(token: Token) -> str:
    """TVM's literal suffixes: 1f, 1f16, 1f64, 1i64, 1u8; no suffix is int32 or float32."""
    suffix = token.suffix
    if not suffix:
        return "float32" if token.kind == "FLOAT" else "int32"
    if suffix == "f":
        return "float32"
    return {"f": "float", "i": "int", "u": "uint"}[suffix[0]] + suffix[1:]


class _Parser:
    """One parse: the tokens, the position, the names in scope and the module's globals."""

    def __init__(self, source: str, source_name: str, meta: Mapping[str, Any] | None):
        self.source, self.source_name = source, source_name
        self.source_span_name = SourceName(source_name)
        self.tokens = tokenize(source, source_name)
        self.pos = 0
        self.meta = dict(meta or {})
        self.locals: dict[str, RelayExpr] = {}
        self.type_vars: dict[str, TypeVar] = {}  # the type params in scope (fn <t>(...))
        self.globals: dict[str, GlobalVar] = {}

    # ---- tokens ---------------------------------------------------------------------------
    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def peek(self) -> Token:
        return self.tokens[min(self.pos + 1, len(self.tokens) - 1)]

    def spanned(self, node: RelayExpr, start: Token) -> RelayExpr:
        """node, created by this parse, with the span from `start` to the last token read."""
        end = self.tokens[self.pos - 1]
        object.__setattr__(node, "span", Span(self.source_span_name, start.line, end.line,
                                              start.col, end.col + len(end.text)))
        return node

    def error(self, message: str, token: Token | None = None) -> ParseError:
        token = token or self.token
        return error_at(self.source, token.line, token.col, message, self.source_name)

    def at(self, text: str, kind: str = "PUNCT") -> bool:
        return self.token.kind == kind and self.token.text == text

    def accept(self, text: str, kind: str = "PUNCT") -> bool:
        if self.at(text, kind):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, kind: str = "PUNCT") -> Token:
        if not self.at(text, kind):
            raise self.error(f"expected {text!r}, got {self.describe(self.token)}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.token.kind != kind:
            raise self.error(f"expected {what}, got {self.describe(self.token)}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def at_binding(self, kind: str) -> bool:
        """At `name =` with a name token of `kind` (a statement's %n or an attribute key)."""
        after = self.peek()
        return self.token.kind == kind and after.kind == "PUNCT" and after.text == "="

    def sequence(self, closing: str, item: Callable[[], Any]) -> list:
        """item() repeated, comma separated (a trailing comma allowed), then `closing`."""
        items = []
        while not self.at(closing):
            items.append(item())
            if not self.accept(","):
                break
        self.expect(closing)
        return items

    def arguments(self, item: Callable[[], Any]) -> tuple[list, dict]:
        """`item, ..., key=value, ...)`: the items, and the attributes by name."""
        attrs: dict = {}

        def one():
            if self.at_binding("IDENT"):
                key = self.token.text
                self.pos += 2
                attrs[key] = self.attr_value()
                return attrs
            return item()
        return [x for x in self.sequence(")", one) if x is not attrs], attrs

    @staticmethod
    def describe(token: Token) -> str:
        if token.kind == "EOF":
            return "the end of the text"
        prefix = {"LOCAL": "%", "GLOBAL": "@"}.get(token.kind, "")
        return f"{prefix}{token.text}{token.suffix}".join("''")

    # ---- names ----------------------------------------------------------------------------
    def define(self, name: str, value: RelayExpr, undo: list) -> None:
        """Bind a local name; `undo` records the previous binding to restore at scope end."""
        undo.append((name, self.locals.get(name)))
        self.locals[name] = value

    def restore(self, undo: list) -> None:
        for name, old in reversed(undo):
            if old is None:
                self.locals.pop(name, None)
            else:
                self.locals[name] = old

    def lookup_local(self, token: Token) -> RelayExpr:
        """%name, or %name.i.j... when the dotted whole is not a name (a tuple projection)."""
        name, indices = token.text, []
        while name not in self.locals:
            match = _PROJECTION.match(name)
            if match is None:
                raise self.error(f"%{token.text} is not defined here; a local must be a "
                                 "parameter, a let, a `%n = ...;` or a `free_var`", token)
            name = match.group(1)
            indices.append(int(match.group(2)))
        expr = self.locals[name]
        for index in reversed(indices):
            expr = self.spanned(TupleGetItem(expr, index), token)
        return expr

    def global_var(self, name: str) -> GlobalVar:
        if name not in self.globals:
            self.globals[name] = GlobalVar(name)
        return self.globals[name]

    # ---- module and blocks -------------------------------------------------------------------
    def module(self, mod: IRModule) -> IRModule:
        """`def @name(...) {...}` definitions; a text that is one expression becomes @main."""
        for gv in mod.get_global_vars():
            self.globals[gv.name_hint] = gv
        if not self.at("def", "IDENT"):
            return IRModule.from_expr(self.expression(), mod.functions)
        defined: set[str] = set()
        while self.token.kind != "EOF":
            def_token = self.expect("def", "IDENT")
            name = self.expect_kind("GLOBAL", "a global name such as @main").text
            if name in defined:
                raise self.error(f"@{name} is defined twice", def_token)
            defined.add(name)
            mod[self.global_var(name)] = self.spanned(self.function_rest(), def_token)
        return mod

    def expression(self) -> RelayExpr:
        """The whole text as one expression (statements allowed), up to the end."""
        expr = self.statements(None)
        self.expect_kind("EOF", "the end of the text")
        return expr

    def statements(self, end: str | None) -> RelayExpr:
        """A block's statements and its final expression (the let chain nests around it)."""
        undo: list = []
        lets: list[tuple[Var, RelayExpr]] = []
        while True:
            start = self.token
            if self.accept("let", "IDENT"):
                var = self.new_var()
                self.expect("=")
                value = self.expr()
                self.expect(";")
                self.define(var.name_hint, var, undo)
                lets.append((var, value, start))
            elif self.accept("free_var", "IDENT"):
                var = self.new_var()
                self.expect(";")
                self.define(var.name_hint, var, undo)
            elif self.at_binding("LOCAL"):
                name = self.token.text
                self.pos += 2
                value = self.expr()
                self.expect(";")
                self.locals[name] = value  # temporaries outlive the block, as printed
            else:
                break
        body = self.expr()
        if end is not None:
            self.expect(end)
        self.restore(undo)
        for var, value, start in reversed(lets):
            body = self.spanned(Let(var, value, body), start)
        return body

    def block(self) -> RelayExpr:
        self.expect("{")
        return self.statements("}")

    def new_var(self) -> Var:
        """`%name` or `%name: Type` at a definition point."""
        start = self.token
        name = self.expect_kind("LOCAL", "a local variable such as %x").text
        annotation = self.type() if self.accept(":") else None
        return self.spanned(Var(name, annotation), start)

    # ---- expressions ---------------------------------------------------------------------------
    def expr(self) -> RelayExpr:
        token = self.token
        if self.accept("if", "IDENT"):
            self.expect("(")
            cond = self.expr()
            self.expect(")")
            then = self.block()
            self.expect("else", "IDENT")
            return self.spanned(If(cond, then, self.block()), token)
        if self.accept("fn", "IDENT"):
            expr = self.spanned(self.function_rest(), token)
        elif token.kind == "IDENT" and token.text == "let":
            raise self.error("a let must start a statement: put it in parentheses")
        else:
            expr = self.atom()
        while True:  # postfix: calls and tuple projections
            if self.at("("):
                expr = self.spanned(self.call(expr), token)
            elif self.accept("."):
                expr = self.spanned(TupleGetItem(expr, int(self.expect_kind(
                    "INT", "a tuple index").text)), token)
            else:
                return expr

    def type_params(self) -> tuple[list[TypeVar], dict]:
        """`<t, u>` or TVM's `[t, u]` (or nothing), bound for what follows; returns them and
        the old bindings."""
        params = (self.sequence(">", self.type_param) if self.accept("<") else
                  self.sequence("]", self.type_param) if self.accept("[") else [])
        saved = dict(self.type_vars)
        self.type_vars.update((tv.name_hint, tv) for tv in params)
        return params, saved

    def type_param(self) -> TypeVar:
        return TypeVar(self.expect_kind("IDENT", "a type parameter name").text)

    def function_rest(self) -> Function:
        """`<type params>(params, attrs) -> ret { body }` after `fn` or `def @name`."""
        type_params, saved_type_vars = self.type_params()
        self.expect("(")
        undo: list = []

        def param() -> Var:
            var = self.new_var()
            self.define(var.name_hint, var, undo)
            return var
        params, attrs = self.arguments(param)
        ret_type = self.type() if self.accept("->") else None
        body = self.block()
        self.restore(undo)
        self.type_vars = saved_type_vars
        return Function(params, body, ret_type, type_params, DictAttrs(attrs) if attrs else None)

    def atom(self) -> RelayExpr:
        token = self.token
        self.pos += 1
        if token.kind == "LOCAL":
            return self.lookup_local(token)
        if token.kind == "GLOBAL":
            return self.global_var(token.text)
        if token.kind in ("INT", "FLOAT"):
            return self.literal(token)
        if token.kind == "IDENT":
            if token.text in ("True", "False"):
                return self.spanned(const(token.text == "True", "bool"), token)
            if token.text == "meta":
                return self.meta_ref(token)
            try:
                return Op.get(token.text)
            except CompilerError as err:
                raise self.error(str(err), token) from None
        if token.kind == "PUNCT" and token.text == "(":
            return self.parenthesized()
        raise self.error(f"expected an expression, got {self.describe(token)}", token)

    def literal(self, token: Token) -> Constant:
        dtype = _literal_dtype(token)
        try:
            return self.spanned(const(token.text, dtype), token)
        except (TypeError, ValueError) as err:
            raise self.error(f"bad {dtype} literal {token.text}{token.suffix}: {err}",
                             token) from None

    def meta_ref(self, token: Token) -> RelayExpr:
        """meta[relay.Constant][k], looked up in init_meta_table."""
        self.expect("[")
        key = self.expect_kind("IDENT", "a meta table key such as relay.Constant").text
        self.expect("]")
        self.expect("[")
        index = int(self.expect_kind("INT", "a meta table index").text)
        self.expect("]")
        table = self.meta.get(key, ())
        if index >= len(table):
            raise self.error(f"meta[{key}][{index}] is not in init_meta_table (it has "
                             f"{len(table)} {key} entries); the text does not carry constant "
                             "values: pass parse(text, init_meta_table={...}), e.g. "
                             "compiler.ir.printer.meta_table(mod)", token)
        value = table[index]
        return value if isinstance(value, RelayExpr) else const(value)

    def parenthesized(self) -> RelayExpr:
        """`()`, `(e)`, `(e,)`, `(e1, e2, ...)` or `(statements; e)` (a let in parentheses)."""
        start = self.tokens[self.pos - 1]
        if self.accept(")"):
            return self.spanned(Tuple([]), start)
        if self.at("let", "IDENT") or self.at("free_var", "IDENT") or self.at_binding("LOCAL"):
            return self.statements(")")
        first = self.expr()
        if self.accept(")"):
            return first
        self.expect(",")
        return self.spanned(Tuple([first, *self.sequence(")", self.expr)]), start)

    def call(self, callee: RelayExpr) -> RelayExpr:
        """`callee(args, key=value, ...)`; an op's attrs go through its definition."""
        open_token = self.expect("(")
        args, attrs = self.arguments(self.expr)
        if isinstance(callee, Op):
            try:
                return callee.op_def.make_call(args, **attrs)
            except CompilerError as err:
                raise self.error(str(err), open_token) from None
        if attrs:
            raise self.error(f"only op calls take attributes, got {sorted(attrs)}", open_token)
        return Call(callee, args)

    # ---- attribute values and types ---------------------------------------------------------
    def attr_value(self) -> Any:
        token = self.token
        if token.kind == "INT":
            self.pos += 1
            return int(token.text)
        if token.kind == "FLOAT":
            self.pos += 1
            return float(token.text)
        if token.kind == "STRING":
            self.pos += 1
            return token.text
        if token.kind == "GVAR_REF":
            self.pos += 1
            return self.global_var(token.text)
        if token.kind == "IDENT" and token.text in ("None", "True", "False"):
            self.pos += 1
            return {"None": None, "True": True, "False": False}[token.text]
        if self.accept("[") or self.accept("("):
            closing = "]" if self.tokens[self.pos - 1].text == "[" else ")"
            return tuple(self.sequence(closing, self.attr_value))
        if self.accept("{"):
            return dict(self.sequence("}", self.attr_item))
        if token.kind == "IDENT":
            return self.type()
        raise self.error(f"expected an attribute value, got {self.describe(token)}")

    def attr_item(self) -> tuple:
        key = self.attr_value()
        self.expect("=")
        return key, self.attr_value()

    def type(self) -> Type:
        """Tensor[(d, ...), dtype], a dtype (a scalar), (T, ...), fn <t>(T, ...) -> T, a type
        param in scope, or ?."""
        token = self.token
        if self.accept("?"):
            return IncompleteType()
        if self.accept("("):
            return TupleType(self.sequence(")", self.type))
        if self.accept("fn", "IDENT"):
            type_params, saved_type_vars = self.type_params()
            self.expect("(")
            args = self.sequence(")", self.type)
            self.expect("->")
            func_type = FuncType(args, self.type(), type_params)
            self.type_vars = saved_type_vars
            return func_type
        if self.accept("Tensor", "IDENT"):
            self.expect("[")
            self.expect("(")
            shape = self.sequence(")", self.dimension)
            self.expect(",")
            dtype = self.expect_kind("IDENT", "a dtype such as float32")
            self.expect("]")
            return self.tensor_type(shape, dtype)
        if token.kind == "IDENT":
            self.pos += 1
            if token.text in self.type_vars:
                return self.type_vars[token.text]
            return self.tensor_type((), token)
        raise self.error(f"expected a type, got {self.describe(token)}")

    def dimension(self) -> int | AnyDim:
        """An integer, or ? for a dimension known at run time (each ? a fresh relay.Any())."""
        if self.accept("?"):
            return AnyDim()
        if self.token.kind != "INT":
            raise self.error(f"expected a dimension (an integer or ?), got "
                             f"{self.describe(self.token)}")
        return int(self.expect_kind("INT", "a dimension").text)

    def tensor_type(self, shape, dtype: Token) -> TensorType:
        try:
            return TensorType(tuple(shape), dtype.text)
        except (TypeError, ValueError) as err:
            raise self.error(f"bad tensor type: {err}", dtype) from None


def _split_metadata(source: str, source_name: str,
                    init_meta_table: Mapping[str, Any] | None) -> tuple[str, Mapping | None]:
    """The program text and its meta table: init_meta_table when given, else the constants
    of a TVM `#[metadata]` section after the program."""
    if not isinstance(source, str):
        raise TypeError(f"parse expects the program text as a str, got {type(source).__name__}")
    text, section = split_metadata(source)
    if section is None or init_meta_table is not None:
        return text, init_meta_table
    try:
        return text, read_metadata(section)
    except ValueError as err:
        raise ParseError(f"{source_name}: {err}") from None


def parse_expr(source: str, source_name: str = "from_string",
               init_meta_table: Mapping[str, Any] | None = None) -> RelayExpr:
    """An expression from text (TVM's tvm.parser.parse_expr); not type-inferred."""
    source, init_meta_table = _split_metadata(source, source_name, init_meta_table)
    return _Parser(source, source_name, init_meta_table).expression()


def parse(source: str, source_name: str = "from_string", init_module: IRModule | None = None,
          init_meta_table: Mapping[str, Any] | None = None) -> IRModule:
    """An IRModule from text (TVM's tvm.parser.parse), type-inferred like TVM's; a TVM
    `#[metadata]` section gives the meta[relay.Constant][k] values."""
    source, init_meta_table = _split_metadata(source, source_name, init_meta_table)
    parser = _Parser(source, source_name, init_meta_table)
    mod = parser.module(init_module.shallow_copy() if init_module is not None else IRModule())
    return infer_module(mod)


def fromtext(source: str, source_name: str = "from_string") -> IRModule:
    """TVM's older name for parse."""
    return parse(source, source_name)
