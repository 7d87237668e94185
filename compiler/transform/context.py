"""PassInfo and PassContext: the options every pass reads; `with PassContext(...)` makes one
current (compiler.target.scope.Scope: per thread and asyncio task, the mechanism
`with Target(...)` uses too)."""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Iterable

from compiler.errors import CompilerError
from compiler.target.scope import Scope

from compiler.ir.instrument import PassInstrument


class PassInfo:
    """The static description of a pass: Sequential gates it on opt_level and runs `required`."""

    __slots__ = ("opt_level", "name", "required", "traceable")

    def __init__(self, opt_level: int, name: str, required: Iterable[str] | None = None,
                 traceable: bool = False):
        if isinstance(opt_level, bool) or not isinstance(opt_level, int):
            raise TypeError(f"PassInfo({name!r}): opt_level must be an int, got "
                            f"{type(opt_level).__name__} {opt_level!r}")
        if not isinstance(name, str) or not name:
            raise TypeError(f"PassInfo: name must be a non-empty str, got {name!r}")
        self.opt_level = opt_level
        self.name = name
        self.required = _name_list("PassInfo.required", required)
        self.traceable = traceable

    def __repr__(self) -> str:
        req = f", required={list(self.required)}" if self.required else ""
        return f"PassInfo(name={self.name!r}, opt_level={self.opt_level}{req})"


def _name_list(what: str, names) -> tuple:
    """Normalise a list of pass names; a bare string is a common slip, so it is rejected."""
    if names is None:
        return ()
    if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)):
        raise TypeError(f"{what} must be a list/tuple/set of pass names, got "
                        f"{type(names).__name__} {names!r}")
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{what} must hold pass names (str), got {type(n).__name__} {n!r}")
    return tuple(sorted(names)) if isinstance(names, (set, frozenset)) else tuple(names)


# ---------------------------------------------------------------------------------------------
# config keys

_CONFIG_KEYS: dict[str, tuple[Any, type | None]] = {}
_UNSUPPORTED: dict[str, str] = {}  # key -> why only its default is accepted


def register_pass_config(key: str, default: Any = None, value_type: type | None = None,
                         unsupported: str | None = None) -> None:
    """Declare a PassContext config key so a typo in a user's config fails loudly.

    unsupported: the key is TVM's and relayjit does not implement what it asks for; any value
    but the default is refused with this message (what relayjit does instead), never ignored.
    """
    if value_type is None and default is not None:
        value_type = type(default)
    old = _CONFIG_KEYS.get(key)
    if old is not None and old != (default, value_type):
        raise CompilerError(f"pass config {key!r} is registered twice with different defaults: "
                            f"{old[0]!r} ({_tname(old[1])}) vs {default!r} ({_tname(value_type)})")
    _CONFIG_KEYS[key] = (default, value_type)
    if unsupported is not None:
        _UNSUPPORTED[key] = unsupported


def list_pass_configs() -> dict:
    """Every registered config key with its default."""
    return {key: default for key, (default, _) in sorted(_CONFIG_KEYS.items())}


# the type keys TVM's list_configs reports for config values (a bool is an IntImm there)
_TVM_TYPE_KEYS = {bool: "IntImm", int: "IntImm", float: "FloatImm", str: "runtime.String",
                  list: "Array", tuple: "Array", dict: "Map"}


def _tname(t: type | None) -> str:
    return "any" if t is None else t.__name__


