"""Evaluate TIR index expressions at concrete loop values (tests that walk generated loops
and check the addresses a kernel is handed)."""
from __future__ import annotations

from codegen.tir.expr import BinaryOp, Cast, IntImm, Load, Select, Var

_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "min": min,
           "max": max, "lt": lambda a, b: a < b, "gt": lambda a, b: a > b,
           "le": lambda a, b: a <= b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b,
           "and": lambda a, b: a and b}


def index_value(e, env: dict) -> int:
    """The integer e evaluates to with env's values for its variables."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Cast):
        return int(index_value(e.value, env))
    if isinstance(e, Select):
        return index_value(e.a, env) if index_value(e.cond, env) else index_value(e.b, env)
    if isinstance(e, BinaryOp):
        return _BINARY[e.kind](index_value(e.a, env), index_value(e.b, env))
    raise TypeError(f"unexpected index expression {type(e).__name__}")


def flat_index(load: Load, env: dict) -> int:
    """The element offset of load in its buffer."""
    return sum(index_value(i, env) * st
               for i, st in zip(load.indices, load.buffer.elem_strides()))
