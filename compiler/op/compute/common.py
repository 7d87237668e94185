"""Helpers shared by the compute rules: registration, errors, broadcasting, index arithmetic."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from codegen import te, tir
from codegen.errors import LoweringError
from codegen.tir.dtype import is_bool, is_float, is_int, is_integer, max_value, min_value
from compiler.ir.types import TensorType, TupleType
from compiler.op.registry import _REGISTRY, list_ops, register_compute

Expr = tir.Expr


def rule(*names: str) -> Callable:
    """Register fn for several ops; unknown names are skipped so the coverage test reports them."""
    def decorate(fn: Callable) -> Callable:
        list_ops()
        for name in names:
            if name in _REGISTRY:
                register_compute(name)(fn)
        return fn
    return decorate


def in_float32(fn: Callable) -> Callable:
    """Wrap a multi-stage rule so float16 runs in float32 with one rounding per output.

    Each te.compute stage of float16 rounds its result to half (one stage = one op); an op
    made of several stages (softmax: max, exp, sum, divide) whose reference computes wide
    and casts once would round in between. The wrapped rule sees float32 views of float16
    inputs (inlined, exact) and a float32 out_type; its float16 outputs are rounded once.
    """
    def wrapped(inputs, attrs, out_type):
        fields = out_type.fields if isinstance(out_type, TupleType) else [out_type]
        if not any(getattr(t, "dtype", None) == "float16" for t in [*inputs, *fields]):
            return fn(inputs, attrs, out_type)
        wide = [te.compute(t.shape, lambda *i, t=t: tir.cast(t[i], "float32"), name=t.name)
                if isinstance(t, te.Tensor) and t.dtype == "float16" else t for t in inputs]
        wide_types = [TensorType(t.shape, "float32") if t.dtype == "float16" else t
                      for t in fields]
        result = fn(wide, attrs, TupleType(wide_types) if isinstance(out_type, TupleType)
                    else wide_types[0])
        outs = result if isinstance(result, tuple) else (result,)
        outs = tuple(te.compute(r.shape, lambda *i, r=r: tir.cast(r[i], t.dtype), name=r.name)
                     if r.dtype != t.dtype else r for r, t in zip(outs, fields))
        return outs if isinstance(result, tuple) else outs[0]
    wrapped.__name__ = getattr(fn, "__name__", "rule")
    return wrapped


def fail(op: str, msg: str) -> LoweringError:
    """The error a compute rule raises for something it cannot lower."""
    return LoweringError(f"{op}: {msg}")


def tensor_name(op: str) -> str:
    """A readable stage name for an op ('nn.conv2d' -> 'T_conv2d')."""
    return "T_" + op.split(".")[-1]


def broadcast_indices(shape: Sequence[int], out_shape: Sequence[int],
                      idx: Sequence[Expr]) -> tuple:
    """Indices into a tensor of `shape` broadcast to out_shape (right-aligned; size-1 -> 0)."""
    lead = len(out_shape) - len(shape)
    return tuple(0 if d == 1 and out_shape[lead + k] != 1 else idx[lead + k]
                 for k, d in enumerate(shape))


def bcast(t: te.Tensor, out_shape: Sequence[int], idx: Sequence[Expr]) -> Expr:
    """t read at the output position idx under numpy broadcasting."""
    return t[broadcast_indices(t.shape, out_shape, idx)]


def ravel(idx: Sequence[Expr], shape: Sequence[int]) -> Expr:
    """Row-major flat index of idx in shape (int64)."""
    flat: Any = 0
    for i, d in zip(idx, shape):
        flat = flat * d + i
    return tir.convert(flat) if not isinstance(flat, Expr) else flat


def unravel(flat: Expr, shape: Sequence[int]) -> tuple:
    """Row-major multi-index of a flat index; the simplifier removes the div/mod it can."""
    out = []
    for d in reversed(shape):
        out.append(tir.floormod(flat, d) if d != 1 else tir.const(0, "int64"))
        flat = tir.floordiv(flat, d) if d != 1 else flat
    return tuple(reversed(out))


def to_bool(x: Expr) -> Expr:
    """Truth value of a number (x != 0; NaN is true, like numpy)."""
    return x if is_bool(x.dtype) else tir.ne(x, tir.const(0, x.dtype))


def scalar(t: te.Tensor) -> Expr:
    """The value of a 0-d (or one-element) tensor."""
    return t[(0,) * t.ndim]


def clamp(i: Expr, lo: int, hi: int) -> Expr:
    """min(max(i, lo), hi) on int64 indices."""
    return tir.min(tir.max(i, lo), hi)


def normalize_index(op: str, i: Expr, n: int, mode: str = "clip") -> Expr:
    """An int64 index into an axis of length n: clip clamps, wrap is floor-mod; fast (TVM's
    unchecked mode, and ONNX's semantics) counts negatives from the end once and checks the
    range at run time: the kernel fails with an index error instead of reading out of
    bounds or silently clamping (tir.ops.checked_index)."""
    i = tir.cast(i, "int64")
    if n == 0:
        return tir.const(0, "int64")
    if mode == "wrap":
        return tir.floormod(i, n)
    if mode == "clip":
        return clamp(i, 0, n - 1)
    return tir.checked_index(i, n)


def const_of(value: float | int | bool, dtype: str) -> Expr:
    """A constant of dtype (bools from truth, ints saturate into range rather than wrap)."""
    if is_bool(dtype):
        return tir.const(int(bool(value)), dtype)
    if is_integer(dtype):
        return tir.const(int(max(min(int(value), max_value(dtype)), min_value(dtype))), dtype)
    return tir.const(value, dtype)


def is_signed(dtype: str) -> bool:
    return is_int(dtype)


__all__ = ["rule", "in_float32", "fail", "tensor_name", "broadcast_indices", "bcast", "ravel", "unravel",
           "to_bool", "scalar", "clamp", "normalize_index", "const_of", "is_float", "is_bool",
           "is_integer", "is_signed", "te", "tir", "Expr"]
