"""Type checks shared by the QNN ops: quantized dtypes and the shapes of scales and zero points
(TVM's AssignType: a scalar, a one-element vector, or a vector along the quantization axis; a
tensor of the data's rank that broadcasts to it is relayjit's addition, for ONNX's blocked
quantization)."""
from __future__ import annotations

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import Constant
from compiler.ir.types import TensorType
from .qnn_math import QUANT_RANGES
from .type_relations import dims_agree, fail, tensor_arg

QUANT_DTYPES = tuple(QUANT_RANGES)
FLOAT_INPUTS = ("float32", "float16", "bfloat16", "float64")
SCALE_DTYPE, ZERO_POINT_DTYPE = "float32", "int32"


def check_dtype(op: str, ty: TensorType, allowed: tuple, name: str) -> None:
    if ty.dtype not in allowed:
        raise fail(op, f"{name} must have one of the dtypes {list(allowed)}, got {ty.dtype}")


def quant_axis(op: str, attrs, rank: int, name: str = "axis") -> int | None:
    """The normalized quantization axis; None when out of range, which only matters to a
    parameter along it (per-tensor parameters ignore the axis, as in TVM)."""
    axis = getattr(attrs, name)
    return axis % rank if -rank <= axis < rank else None


def check_param(op: str, types, index: int, name: str, dtype: str, data: TensorType,
                axis: int, per_axis: bool = True) -> TensorType:
    """Argument `index` as a scale (float32) or zero point (int32) for `data` quantized along
    `axis`: a scalar or one-element vector, a vector of data.shape[axis] values (when
    per_axis), or a tensor of data's rank that broadcasts to it."""
    ty = tensor_arg(op, types, index, name)
    if ty.dtype != dtype:
        raise fail(op, f"{name} must be {dtype}, got {ty.dtype}")
    if ty.ndim == 0 or ty.shape == (1,):
        return ty
    if not per_axis:
        raise fail(op, f"{name} must be a scalar (per-tensor quantization), got shape "
                       f"{ty.shape}")
    if axis is None:
        raise fail(op, f"{name} has shape {ty.shape}, but the quantization axis is out of "
                       f"range for data of rank {data.ndim}")
    if ty.ndim == 1 and data.ndim > 0:
        if not dims_agree(op, ty.shape[0], data.shape[axis],
                          f"{name} has as many values as axis {axis} of the data"):
            raise fail(op, f"{name} has {ty.shape[0]} values but axis {axis} of the data "
                           f"{data.shape} has {data.shape[axis]}")
        return ty
    if ty.ndim == data.ndim and all(p == 1 or dims_agree(op, p, d, f"{name} broadcasts to "
                                                                     f"the data {data.shape}")
                                    for p, d in zip(ty.shape, data.shape)):
        return ty
    raise fail(op, f"{name} of shape {ty.shape} does not fit data {data.shape} quantized "
                   f"along axis {axis}: expected a scalar, a vector along the axis or a "
                   f"rank-{data.ndim} tensor that broadcasts to the data")


def check_params(op: str, types, first: int, data: TensorType, axis: int,
                 per_axis: bool = True, names=("scale", "zero_point")) -> None:
    """A (scale, zero point) pair at argument indices first, first + 1."""
    check_param(op, types, first, names[0], SCALE_DTYPE, data, axis, per_axis)
    check_param(op, types, first + 1, names[1], ZERO_POINT_DTYPE, data, axis, per_axis)


def quantized_data(op: str, types, index: int, name: str = "data",
                   allowed: tuple = QUANT_DTYPES) -> TensorType:
    ty = tensor_arg(op, types, index, name)
    check_dtype(op, ty, allowed, name)
    return ty


def check_constants(op: str, scale=None, zero_point=None, dtype: str | None = None) -> None:
    """Constant parameters given to a constructor: a scale must be finite and non-zero, a zero
    point inside the range of the quantized dtype (a CompilerError naming the op)."""
    if isinstance(scale, Constant):
        value = scale.data.numpy().astype(np.float64).reshape(-1)
        bad = ~np.isfinite(value) | (value == 0)
        if bad.any():
            raise CompilerError(f"{op}: the scale must be finite and non-zero, got "
                                f"{value[bad][:4].tolist()}")
    if isinstance(zero_point, Constant) and dtype in QUANT_RANGES:
        lo, hi = QUANT_RANGES[dtype]
        value = zero_point.data.numpy().astype(np.int64).reshape(-1)
        bad = (value < lo) | (value > hi)
        if bad.any():
            raise CompilerError(f"{op}: the zero point {value[bad][:4].tolist()} is outside "
                                f"the range [{lo}, {hi}] of {dtype}")
