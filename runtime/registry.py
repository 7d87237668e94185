"""Global functions by name (TVM's tvm.register_func / tvm.get_global_func): scripts look up
the executors' constructors this way and register callbacks under their own names."""
from __future__ import annotations

from typing import Callable

from . import debug_executor, graph_executor

_FUNCS: dict[str, Callable] = {
    "tvm.graph_executor.create": graph_executor.create,
    "tvm.graph_executor_debug.create": debug_executor.create,
}


def register_func(func_name, f: Callable | None = None, override: bool = False):
    """Register `f` under `func_name`; without `f`, a decorator (also bare: @register_func)."""
    if callable(func_name) and f is None:
        return register_func(func_name.__name__, func_name)
    if not isinstance(func_name, str) or not func_name:
        raise TypeError(f"register_func: the name must be a non-empty str, got {func_name!r}")

    def register(func: Callable) -> Callable:
        if not callable(func):
            raise TypeError(f"register_func({func_name!r}): expected a callable, got "
                            f"{type(func).__name__}")
        if func_name in _FUNCS and not override:
            raise ValueError(f"register_func: {func_name!r} is already registered "
                             "(pass override=True to replace it)")
        _FUNCS[func_name] = func
        return func
    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as `name`; None when missing and allow_missing, else an error."""
    func = _FUNCS.get(name)
    if func is None and not allow_missing:
        raise ValueError(f"get_global_func: no global function {name!r}; relayjit registers "
                         f"{sorted(_FUNCS)} and what register_func added")
    return func


def list_global_func_names() -> list[str]:
    """Every registered name, sorted."""
    return sorted(_FUNCS)


def remove_global_func(name: str) -> None:
    """Unregister `name`; an error if it is not registered."""
    if name not in _FUNCS:
        raise ValueError(f"remove_global_func: {name!r} is not registered")
    del _FUNCS[name]
