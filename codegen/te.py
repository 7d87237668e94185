"""Tensor expressions: the contract per-op compute rules are written against.

A `Tensor` is a placeholder (an input buffer), a compute (a body expression over its axis
variables) or an extern (a TIR statement writing its buffer). Indexing a placeholder or a
materialized tensor gives a `tir.Load`; indexing any other compute tensor inlines its body
with the indices substituted, so elementwise chains lower to one loop nest. Bodies that
contain a reduction are always materialized. Axis variables and indices are int64 Exprs.
A float16 stage computes in float32 and rounds its result to half (tir/half.py), so each
op's result is a half even when the stage is inlined into its consumer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from typing import Any, Callable, Sequence

from .errors import CodegenError
from .tir import half
from .tir.dtype import INDEX_DTYPE, as_dtype, is_bool, is_float, is_integer
from .tir.expr import REDUCE_KINDS, Expr, IntImm, Load, Reduce, Var
from .tir.functor import post_order, substitute
from .tir.ops import cast, convert
from .tir.stmt import Buffer, ConstantBuffer, Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class StageBuffer(Buffer):
    """The buffer a compute/extern tensor is materialized into; knows its producer."""

    producer: Any = None

    __hash__ = object.__hash__


class Tensor:
    """An n-d tensor expression with a static shape; index it with t[i, j, ...]."""

    __slots__ = ("name", "shape", "dtype", "kind", "axis", "body", "buffer", "materialized",
                 "extern_inputs", "extern_fn", "kernel_attrs", "__weakref__")

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str, kind: str) -> None:
        self.name, self.shape, self.dtype, self.kind = name, shape, dtype, kind
        self.axis: tuple[Var, ...] = ()
        self.body: Expr | None = None
        self.materialized = kind != "compute"
        self.extern_inputs: tuple[Tensor, ...] = ()
        self.extern_fn: Callable[[list[Buffer], list[Buffer]], Stmt] | None = None
        self.kernel_attrs: dict = {}  # what an extern asks of the kernel it ends up in
        if kind == "placeholder":
            self.buffer: Buffer = Buffer(name, shape, dtype)
        else:
            self.buffer = StageBuffer(name, shape, dtype, producer=self)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __getitem__(self, indices: Any) -> Expr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise CodegenError(
                f"tensor {self.name}: expected {len(self.shape)} indices, got {len(indices)}"
            )
        idx = tuple(_index(i, self.name) for i in indices)
        if self.materialized:
            return Load(self.buffer, idx, self.dtype)
        return substitute(self.body, dict(zip(self.axis, idx)))

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype}, {self.kind})"


def _index(i: Any, name: str) -> Expr:
    if isinstance(i, Expr):
        if not is_integer(i.dtype):
            raise CodegenError(f"tensor {name}: index must be an integer, got {i.dtype}")
        return cast(i, INDEX_DTYPE)
    if isinstance(i, (int,)) or hasattr(i, "__index__"):
        return IntImm(int(i), INDEX_DTYPE)
    raise CodegenError(f"tensor {name}: index must be an int or tir Expr, got {type(i).__name__}")


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    out = []
    for d in shape:
        if isinstance(d, IntImm):
            d = d.value
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise CodegenError(f"{what}: shape must be static ints >= 0, got {tuple(shape)!r}")
        out.append(int(d))
    return tuple(out)


def placeholder(shape: Sequence[int], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor backed by a kernel parameter buffer."""
    return Tensor(name, _shape(shape, f"placeholder {name}"), as_dtype(dtype), "placeholder")


def constant(data: np.ndarray, name: str = "constant") -> Tensor:
    """A tensor whose values are compiled into the kernel (read from a ConstantBuffer)."""
    array = np.ascontiguousarray(data)
    t = Tensor(name, _shape(array.shape, f"constant {name}"), as_dtype(str(array.dtype)),
               "constant")
    t.buffer = ConstantBuffer(name, t.shape, t.dtype, data=array.tobytes())
    return t


def compute(shape: Sequence[int], fcompute: Callable[..., Any], name: str = "compute",
            dtype: str | None = None) -> Tensor:
    """A tensor whose element at the axis indices is fcompute(*indices) (dtype inferred)."""
    shape = _shape(shape, f"compute {name}")
    t = Tensor(name, shape, "float32", "compute")
    t.axis = tuple(Var(f"{name}_i{d}", INDEX_DTYPE) for d in range(len(shape)))
    try:
        body = convert(fcompute(*t.axis))
    except CodegenError as err:
        raise CodegenError(f"compute {name}: {err}") from None
    if dtype is not None:
        body = cast(body, dtype)
    nodes = post_order(body)
    if any(n.dtype in half.NARROW for n in nodes):  # one op: float32 inside, one rounding
        body = half.promote(body)
    t.dtype = body.dtype
    t.buffer = StageBuffer(name, shape, body.dtype, producer=t)
    t.body = body
    t.materialized = any(type(n) is Reduce for n in nodes)
    return t


