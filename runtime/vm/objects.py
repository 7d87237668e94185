"""Values a VM register holds besides tensors: tuples (ADTs) and closures.

Inside the VM a tensor is a numpy array over pool storage, a tuple a plain Python tuple
(AllocADT with tag 0) and a function value a VMClosure. What invoke returns wraps them the
way TVM's does: tensors as NDArray, tuples as ADT (a tuple with a `tag`).
"""
from __future__ import annotations

from typing import Any


class ADT(tuple):
    """An algebraic data type value: its fields, and the constructor's tag (0 for tuples)."""

    def __new__(cls, tag: int, fields: Any = ()):
        obj = super().__new__(cls, fields)
        obj._tag = tag
        return obj

    @property
    def tag(self) -> int:
        """The constructor's tag (0 for a tuple)."""
        return self._tag

    def __repr__(self) -> str:
        return f"ADT(tag={self._tag}, {tuple(self)!r})"


class VMClosure:
    """A function value: the VM function's index and the values it captured (its first
    parameters; the call's arguments follow them)."""

    __slots__ = ("func_index", "captured")

    def __init__(self, func_index: int, captured: tuple) -> None:
        self.func_index = func_index
        self.captured = captured

    def __repr__(self) -> str:
        return f"VMClosure(function {self.func_index}, {len(self.captured)} captured)"
