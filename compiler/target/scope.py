"""Scope: the one mechanism behind the TVM-facing `with` scopes (`with Target(...)`,
`with PassContext(...)`): a stack of entered objects held in a ContextVar, so each thread and
each asyncio task sees its own, and an object is current exactly inside its `with` block.
(Here, in the target's layer, the lowest both scopes' modules import.)
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Generic, TypeVar

from compiler.errors import CompilerError

__all__ = ["Scope"]

T = TypeVar("T")


class Scope(Generic[T]):
    """A stack of entered objects of one kind (`what` names them in errors)."""

    def __init__(self, what: str):
        self.what = what
        self._stack: ContextVar[tuple] = ContextVar(f"relayjit_scope_{what}", default=())

    def enter(self, obj: T) -> None:
        self._stack.set(self._stack.get() + (obj,))

    def exit(self, obj: T) -> None:
        """Leave obj's scope; it must be the innermost one."""
        stack = self._stack.get()
        if not stack or stack[-1] is not obj:
            raise CompilerError(f"{self.what} exited out of order: the one being exited is not "
                                f"the innermost one")
        self._stack.set(stack[:-1])

    def current(self) -> T | None:
        """The innermost entered object, or None."""
        stack = self._stack.get()
        return stack[-1] if stack else None
