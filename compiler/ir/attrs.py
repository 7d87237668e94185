"""Attributes of calls and functions: an immutable mapping with attribute access (call.attrs.axis)."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np


def _freeze(value: Any) -> Any:
    """Lists become tuples so attrs hash and compare by value; numpy scalars become Python ones."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_freeze(v) for v in value.tolist()) if value.ndim else value.item()
    if isinstance(value, np.generic):
        return value.item()
    return value


class Attrs(Mapping):
    """Op attributes in schema order; missing keys read as AttributeError naming the field."""

    __slots__ = ("_fields", "_hash", "type_key")

    def __init__(self, fields: Mapping[str, Any] | None = None, type_key: str = "Attrs"):
        object.__setattr__(self, "_fields", {k: _freeze(v) for k, v in (fields or {}).items()})
        object.__setattr__(self, "_hash", None)
        object.__setattr__(self, "type_key", type_key)

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        try:
            return fields[name]
        except KeyError:
            type_key = object.__getattribute__(self, "type_key")
            raise AttributeError(f"{type_key} has no attribute {name!r}; it has "
                                 f"{sorted(fields)}") from None

    def __setattr__(self, name, value):
        raise AttributeError("Attrs are immutable")

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Attrs):
            return NotImplemented
        return self._fields == other._fields

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(tuple(sorted(self._fields.items(), key=str))))
        return self._hash

    def with_updates(self, **updates) -> "Attrs":
        """A copy with some fields replaced."""
        return Attrs({**self._fields, **updates}, self.type_key)

    def __repr__(self) -> str:
        return f"{self.type_key}({self._fields})"


class DictAttrs(Attrs):
    """Function attributes (Primitive=1, Composite=...)."""

    def __init__(self, fields: Mapping[str, Any] | None = None):
        super().__init__(fields, "DictAttrs")
