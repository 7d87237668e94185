"""The affine types FakeQuantizationToInteger propagates and what its rules share: the rule
registry (op attribute FTVMFakeQuantizationToInteger), type comparison, requantization."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import Call, Constant, RelayExpr, const
from compiler.op import qnn
from compiler.op.interpreter import small_constant_value
from compiler.op.registry import get_def

FQ2I = "FTVMFakeQuantizationToInteger"  # the op attribute holding a rule (TVM's name)


class RewriteNotApplicable(CompilerError):
    """A rule cannot rewrite this call (unsupported parameters or attributes)."""


@dataclass(frozen=True, eq=False)
class TensorAffineType:
    """real = (q - zero_point) * scale, q of dtype; scale/zero point per tensor or along axis
    (TVM's tvm.ir.TensorAffineType)."""

    scale: RelayExpr
    zero_point: RelayExpr
    dtype: str
    axis: int = -1


@dataclass(frozen=True, eq=False)
class TupleAffineType:
    types: tuple


class AffineTypeMap(dict):
    """expr -> affine type, with `source`: the float call a rule replaces."""

    source: Call


def register_fake_quantization_to_integer(op_name: str, func: Callable | None = None,
                                          level: int = 10):
    """Register func(expr, type_map) -> [expr, affine type] as op_name's rewrite rule (TVM's
    relay.op.register_fake_quantization_to_integer); a decorator without func."""
    def register(fn):
        get_def(op_name).set_attr(FQ2I, fn, level)
        return fn
    return register if func is None else register(func)


def same_params(a: RelayExpr, b: RelayExpr) -> bool:
    """Two scales or zero points that are the same expression or of equal constant values
    (constants, or small closed expressions of them: the ONNX frontend casts each zero point
    where it is read)."""
    if a is b:
        return True
    x, y = small_constant_value(a), small_constant_value(b)
    if x is None or y is None:
        return False
    return x.dtype == y.dtype and np.array_equal(x.reshape(-1) if x.size == 1 else x,
                                                 y.reshape(-1) if y.size == 1 else y)


def same_type(a: TensorAffineType, b: TensorAffineType) -> bool:
    return a.dtype == b.dtype and same_params(a.scale, b.scale) and \
        same_params(a.zero_point, b.zero_point)


def _size(param: RelayExpr) -> int:
    return param.data.numpy().size if type(param) is Constant else -1


def requantize_to(expr: RelayExpr, have: TensorAffineType, want: TensorAffineType
                  ) -> RelayExpr:
    """expr (of type `have`) in the type `want`. An int32 accumulator is requantized in
    float32, ties to even (onnxruntime's requantisation); an 8-bit value is dequantized and
    quantized again, the float program's own arithmetic, so such a rewrite is exact."""
    if same_type(have, want):
        return expr
    per_channel = [t.axis for t in (have, want) if _size(t.scale) != 1 or
                   _size(t.zero_point) != 1]
    if len(set(per_channel)) > 1:
        raise RewriteNotApplicable(f"requantizing between quantization axes {per_channel}")
    axis = per_channel[0] if per_channel else -1
    if have.dtype != "int32":
        value = qnn.dequantize(expr, have.scale, have.zero_point, axis=have.axis)
        return qnn.quantize(value, want.scale, want.zero_point, axis=want.axis,
                            out_dtype=want.dtype)
    return qnn.requantize(expr, have.scale, _uniform(have.zero_point), want.scale,
                          _uniform(want.zero_point), axis=axis, rounding="TONEAREST_EVEN",
                          compute_dtype="float32", out_dtype=want.dtype)


def _uniform(zero_point: RelayExpr) -> RelayExpr:
    """A zero point of one value (a per-channel accumulator's zeros) as that scalar: the
    requantisation's kernel then knows it (InlineQuantizationScalars)."""
    value = small_constant_value(zero_point)
    if value is None or value.size == 0 or not (value == value.flat[0]).all():
        return zero_point
    return const(value.flat[0].astype(value.dtype), str(value.dtype))




def type_of(expr: RelayExpr):
    """The checked type of an expression of the typed function (a parameter's annotation)."""
    if expr._checked_type is not None:
        return expr._checked_type
    if getattr(expr, "type_annotation", None) is not None:
        return expr.type_annotation
    raise CompilerError("FakeQuantizationToInteger: the function is not typed; run InferType")
