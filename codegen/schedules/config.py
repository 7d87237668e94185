"""ScheduleConfig: the base of every schedule's explicit configuration.

A configuration is a frozen dataclass of plain values (ints, bools, strings) and nested
configurations: what a schedule would otherwise decide by itself (tiles, algorithm, blocking,
parallel split, unrolling, switches). A field left None is not decided yet: the schedule's
`resolve_*` function fills it from the workload and the target (today's heuristics, the
default configuration) and leaves given fields as they are, so a partial configuration (an
override of one field) gets defaults consistent with it. Schedules take resolved ones.

Configurations are hashable and round-trip through JSON (`to_json` / `from_json`), so caches
and tuning records can name them.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Mapping, TypeVar

__all__ = ["ScheduleConfig", "pick"]

C = TypeVar("C", bound="ScheduleConfig")


@dataclass(frozen=True)
class ScheduleConfig:
    """Base class: subclasses are frozen dataclasses whose fields default to None."""

    # field name -> the ScheduleConfig subclass a nested field holds
    nested: ClassVar[dict[str, type]] = {}

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (nested configurations as dicts)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_json() if isinstance(value, ScheduleConfig) else value
        return out

    @classmethod
    def from_json(cls: type[C], data: Mapping[str, Any], where: str = "") -> C:
        """The configuration a dict describes (to_json's inverse; unknown fields refused)."""
        return cls().with_fields(data, where or cls.__name__)

    def with_fields(self: C, data: Mapping[str, Any], where: str = "") -> C:
        """A copy with the fields `data` names set (a nested field from a dict: merged)."""
        where = where or type(self).__name__
        if not isinstance(data, Mapping):
            raise TypeError(f"{where}: expected a dict of fields, got {type(data).__name__}")
        known = {f.name for f in fields(self)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}; {type(self).__name__} "
                             f"has {sorted(known)}")
        changes = {}
        for name, value in data.items():
            kind = self.nested.get(name)
            if kind is not None and isinstance(value, Mapping):
                base = getattr(self, name) or kind()
                value = base.with_fields(value, f"{where}.{name}")
            elif kind is None and not isinstance(value, (bool, int, str, type(None))):
                raise TypeError(f"{where}.{name}: expected a bool, int, str or None, got "
                                f"{type(value).__name__} {value!r}")
            changes[name] = value
        return replace(self, **changes)

    def unresolved(self) -> list[str]:
        """Names of the fields still None (nested ones dotted)."""
        out = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                out.append(f.name)
            elif isinstance(value, ScheduleConfig):
                out += [f"{f.name}.{n}" for n in value.unresolved()]
        return out


def pick(given: Any, default):
    """`given` unless it is None, else default() (a callable: computed only when needed)."""
    return default() if given is None else given
