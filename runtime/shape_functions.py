"""Named shape functions a ShapeProgram calls: output shapes of ops whose shapes depend on
input *values* (dyn.reshape's new shape, arange's stop, argwhere's count), or of custom ops
registered with relay.op.register_shape_func.

Each has TVM's shape-function signature, `fn(attrs, inputs, out_ndims) -> [shape, ...]`:
inputs holds, per op input, its shape as an int64 vector or, for a data-dependent input, its
value; the result is one int64 shape vector per output. They live in the runtime because the
VM runs them without the compiler; a program names them, so a saved program loads only where
the same names are registered. The built-in ones are in runtime.shape_functions_builtin.
"""
from __future__ import annotations

from typing import Callable

_SHAPE_FUNCTIONS: dict[str, Callable] = {}


class ShapeFuncAttrs(dict):
    """An op's attributes as a shape function sees them: attrs.axis as well as attrs["axis"]."""

    def __getattr__(self, key: str):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"shape function attrs have no {key!r}; they have "
                                 f"{sorted(self)}") from None


def register_shape_function(name: str, fn: Callable, override: bool = False) -> Callable:
    """Make fn callable from shape programs as `name`; a second registration of a name is an
    error unless override is set (relay.op.register_shape_func's level decides that)."""
    if not callable(fn):
        raise TypeError(f"shape function {name!r} must be callable, got {type(fn).__name__}")
    if name in _SHAPE_FUNCTIONS and not override and _SHAPE_FUNCTIONS[name] is not fn:
        raise ValueError(f"a shape function named {name!r} is already registered")
    _SHAPE_FUNCTIONS[name] = fn
    return fn


def shape_function(name: str) -> Callable:
    """Decorator form of register_shape_function (for the built-in ones)."""
    def decorate(fn: Callable) -> Callable:
        return register_shape_function(name, fn)
    return decorate


def has_shape_function(name: str) -> bool:
    return name in _SHAPE_FUNCTIONS


def get_shape_function(name: str) -> Callable:
    try:
        return _SHAPE_FUNCTIONS[name]
    except KeyError:
        raise KeyError(f"no shape function named {name!r} is registered") from None
