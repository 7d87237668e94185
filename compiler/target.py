"""compiler.target.Target: TVM's tvm.target.Target for the CPU kinds relayjit compiles for.

A target is a kind ("llvm", or "c", which relayjit builds for the host exactly like "llvm")
plus typed attributes (-mcpu, -mattr, -mtriple, ...). It is parsed from TVM's string form
("llvm -mcpu=skylake -mattr=+avx2,-avx512f"), its JSON/dict form ({"kind": "llvm", ...}) or
another Target. This module only parses and carries the target; codegen decides how to turn
it into an LLVM target machine. `with Target(...):` makes it Target.current(), which
relay.build uses when no target is passed.
"""
from __future__ import annotations

import json
import threading
from typing import Any, Mapping

from compiler.errors import CompilerError

__all__ = ["Target", "TargetKind", "TargetError"]


class TargetError(CompilerError, ValueError):
    """A target string or dict names an unknown kind or attribute, or a badly typed value."""


class TargetKind:
    """A compilation target's kind; `.name` is what TVM calls it ("llvm", "c")."""

    __slots__ = ("name", "default_keys")

    def __init__(self, name: str, default_keys: tuple[str, ...]):
        self.name = name
        self.default_keys = default_keys

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TargetKind) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


# Both kinds compile for the CPU through LLVM; "c" is accepted as an alias of "llvm" because
# TVM code uses it for "a CPU build" (relayjit has no C source backend).
_KINDS = {name: TargetKind(name, ("cpu",)) for name in ("llvm", "c")}

# The attributes TVM's llvm/c kinds take, with the type each value is converted to.
_ATTR_TYPES: dict[str, type] = {
    "mcpu": str, "mtriple": str, "mattr": list, "mfloat-abi": str, "mabi": str,
    "keys": list, "libs": list, "device": str, "model": str, "tag": str, "runtime": str,
    "num-cores": int, "opt-level": int, "system-lib": bool, "link-params": bool,
    "fast-math": bool, "fast-math-nnan": bool, "fast-math-ninf": bool,
    "fast-math-nsz": bool, "fast-math-arcp": bool, "fast-math-contract": bool,
    "fast-math-reassoc": bool, "cl-opt": list, "jit": str, "vector-width": int,
}


def _unsupported_kind(name: str) -> TargetError:
    return TargetError(
        f"target {name!r} is not supported: relayjit compiles for the CPU only; expected "
        f"'llvm' (optionally with -mcpu=, -mattr=, -mtriple=) or 'c' (an alias of 'llvm')")


def _convert(key: str, value: Any) -> Any:
    """`value` (a string from the target string, or a dict value) as the attribute's type."""
    if key not in _ATTR_TYPES:
        raise TargetError(f"target attribute {key!r} is not known; expected one of "
                          f"{sorted(_ATTR_TYPES)}")
    kind = _ATTR_TYPES[key]
    if kind is list:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
            raise TargetError(f"target attribute {key!r} expects a list of strings (or a "
                              f"comma-separated string), got {value!r}")
        return tuple(i for i in items if i)
    if kind is bool:
        if isinstance(value, str):
            if value.lower() not in ("1", "0", "true", "false"):
                raise TargetError(f"target attribute {key!r} expects a boolean, got {value!r}")
            return value.lower() in ("1", "true")
        return bool(value)
    if kind is int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise TargetError(f"target attribute {key!r} expects an integer, "
                              f"got {value!r}") from None
    if not isinstance(value, str):
        raise TargetError(f"target attribute {key!r} expects a string, got {value!r}")
    return value


