"""ONNX optionals: Optional, OptionalHasElement, OptionalGetElement.

An optional is an OptionalValue in the frontend's value table (common.py says why): whether
it holds an element is known at import, so these ops fold away.
"""
from __future__ import annotations

from .common import OptionalValue, const, converter


@converter("Optional", 15)
def _optional(ctx, inputs):
    return OptionalValue(inputs[0] if inputs else None)


@converter("OptionalHasElement", 15)
def _optional_has_element(ctx, inputs):
    value = inputs[0] if inputs else None
    if isinstance(value, OptionalValue):
        value = value.element
    return const(value is not None, "bool")


@converter("OptionalGetElement", 15)
def _optional_get_element(ctx, inputs):
    value = inputs[0] if inputs else None
    if isinstance(value, OptionalValue):
        value = value.element
    if value is None:
        raise ctx.error("the optional input is empty (OptionalGetElement needs a value)")
    return value
