"""IRModule: the unit passes transform; maps GlobalVars to functions."""
from __future__ import annotations

from typing import Mapping

from .expr import VERSION_HEADER, Function, GlobalVar, RelayExpr, print_text
from .vars import free_vars


def _refuse_type_definitions(type_definitions) -> None:
    if type_definitions:
        raise NotImplementedError("IRModule: type definitions (algebraic data types) are not "
                                  "supported by relayjit")


class IRModule:
    """A set of global functions; `main` is the entry point."""

    def __init__(self, functions: Mapping | None = None, type_definitions=None, attrs=None):
        _refuse_type_definitions(type_definitions)
        self._functions: dict[GlobalVar, Function] = {}
        self.attrs = dict(attrs or {})
        for key, func in (functions or {}).items():
            self[key] = func

    @staticmethod
    def from_expr(expr: RelayExpr, functions: Mapping | None = None,
                  type_defs=None) -> "IRModule":
        """Wrap an expression as @main (free vars become parameters if it is not a function)."""
        _refuse_type_definitions(type_defs)
        mod = IRModule(functions)
        if not isinstance(expr, Function):
            expr = Function(free_vars(expr), expr)
        mod["main"] = expr
        return mod

    def import_from_std(self, file_to_import: str) -> None:
        """TVM's prelude import: refused, as ADTs are (not silently skipped)."""
        raise NotImplementedError(
            f"IRModule.import_from_std({file_to_import!r}): the Relay prelude needs algebraic "
            "data types, which relayjit does not support; use Tuple/TupleGetItem for records "
            "and If with relay.vm.compile for control flow")

    @property
    def functions(self) -> dict:
        return dict(self._functions)

    def get_global_var(self, name: str) -> GlobalVar:
        for gv in self._functions:
            if gv.name_hint == name:
                return gv
        raise KeyError(f"IRModule has no function named {name!r}; it has "
                       f"{[g.name_hint for g in self._functions]}")

    def get_global_vars(self) -> list:
        return list(self._functions)

    def _key(self, key) -> GlobalVar:
        if isinstance(key, GlobalVar):
            return key
        if isinstance(key, str):
            for gv in self._functions:
                if gv.name_hint == key:
                    return gv
            return GlobalVar(key)
        raise TypeError(f"IRModule keys are names or GlobalVars, got {type(key).__name__}")

    def __getitem__(self, key) -> Function:
        gv = self.get_global_var(key) if isinstance(key, str) else key
        if gv not in self._functions:
            raise KeyError(f"IRModule has no function {gv.name_hint!r}")
        return self._functions[gv]

    def __setitem__(self, key, func) -> None:
        self.add(self._key(key), func)

    def add(self, gv, func, update: bool = True) -> "IRModule":
        if not isinstance(func, Function):
            raise TypeError(f"IRModule[{getattr(gv, 'name_hint', gv)!r}] must be a relay "
                            f"Function, got {type(func).__name__}")
        gv = self._key(gv)
        if not update and gv in self._functions:
            raise ValueError(f"IRModule already has a function {gv.name_hint!r}")
        self._functions[gv] = func
        return self

    def update(self, other) -> None:
        """Add other's functions under other's own GlobalVars (TVM's IRModule.Update), so
        `self[other.get_global_var(name)]` works and calls inside them keep resolving; a
        function of the same name here is replaced."""
        items = other.functions.items() if isinstance(other, IRModule) else other.items()
        for key, func in items:
            if isinstance(key, GlobalVar):
                for old in [gv for gv in self._functions if gv.name_hint == key.name_hint]:
                    del self._functions[old]
            self[key] = func

    def update_func(self, gv: GlobalVar, func: Function) -> None:
        self._functions[gv] = func

    def __contains__(self, key) -> bool:
        if isinstance(key, str):
            return any(gv.name_hint == key for gv in self._functions)
        return key in self._functions

    def __iter__(self):
        return iter(self._functions.items())

    def astext(self, show_meta_data: bool = True, annotate=None) -> str:
        """TVM's text form, with its version header first (str() leaves it out)."""
        return VERSION_HEADER + print_text(self, show_meta_data, annotate)

    def __str__(self) -> str:
        return print_text(self)

    __repr__ = __str__

    def with_attr(self, key: str, value) -> "IRModule":
        """A copy of this module (same functions) with one module attribute set."""
        mod = self.shallow_copy()
        mod.attrs[key] = value
        return mod

    def get_attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def same_as(self, other) -> bool:
        return self is other

    def holds_the_same(self, other: "IRModule") -> bool:
        """The same function objects under the same GlobalVars and equal attrs (what a pass
        that changed nothing returns; TVM then hands back the input module itself)."""
        return (self._functions.keys() == other._functions.keys()
                and all(f is other._functions[gv] for gv, f in self._functions.items())
                and self.attrs == other.attrs)

    def shallow_copy(self) -> "IRModule":
        mod = IRModule()
        mod._functions = dict(self._functions)
        mod.attrs = dict(self.attrs)
        return mod
