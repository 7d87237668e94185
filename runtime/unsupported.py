"""Module __getattr__ for TVM names relayjit knowingly lacks: the error says what to use
instead, and is an AttributeError so `hasattr` and `getattr(m, name, default)` still work."""
from __future__ import annotations

from typing import Callable, Mapping


class UnsupportedName(AttributeError):
    """A TVM name this module does not provide; the message names the alternative."""


def missing_names(module: str, alternatives: Mapping[str, str]) -> Callable[[str], object]:
    """A module-level __getattr__: names in `alternatives` raise UnsupportedName with the
    reason given, other names the usual AttributeError."""
    def __getattr__(name: str) -> object:
        if name in alternatives:
            raise UnsupportedName(f"{module}.{name} is not supported by relayjit: "
                                  f"{alternatives[name]}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__
