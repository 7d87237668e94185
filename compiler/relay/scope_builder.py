"""relay.ScopeBuilder (TVM's): build nested let/if programs imperatively.

    sb = relay.ScopeBuilder()
    x = sb.let("x", relay.const(1))
    with sb.if_scope(cond):
        sb.ret(x)
    with sb.else_scope():
        sb.ret(relay.const(2))
    body = sb.get()

Each scope collects its let bindings and one returned value; closing it wraps the value in
the lets (a loop, innermost first), and an if/else pair becomes one If.
"""
from __future__ import annotations

from compiler.ir.expr import If, Let, RelayExpr, Var
from compiler.ir.types import Type

__all__ = ["ScopeBuilder"]


class _WithScope:
    """A context manager that runs `on_exit` when the with block ends."""

    def __init__(self, on_exit):
        self._on_exit = on_exit

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self._on_exit()


class _PendingIf:
    """An if_scope waiting for its else_scope."""

    def __init__(self, cond: RelayExpr, true_branch: RelayExpr):
        self.cond, self.true_branch = cond, true_branch


def _wrap_lets(bindings: list, value: RelayExpr | None) -> RelayExpr:
    if value is None:
        raise RuntimeError("ScopeBuilder: the scope has no return value: call ret(value)")
    if isinstance(value, _PendingIf):
        raise RuntimeError("ScopeBuilder: an if_scope needs its else_scope")
    for var, bound in reversed(bindings):
        value = Let(var, bound, value)
    return value


class ScopeBuilder:
    """Builds let bindings, if/else scopes and the returned value of a Relay expression."""

    def __init__(self):
        self._bindings: list[list] = [[]]
        self._ret_values: list = [None]

    def _enter_scope(self) -> None:
        self._bindings.append([])
        self._ret_values.append(None)

    def _exit_scope(self) -> tuple:
        return self._bindings.pop(), self._ret_values.pop()

    def let(self, var, value: RelayExpr) -> Var:
        """Bind value to var (a Var, a name, or a (name, type) pair); returns the Var."""
        if isinstance(var, (tuple, list)):
            if len(var) != 2 or not isinstance(var[1], Type):
                raise ValueError(f"ScopeBuilder.let: expected (name, type), got {var!r}")
            var = Var(var[0], var[1])
        elif isinstance(var, str):
            var = Var(var)
        elif not isinstance(var, Var):
            raise TypeError(f"ScopeBuilder.let: var must be a Var, a name or (name, type), "
                            f"got {type(var).__name__}")
        self._bindings[-1].append((var, value))
        return var

    def if_scope(self, cond: RelayExpr) -> _WithScope:
        """The true branch; an else_scope must follow."""
        self._enter_scope()

        def on_exit():
            bindings, value = self._exit_scope()
            if self._ret_values[-1] is not None:
                raise RuntimeError("ScopeBuilder: the result was already returned before this "
                                   "if_scope")
            self._ret_values[-1] = _PendingIf(cond, _wrap_lets(bindings, value))
        return _WithScope(on_exit)

    def else_scope(self) -> _WithScope:
        """The false branch of the if_scope just closed."""
        pending = self._ret_values[-1]
        if not isinstance(pending, _PendingIf):
            raise RuntimeError("ScopeBuilder: else_scope can only follow an if_scope")
        self._ret_values[-1] = None
        self._enter_scope()

        def on_exit():
            bindings, value = self._exit_scope()
            self._ret_values[-1] = If(pending.cond, pending.true_branch,
                                      _wrap_lets(bindings, value))
        return _WithScope(on_exit)

    def ret(self, value: RelayExpr) -> None:
        """Set this scope's result."""
        if self._ret_values[-1] is not None:
            raise RuntimeError("ScopeBuilder: ret value is already set in this scope")
        self._ret_values[-1] = value

    def get(self) -> RelayExpr:
        """The built expression (only at the outermost scope)."""
        if len(self._bindings) != 1:
            raise RuntimeError("ScopeBuilder: get() can only be called at the outermost scope")
        return _wrap_lets(self._bindings[-1], self._ret_values[-1])