def _parse_string(text: str) -> dict[str, Any]:
    """TVM's target string ("llvm -mcpu=x -mattr=+a,-b -system-lib") as a config dict."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            config = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise TargetError(f"target {text!r} is not valid JSON: {err}") from None
        if not isinstance(config, dict):
            raise TargetError(f"target {text!r}: expected a JSON object")
        return config
    words = stripped.split()
    if not words:
        raise TargetError("target string is empty; expected e.g. 'llvm'")
    config: dict[str, Any] = {"kind": words[0]}
    for word in words[1:]:
        if not word.startswith("-"):
            raise TargetError(f"target {text!r}: option {word!r} must look like -key=value")
        key, eq, value = word.lstrip("-").partition("=")
        config[key] = value if eq else True
    return config


_SCOPE = threading.local()  # per thread: the stack of targets entered with `with`


def _scope_stack() -> list["Target"]:
    if not hasattr(_SCOPE, "stack"):
        _SCOPE.stack = []
    return _SCOPE.stack


class Target:
    """A compilation target (TVM's tvm.target.Target): Target("llvm -mcpu=skylake")."""

    def __init__(self, target: Any, host: Any = None):
        if isinstance(target, Target):
            config: Mapping[str, Any] = target.export()
        elif isinstance(target, str):
            config = _parse_string(target)
        elif isinstance(target, Mapping):
            config = dict(target)
        else:
            raise TargetError(f"Target expects a string, a dict or a Target, got "
                              f"{type(target).__name__}")
        kind_name = config.pop("kind", None)
        if not isinstance(kind_name, str):
            raise TargetError(f"target {target!r} has no 'kind'; expected e.g. 'llvm'")
        if kind_name not in _KINDS:
            raise _unsupported_kind(kind_name)
        host_config = config.pop("host", None)
        self.kind = _KINDS[kind_name]
        attrs = {key: _convert(key, value) for key, value in config.items()}
        keys = attrs.pop("keys", self.kind.default_keys)
        device = attrs.get("device")
        # TVM puts -device first among the keys (llvm -device=arm_cpu: arm_cpu, cpu).
        self._keys = ((device,) if device and device not in keys else ()) + tuple(keys)
        self.attrs: dict[str, Any] = attrs
        host = host if host is not None else host_config
        self.host = Target(host) if host is not None else None

    # ---- TVM's accessors --------------------------------------------------------------
    @property
    def keys(self) -> list[str]:
        return list(self._keys)

    @property
    def mcpu(self) -> str:
        return str(self.attrs.get("mcpu", ""))

    @property
    def mattr(self) -> list[str]:
        return list(self.attrs.get("mattr", ()))

    @property
    def mtriple(self) -> str:
        return str(self.attrs.get("mtriple", ""))

    @property
    def model(self) -> str:
        return str(self.attrs.get("model", "unknown"))

    @property
    def libs(self) -> list[str]:
        return list(self.attrs.get("libs", ()))

    def export(self) -> dict[str, Any]:
        """The target as TVM's config dict (what Target(dict) takes back)."""
        config: dict[str, Any] = {"kind": self.kind.name, "keys": list(self.keys)}
        config.update({k: list(v) if isinstance(v, tuple) else v
                       for k, v in self.attrs.items()})
        if self.host is not None:
            config["host"] = self.host.export()
        return config

    def with_host(self, host: Any = None) -> "Target":
        return Target(self, host)

    @staticmethod
    def list_kinds() -> list[str]:
        return list(_KINDS)

    # ---- scope --------------------------------------------------------------------------
    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The innermost target entered with `with Target(...):`."""
        stack = _scope_stack()
        if stack:
            return stack[-1]
        if not allow_none:
            raise TargetError("Target.current(): no target is in scope; use `with Target(...):`")
        return None

    def __enter__(self) -> "Target":
        _scope_stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _scope_stack().pop()

    # ---- text and equality ---------------------------------------------------------------
    def __str__(self) -> str:
        parts = [self.kind.name]
        if self.keys:
            parts.append("-keys=" + ",".join(self.keys))
        for key in sorted(self.attrs):
            value = self.attrs[key]
            if isinstance(value, tuple):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = int(value)
            parts.append(f"-{key}={value}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})" if self.host is None else \
            f"Target({str(self)!r}, host={str(self.host)!r})"

    def _identity(self) -> tuple:
        return (str(self), self.host._identity() if self.host is not None else None)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except TargetError:
                return False
        return isinstance(other, Target) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


def resolve(target: Any = None) -> Target:
    """The target a build uses: `target` as a Target, else Target.current(), else "llvm"."""
    if target is None:
        return Target.current() or Target("llvm")
    return target if isinstance(target, Target) else Target(target)
