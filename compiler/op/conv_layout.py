"""Convolutions in the other data/kernel layouts TVM accepts on CPU (NHWC/HWIO, NWC/WIO,
NDHWC/DHWIO, ...), through the one implementation written for the canonical layout.

A layout is a permutation of the canonical letters (NCHW data, OIHW kernel for conv2d). The
wrappers here transpose argument types (or arrays) into the canonical layout, run the canonical
type relation (or numpy reference) with canonical attrs, and transpose the result into the
output layout (`out_layout`, or the data layout when it is ""). The compute rules do the same
with te index permutations (compiler/op/compute/conv_layout.py), which inline into the
canonical schedule, so every layout shares the canonical kernel.
"""
from __future__ import annotations

from typing import Callable

from compiler.ir.types import TensorType
from .type_relations import check_arity, fail, tensor_arg


def permutation(src: str, dst: str) -> tuple:
    """The axes of a `src`-laid-out tensor in `dst` order (numpy.transpose's argument)."""
    return tuple(src.index(c) for c in dst)


def permute(shape: tuple, perm: tuple) -> tuple:
    return tuple(shape[p] for p in perm)


def out_layout(attrs) -> str:
    return attrs.out_layout or attrs.data_layout


def is_canonical(attrs, data: str, kernel: str) -> bool:
    return attrs.data_layout == data and attrs.kernel_layout == kernel \
        and out_layout(attrs) == data


def canonical_attrs(attrs, data: str, kernel: str):
    return attrs.with_updates(data_layout=data, kernel_layout=kernel, out_layout="")


def check_layouts(op: str, attrs, data: str, kernel: str) -> None:
    """Each layout must be a permutation of the canonical one (no blocked layouts)."""
    for name, value, canon in (("data_layout", attrs.data_layout, data),
                               ("kernel_layout", attrs.kernel_layout, kernel),
                               ("out_layout", out_layout(attrs), data)):
        if sorted(value) != sorted(canon):
            raise fail(op, f"{name}={value!r} is not supported; expected a permutation of "
                           f"{canon!r} (e.g. {canon!r} or {canon[0] + canon[2:] + canon[1]!r})")


def any_layout_rel(op: str, data: str, kernel: str, rel: Callable) -> Callable:
    """The canonical type relation `rel`, for any permutation layouts."""
    def wrapped(types, attrs):
        if is_canonical(attrs, data, kernel):
            return rel(types, attrs)
        check_layouts(op, attrs, data, kernel)
        check_arity(op, types, 2)
        x, w = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "weight")
        if x.ndim != len(data) or w.ndim != len(kernel):
            raise fail(op, f"data and weight must be {len(data)}-D ({attrs.data_layout}, "
                           f"{attrs.kernel_layout}), got {x.shape} and {w.shape}")
        canon = [TensorType(permute(x.shape, permutation(attrs.data_layout, data)), x.dtype),
                 TensorType(permute(w.shape, permutation(attrs.kernel_layout, kernel)),
                            w.dtype)]
        out = rel(canon, canonical_attrs(attrs, data, kernel))
        return TensorType(permute(out.shape, permutation(data, out_layout(attrs))), out.dtype)
    return wrapped


def any_layout_ref(data: str, kernel: str, reference: Callable) -> Callable:
    """The canonical numpy reference, for any permutation layouts."""
    def wrapped(inputs, attrs):
        if is_canonical(attrs, data, kernel):
            return reference(inputs, attrs)
        x, w = inputs
        out = reference([x.transpose(permutation(attrs.data_layout, data)),
                         w.transpose(permutation(attrs.kernel_layout, kernel))],
                        canonical_attrs(attrs, data, kernel))
        return out.transpose(permutation(data, out_layout(attrs)))
    return wrapped
