"""compiler.target.Target: TVM's tvm.target.Target for the CPU kinds relayjit compiles for.

A target is a kind ("llvm", or "c", which relayjit builds for the host exactly like "llvm")
plus typed attributes (-mcpu, -mattr, -mtriple, ...). It is parsed from TVM's string form
("llvm -mcpu=skylake -mattr=+avx2,-avx512f"), its JSON/dict form ({"kind": "llvm", ...}) or
another Target. `with Target(...):` makes it Target.current() (a Scope: compiler.target.scope,
the mechanism PassContext uses too), which relay.build uses when no target is passed.

What codegen builds for (the CPU, vector width, ... : codegen.options.CodegenOptions) is
resolved from a target once, by the build driver, which enters a Target carrying them
(`with_codegen_options`); the passes that need them (AlterOpLayout, ConvertBlockedLayout,
FoldConstant) read `codegen_options()`: the current target's when it carries them, else the
host's (a pass run on its own folds and packs for this machine, whatever target is entered).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from codegen.options import CodegenOptions
from compiler.errors import CompilerError
from .scope import Scope
from runtime.target import TargetInfo, missing_features, resolve_cpu_target

__all__ = ["Target", "TargetKind", "TargetError", "codegen_options", "cpu_target"]


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


_SCOPE: Scope = Scope("Target")


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
        self.codegen: CodegenOptions | None = None  # resolved by the build driver

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

    def with_codegen_options(self, options: CodegenOptions) -> "Target":
        """A copy carrying what codegen builds for (the build driver's resolution)."""
        target = Target(self, self.host)
        target.codegen = options
        return target

    @staticmethod
    def list_kinds() -> list[str]:
        return list(_KINDS)

    # ---- scope --------------------------------------------------------------------------
    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The innermost target entered with `with Target(...):`."""
        target = _SCOPE.current()
        if target is None and not allow_none:
            raise TargetError("Target.current(): no target is in scope; use `with Target(...):`")
        return target

    def __enter__(self) -> "Target":
        _SCOPE.enter(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _SCOPE.exit(self)

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


def cpu_target(target: Target) -> TargetInfo:
    """The CPU `target` builds for (-mcpu/-mattr/-mtriple; the host when none is given).

    Refused when this machine lacks one of its features: the build runs constant-folding
    kernels here, built for the same CPU so that they agree with the packed weight layouts."""
    try:
        cpu = resolve_cpu_target(target.mcpu, target.mattr, target.mtriple)
    except ValueError as err:
        raise CompilerError(f"relay.build: target '{target}': {err}") from None
    missing = missing_features(cpu.features)
    if missing:
        raise CompilerError(f"relay.build: target '{target}' needs CPU features this machine "
                            f"lacks: {', '.join(missing)}; build on a machine that has them")
    return cpu


def codegen_options(target: Target | None = None) -> CodegenOptions:
    """What codegen builds for under `target` (default Target.current()): the options the
    build driver resolved for it, else the host's (no overrides)."""
    target = target if target is not None else Target.current()
    if target is not None and target.codegen is not None:
        return target.codegen
    return CodegenOptions.host()
