"""The tokenizer of Relay's text format (what compiler.ir.printer writes; compiler.ir.parser reads).

Comments (`/* ty=... */`, `// ...`) and the `#[version = "0.0.5"]` header are skipped; a
`#[metadata]` section ends the text (its constants come through init_meta_table instead).
Each token keeps its line and column, so parse errors can point at the text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from compiler.errors import DiagnosticError


class ParseError(DiagnosticError):
    """Relay text that does not parse; the message gives line, column and the line itself."""


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # LOCAL, GLOBAL, IDENT, INT, FLOAT, STRING, GVAR_REF, PUNCT, EOF
    text: str  # the name (without % or @), the literal's text, or the punctuation
    line: int
    col: int
    suffix: str = ""  # a number's dtype suffix: "", "f", "f64", "i64", ...


# A name after % or @ ends at a character outside these; "." and ":" join only when a name
# character follows, so `%x: T` and `%0.1` split (ONNX names such as onnx::Conv_3 or
# layer1.0.weight stay whole; the parser resolves `%a.0` against the names it knows).
_NAME = r"[A-Za-z0-9_]+(?:(?:[.:/\-]|::)[A-Za-z0-9_]+)*"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_NUMBER = (r"-?(?:(?:\d+\.\d*|\d+)(?:[eE][+-]?\d+)?|inf|nan)"
           r"(?P<suffix>(?:f|i|u)(?:\d+)?)?(?![A-Za-z0-9_])")
_PATTERNS = [
    ("SKIP", r"[ \t\r\n]+|//[^\n]*|/\*(?:.|\n)*?\*/|#\[version[^\]]*\]"),
    ("METADATA", r"#\[metadata\]"),
    ("LOCAL", r"%" + _NAME),
    ("GLOBAL", r"@" + _NAME),
    ("NUMBER", _NUMBER),
    ("IDENT", _IDENT),
    ("STRING", r'"(?:[^"\\\n]|\\.)*"'),
    ("GVAR_REF", r"'[^'\n]*'"),
    ("PUNCT", r"->|[()\[\]{},;=:.?<>]"),
]
_MASTER = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _PATTERNS))
_INDEX = re.compile(r"\d+")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def error_at(source: str, line: int, col: int, message: str,
             source_name: str = "from_string") -> ParseError:
    """A ParseError quoting the offending line with a caret under the column."""
    lines = source.splitlines() or [""]
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return ParseError(f"{source_name}:{line}:{col}: {message}\n  {text}\n  {' ' * (col - 1)}^")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text[1:-1])


def tokenize(source: str, source_name: str = "from_string") -> list[Token]:
    """The tokens of `source`, ending with an EOF token."""
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(source):
        col = pos - line_start + 1
        if tokens and tokens[-1].text == "." and tokens[-1].kind == "PUNCT":
            match = _INDEX.match(source, pos)  # a tuple index: `%0.1.2` is (%0.1).2
            if match:
                tokens.append(Token("INT", match.group(), line, col))
                pos = match.end()
                continue
        match = _MASTER.match(source, pos)
        if match is None:
            raise error_at(source, line, col, f"unexpected character {source[pos]!r}",
                           source_name)
        kind, text = match.lastgroup, match.group()
        if kind == "METADATA":
            break
        if kind == "NUMBER":
            suffix = match.group("suffix") or ""
            body = text[:len(text) - len(suffix)]
            is_float = suffix.startswith("f") or not re.fullmatch(r"-?\d+", body)
            tokens.append(Token("FLOAT" if is_float else "INT", body, line, col, suffix))
        elif kind == "LOCAL" or kind == "GLOBAL":
            tokens.append(Token(kind, text[1:], line, col))
        elif kind == "STRING":
            tokens.append(Token(kind, _unquote(text), line, col))
        elif kind == "GVAR_REF":
            tokens.append(Token(kind, text[1:-1], line, col))
        elif kind != "SKIP":
            tokens.append(Token(kind, text, line, col))
        newlines = text.count("\n")
        if newlines:
            line += newlines
            line_start = pos + text.rindex("\n") + 1
        pos = match.end()
    tokens.append(Token("EOF", "", line, pos - line_start + 1))
    return tokens
