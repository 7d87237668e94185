"""The compiler's exception hierarchy: every message says what, where, expected versus got."""
from __future__ import annotations

from runtime.errors import TVMError


class CompilerError(TVMError):
    """Base class of every error the compiler raises on bad input or unsupported programs."""


class DiagnosticError(CompilerError):
    """A program rejected with a located diagnostic: parse and type errors (TVM's name)."""


class TypeInferenceError(DiagnosticError):
    """A call's argument types do not satisfy its op's type relation."""


class OpNotImplemented(CompilerError):
    """A frontend operator (or several) has no converter."""


class BindError(CompilerError):
    """relay.bind / bind_params_by_name was asked for something that cannot be bound."""