def materialize(t: Tensor) -> Tensor:
    """Force t into its own buffer (use for values read many times); returns a tensor."""
    if t.materialized:
        return t
    out = Tensor(t.name, t.shape, t.dtype, "compute")
    out.axis = tuple(Var(f"{t.name}_m{d}", INDEX_DTYPE) for d in range(t.ndim))
    out.body = substitute(t.body, dict(zip(t.axis, out.axis)))
    out.materialized = True
    return out


def extern(shape: Sequence[int], inputs: Sequence[Tensor],
           fcompute: Callable[[list[Buffer], list[Buffer]], Stmt], dtype: str = "float32",
           name: str = "extern", kernel_attrs: dict | None = None) -> Tensor:
    """A tensor written by hand-made TIR: fcompute(input buffers, [output buffer]) -> Stmt.

    kernel_attrs go into the attrs of the PrimFunc that computes it (e.g.
    "prefer_vector_width", which codegen.llvm.emit passes on to LLVM)."""
    t = Tensor(name, _shape(shape, f"extern {name}"), as_dtype(dtype), "extern")
    t.extern_inputs = tuple(materialize(x) for x in inputs)
    t.extern_fn = fcompute
    t.kernel_attrs = dict(kernel_attrs or {})
    return t


def reduce_axis(dom: int | tuple[int, int], name: str = "k") -> Var:
    """A reduction variable over range(extent) or range(start, end) for a (start, end) pair."""
    if isinstance(dom, int):
        start, extent = 0, dom
    else:
        start, end = (int(x.value) if isinstance(x, IntImm) else int(x) for x in dom)
        extent = end - start
    if extent < 0:
        raise CodegenError(f"reduce_axis {name}: negative extent {extent}")
    return Var(name, INDEX_DTYPE, (start, extent))


def _axes(axis: Any, what: str) -> tuple[Var, ...]:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not isinstance(a, Var) or a.dom is None:
            raise CodegenError(f"{what}: axis must be te.reduce_axis variables, got {a!r}")
    return axes


def _reduce(kind: str, expr: Any, axis: Any, where: Any, dtype: str | None = None) -> Reduce:
    assert kind in REDUCE_KINDS
    expr = convert(expr)
    if is_bool(expr.dtype) and kind in ("sum", "prod"):
        raise CodegenError(f"te.{kind}: cannot reduce bool; cast to a number first")
    w = None if where is None else convert(where)
    if w is not None and not is_bool(w.dtype):
        raise CodegenError(f"te.{kind}: where must be bool, got {w.dtype}")
    return Reduce(kind, expr, _axes(axis, f"te.{kind}"), dtype or expr.dtype, w)


def sum(expr: Any, axis: Any, where: Any = None) -> Expr:  # noqa: A001 - TVM name
    """Sum over reduce axes (float sums may be reassociated for vectorisation)."""
    return _reduce("sum", expr, axis, where)


def prod(expr: Any, axis: Any, where: Any = None) -> Expr:
    """Product over reduce axes."""
    return _reduce("prod", expr, axis, where)


def max(expr: Any, axis: Any, where: Any = None) -> Expr:  # noqa: A001 - TVM name
    """Maximum over reduce axes (NaN propagates; identity -inf / dtype min)."""
    return _reduce("max", expr, axis, where)


def min(expr: Any, axis: Any, where: Any = None) -> Expr:  # noqa: A001 - TVM name
    """Minimum over reduce axes (NaN propagates; identity +inf / dtype max)."""
    return _reduce("min", expr, axis, where)


def argmax(expr: Any, axis: Any, index_dtype: str = "int64", select_last: bool = False) -> Expr:
    """Index of the first (or last) maximum along the axes (row-major over several axes).

    NaN counts as the maximum, like numpy.argmax.
    """
    kind = "argmax_last" if select_last else "argmax"
    return _reduce(kind, expr, axis, None, _index_dtype(index_dtype))


def argmin(expr: Any, axis: Any, index_dtype: str = "int64", select_last: bool = False) -> Expr:
    """Index of the first (or last) minimum along the axes; NaN counts as the minimum."""
    kind = "argmin_last" if select_last else "argmin"
    return _reduce(kind, expr, axis, None, _index_dtype(index_dtype))


def _index_dtype(dtype: str) -> str:
    dtype = as_dtype(dtype)
    if not is_integer(dtype):
        raise CodegenError(f"argmax/argmin: index_dtype must be an integer dtype, got {dtype}")
    return dtype


def is_float_tensor(t: Tensor) -> bool:
    """True when the tensor holds floats."""
    return is_float(t.dtype)
