"""Source positions of IR nodes (TVM's tvm.ir.Span / SourceName): where in a text a node was
parsed from, so messages and tools can point at it. Spans take no part in structural
equality or hashing, and mutators carry them over to rebuilt nodes."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SourceName", "Span"]


@dataclass(frozen=True)
class SourceName:
    """The name of a source text (a file name, or TVM's "GeneratedSource")."""

    name: str


@dataclass(frozen=True)
class Span:
    """A node's extent in its source: 1-based lines and columns, the end just past it."""

    source_name: SourceName
    line: int
    end_line: int
    column: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.source_name.name}:{self.line}:{self.column}"