def _check_config_value(key: str, value: Any) -> Any:
    if key not in _CONFIG_KEYS:
        import difflib
        close = difflib.get_close_matches(key, _CONFIG_KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise CompilerError(f"PassContext config: unknown key {key!r}{hint}; known keys: "
                            f"{sorted(_CONFIG_KEYS)}")
    value = _typed_config_value(key, value)
    if key in _UNSUPPORTED and value != _CONFIG_KEYS[key][0]:
        raise CompilerError(f"PassContext config {key!r} = {value!r} is not supported: "
                            f"{_UNSUPPORTED[key]}")
    return value


def _typed_config_value(key: str, value: Any) -> Any:
    """The value as the key's registered type (an int for a float, 0/1 for a bool)."""
    _, value_type = _CONFIG_KEYS[key]
    if value_type is None:
        return value
    ok = isinstance(value, value_type)
    if value_type is int and isinstance(value, bool):
        ok = False
    if value_type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if value_type is bool and isinstance(value, int) and value in (0, 1):
        return bool(value)
    if not ok:
        raise CompilerError(f"PassContext config {key!r} expects {value_type.__name__}, got "
                            f"{type(value).__name__} {value!r}")
    return value


# TVM's keys. Each is read where it acts (FuseOps: passes/fuse_ops.py; the compile engine
# cache: compiler/backend/kernel_table.py; tir.disable_vectorize: the build driver's
# codegen_options_for, into CodegenOptions.vectorize) or refused when set (`unsupported`).
for _key, _default in (("relay.FuseOps.max_depth", 256), ("relay.FuseOps.link_params", False),
                       ("relay.backend.disable_compile_engine_cache", False),
                       ("tir.disable_vectorize", False)):
    register_pass_config(_key, _default)

_NO_TUNER = ("relayjit has no {0}: each operator's implementation and schedule come from "
             "relayjit's built-in schedule heuristics for the target CPU. Tuning records applied "
             "with autotvm.apply_history_best(...) are the planned way to tune (not available "
             "yet); leave this key False or unset")
register_pass_config("relay.backend.use_auto_scheduler", False,
                     unsupported=_NO_TUNER.format("auto-scheduler (Ansor)"))
register_pass_config("relay.backend.use_meta_schedule", False,
                     unsupported=_NO_TUNER.format("MetaSchedule"))


# ---------------------------------------------------------------------------------------------
# the context

_SCOPE: Scope = Scope("PassContext")
# the context current outside every `with`, made on first use in each thread (or task)
_DEFAULT: ContextVar = ContextVar("relayjit_default_pass_context", default=None)


class PassContext:
    """Options for a pipeline run (`with PassContext(opt_level=3): ...`), as tvm.transform's."""

    def __init__(self, opt_level: int = 2, required_pass=None, disabled_pass=None,
                 instruments=None, config: dict | None = None, trace=None):
        if isinstance(opt_level, bool) or not isinstance(opt_level, int):
            raise TypeError(f"PassContext: opt_level must be an int, got "
                            f"{type(opt_level).__name__} {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = _name_list("PassContext required_pass", required_pass)
        self.disabled_pass = _name_list("PassContext disabled_pass", disabled_pass)
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"PassContext: config must be a dict, got {type(config).__name__}")
        self._config = {k: _check_config_value(k, v) for k, v in (config or {}).items()}
        self._instruments = _check_instruments(instruments)
        self.trace = trace

    # --- the stack
    @staticmethod
    def current() -> "PassContext":
        """The innermost entered context, or this thread's default context (opt_level 2)."""
        ctx = _SCOPE.current()
        if ctx is not None:
            return ctx
        default = _DEFAULT.get()
        if default is None:
            default = PassContext()
            _DEFAULT.set(default)
        return default

    def __enter__(self) -> "PassContext":
        self._enter_instruments()
        _SCOPE.enter(self)
        return self

    def __exit__(self, *exc_info) -> None:
        _SCOPE.exit(self)
        self._exit_instruments()

    @staticmethod
    def list_configs() -> dict:
        """Every registered config key mapped to {"type": <TVM type key>}, as TVM's does."""
        return {key: {"type": _TVM_TYPE_KEYS.get(value_type, _tname(value_type))}
                for key, (_, value_type) in sorted(_CONFIG_KEYS.items())}

    # --- options
    @property
    def config(self) -> dict:
        """Registered defaults overlaid with this context's values."""
        return {**list_pass_configs(), **self._config}

    def get_config(self, key: str, default: Any = None) -> Any:
        """A config value: given here, else `default` if passed, else the registered default."""
        if key in self._config:
            return self._config[key]
        if key not in _CONFIG_KEYS:
            _check_config_value(key, None)
        return default if default is not None else _CONFIG_KEYS[key][0]

    def pass_enabled(self, info: PassInfo) -> bool:
        """Not disabled, and required by this context or within its opt_level."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return self.opt_level >= info.opt_level

    # --- instruments
    @property
    def instruments(self) -> list:
        return list(self._instruments)

    def override_instruments(self, instruments) -> None:
        """Exit the current instruments, then install and enter the new ones."""
        new = _check_instruments(instruments)
        self._exit_instruments()
        self._instruments = new
        self._enter_instruments()

    def _enter_instruments(self) -> None:
        entered = []
        try:
            for inst in self._instruments:
                inst.enter_pass_ctx()
                entered.append(inst)
        except BaseException:
            for inst in entered:
                inst.exit_pass_ctx()
            self._instruments = []
            raise

    def _exit_instruments(self) -> None:
        try:
            for inst in self._instruments:
                inst.exit_pass_ctx()
        except BaseException:
            self._instruments = []
            raise

    def _instrument_before(self, mod, info: PassInfo) -> bool:
        """should_run (unless the context requires the pass) then run_before_pass."""
        if not self._instruments:
            return True
        should_run = True
        if info.name not in self.required_pass:
            for inst in self._instruments:
                should_run = bool(inst.should_run(mod, info)) and should_run
        if should_run:
            for inst in self._instruments:
                inst.run_before_pass(mod, info)
        return should_run

    def _instrument_after(self, mod, info: PassInfo) -> None:
        for inst in self._instruments:
            inst.run_after_pass(mod, info)

    def __repr__(self) -> str:
        return (f"PassContext(opt_level={self.opt_level}, required_pass={list(self.required_pass)}"
                f", disabled_pass={list(self.disabled_pass)}, config={self._config})")


def _check_instruments(instruments) -> list:
    if instruments is None:
        return []
    if isinstance(instruments, PassInstrument):
        instruments = [instruments]
    out = list(instruments)
    for i, inst in enumerate(out):
        if not isinstance(inst, PassInstrument):
            raise TypeError(f"PassContext instruments[{i}]: expected a PassInstrument (derive from "
                            f"it or decorate the class with @pass_instrument), got "
                            f"{type(inst).__name__}")
    return out
