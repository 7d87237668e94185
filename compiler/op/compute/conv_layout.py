"""Compute rules of convolutions in non-canonical layouts (see compiler/op/conv_layout.py):
transpose the inputs into the canonical layout, run the canonical rule, transpose back.

The transposes are te index permutations, so they inline into the canonical schedule's loads
and the output stage: no copy is made unless the schedule materializes its input anyway.
"""
from __future__ import annotations

from typing import Callable

from compiler.ir.types import TensorType
from compiler.op.conv_layout import (canonical_attrs, is_canonical, out_layout, permutation,
                                     permute)
from .common import te


def transpose(x: te.Tensor, perm: tuple, name: str) -> te.Tensor:
    """x with its axes taken in `perm` order (as numpy.transpose)."""
    if perm == tuple(range(len(perm))):
        return x

    def f(*i):
        src = [None] * len(perm)
        for k, p in enumerate(perm):
            src[p] = i[k]
        return x[tuple(src)]
    return te.compute(permute(x.shape, perm), f, name=name)


def any_layout(data: str, kernel: str, rule: Callable) -> Callable:
    """The canonical compute `rule`, for any permutation layouts."""
    def wrapped(inputs, attrs, out_type):
        if is_canonical(attrs, data, kernel):
            return rule(inputs, attrs, out_type)
        x, w = inputs
        x = transpose(x, permutation(attrs.data_layout, data), "T_data_" + data)
        w = transpose(w, permutation(attrs.kernel_layout, kernel), "T_kernel_" + kernel)
        canon_out = TensorType(permute(out_type.shape, permutation(out_layout(attrs), data)),
                               out_type.dtype)
        out = rule([x, w], canonical_attrs(attrs, data, kernel), canon_out)
        return transpose(out, permutation(data, out_layout(attrs)), "T_out_" + out_layout(attrs))
    wrapped.__name__ = getattr(rule, "__name__", "rule")
    return wrapped
