"""QNN ops that change representation: quantize, dequantize, requantize and TVM's simulated
quantize/dequantize (float in, float out), with TVM's names, arguments and attributes.

The arithmetic is defined once in qnn_math (numpy); compiler/op/compute/qnn.py computes the
same bits. Scales and zero points are Relay expressions (float32 and int32), per tensor or
along `axis`. requantize's `rounding` and `compute_dtype` default to the current
requantize_config (TVM's RequantizeConfig: rounding "UPWARD"; compute_dtype "float32", which
TVM also picks for x86 targets with SSE4.1), resolved when the call is made.
"""
from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import RelayExpr, const
from compiler.ir.types import TensorType
from . import qnn_math
from .qnn_types import (FLOAT_INPUTS, QUANT_DTYPES, check_constants, check_dtype, check_param,
                        check_params, quant_axis, quantized_data)
from .registry import OpDef, OpPattern, make_call, register
from .transform import reshape
from .type_relations import check_arity, fail, tensor_arg

__all__ = ["quantize", "dequantize", "requantize", "simulated_quantize",
           "simulated_dequantize", "requantize_config", "current_requantize_config",
           "RequantizeConfig", "SQNN_DTYPE_TO_CODE"]

REQUANTIZE_INPUTS = ("int8", "uint8", "int16", "uint16", "int32", "int64")
# TVM's topi.nn.qnn codes for simulated_quantize's dtype argument
SQNN_DTYPE_TO_CODE = {"disable": 0, "int8": 1, "uint8": 2, "int32": 3}
SQNN_CODE_TO_DTYPE = {code: name for name, code in SQNN_DTYPE_TO_CODE.items()}


class RequantizeConfig:
    """Defaults for requantize's rounding and compute_dtype (TVM's RequantizeConfig); a
    context manager that makes them current."""

    def __init__(self, rounding: str = "UPWARD", compute_dtype: str = "float32"):
        if rounding not in qnn_math.ROUNDINGS:
            raise CompilerError(f"requantize_config: rounding must be one of "
                                f"{list(qnn_math.ROUNDINGS)}, got {rounding!r}")
        if compute_dtype not in qnn_math.COMPUTE_DTYPES:
            raise CompilerError(f"requantize_config: compute_dtype must be one of "
                                f"{list(qnn_math.COMPUTE_DTYPES)}, got {compute_dtype!r}")
        self.rounding, self.compute_dtype = rounding, compute_dtype
        self._tokens: list = []

    def __enter__(self) -> RequantizeConfig:
        self._tokens.append(_CONFIG.set(self))
        return self

    def __exit__(self, *exc) -> None:
        _CONFIG.reset(self._tokens.pop())

    def resolve(self, rounding, compute_dtype) -> tuple[str, str]:
        """(rounding, compute_dtype) with "None" replaced by this config's values."""
        return (self.rounding if rounding in ("None", None) else rounding,
                self.compute_dtype if compute_dtype in ("None", None) else compute_dtype)

    def __repr__(self) -> str:
        return f"RequantizeConfig(rounding={self.rounding!r}, " \
               f"compute_dtype={self.compute_dtype!r})"


_CONFIG: ContextVar[RequantizeConfig] = ContextVar("requantize_config",
                                                   default=RequantizeConfig())


def requantize_config(**kwargs) -> RequantizeConfig:
    """A RequantizeConfig (use as `with requantize_config(rounding="TONEAREST"):`)."""
    unknown = set(kwargs) - {"rounding", "compute_dtype"}
    if unknown:
        raise CompilerError(f"requantize_config: unknown option(s) {sorted(unknown)}; it takes "
                            f"rounding and compute_dtype")
    return RequantizeConfig(**kwargs)


def current_requantize_config() -> RequantizeConfig:
    return _CONFIG.get()


def resolved(attrs) -> tuple[str, str]:
    """(rounding, compute_dtype) of a requantize call: "None" means the current config's."""
    return _CONFIG.get().resolve(attrs.rounding, attrs.compute_dtype)


# --- quantize / dequantize ------------------------------------------------------------------


def _quantize_rel(types, attrs):
    op = "qnn.quantize"
    check_arity(op, types, 3)
    data = tensor_arg(op, types, 0, "data")
    check_dtype(op, data, FLOAT_INPUTS, "data")
    axis = quant_axis(op, attrs, data.ndim)
    check_params(op, types, 1, data, axis, names=("output_scale", "output_zero_point"))
    if attrs.out_dtype not in QUANT_DTYPES:
        raise fail(op, f"out_dtype must be one of {list(QUANT_DTYPES)}, got {attrs.out_dtype!r}")
    return TensorType(data.shape, attrs.out_dtype)


def _quantize_ref(inputs, attrs):
    x, scale, zp = inputs
    return qnn_math.quantize(x, scale, zp, _axis(attrs, x), attrs.out_dtype)


def _axis(attrs, x: np.ndarray) -> int:
    return attrs.axis % x.ndim if x.ndim else 0


register(OpDef(name="qnn.quantize", num_inputs=3, type_rel=_quantize_rel,
               pattern=OpPattern.BROADCAST, reference=_quantize_ref,
               attrs={"axis": -1, "out_dtype": "int8"}, support_level=11,
               attrs_type_key="relay.attrs.QuantizeAttrs",
               description="clamp(round(data / output_scale) + output_zero_point)"))


def quantize(data, output_scale, output_zero_point, axis=-1, out_dtype="int8"):
    """relay.qnn.op.quantize: float -> int8/uint8/int16/uint16/int32, ties to even."""
    check_constants("qnn.quantize", output_scale, output_zero_point, out_dtype)
    return make_call("qnn.quantize", [data, output_scale, output_zero_point], axis=int(axis),
                     out_dtype=str(out_dtype))


def _dequantize_rel(types, attrs):
    op = "qnn.dequantize"
    check_arity(op, types, 3)
    data = quantized_data(op, types, 0)
    axis = quant_axis(op, attrs, data.ndim)
    check_params(op, types, 1, data, axis, names=("input_scale", "input_zero_point"))
    if attrs.out_dtype not in FLOAT_INPUTS:
        raise fail(op, f"out_dtype must be one of {list(FLOAT_INPUTS)}, got {attrs.out_dtype!r}")
    return TensorType(data.shape, attrs.out_dtype)


def _dequantize_ref(inputs, attrs):
    x, scale, zp = inputs
    return qnn_math.dequantize(x, scale, zp, _axis(attrs, x), attrs.out_dtype)


register(OpDef(name="qnn.dequantize", num_inputs=3, type_rel=_dequantize_rel,
               pattern=OpPattern.BROADCAST, reference=_dequantize_ref,
               attrs={"axis": -1, "out_dtype": "float32"}, support_level=11,
               attrs_type_key="relay.attrs.DequantizeAttrs",
               description="(data - input_zero_point) * input_scale"))


def dequantize(data, input_scale, input_zero_point, axis=-1, out_dtype="float32"):
    """relay.qnn.op.dequantize: quantized -> float32 (or float16)."""
    check_constants("qnn.dequantize", input_scale)
    return make_call("qnn.dequantize", [data, input_scale, input_zero_point], axis=int(axis),
                     out_dtype=str(out_dtype))


# --- requantize -------------------------------------------------------------------------------


def _requantize_rel(types, attrs):
    op = "qnn.requantize"
    check_arity(op, types, 5)
    data = quantized_data(op, types, 0, allowed=REQUANTIZE_INPUTS)
    axis = quant_axis(op, attrs, data.ndim)
    check_params(op, types, 1, data, axis, names=("input_scale", "input_zero_point"))
    check_params(op, types, 3, data, axis, names=("output_scale", "output_zero_point"))
    if attrs.out_dtype not in QUANT_DTYPES:
        raise fail(op, f"out_dtype must be one of {list(QUANT_DTYPES)}, got {attrs.out_dtype!r}")
    for name, value, allowed in (("rounding", attrs.rounding, qnn_math.ROUNDINGS),
                                 ("compute_dtype", attrs.compute_dtype,
                                  qnn_math.COMPUTE_DTYPES)):
        if value not in allowed + ("None",):
            raise fail(op, f"{name} must be one of {list(allowed)}, got {value!r}")
    return TensorType(data.shape, attrs.out_dtype)


def _requantize_ref(inputs, attrs):
    x = inputs[0]
    rounding, compute = resolved(attrs)
    return qnn_math.requantize(x, *inputs[1:], _axis(attrs, x), rounding, compute,
                               attrs.out_dtype)


register(OpDef(name="qnn.requantize", num_inputs=5, type_rel=_requantize_rel,
               pattern=OpPattern.BROADCAST, reference=_requantize_ref,
               attrs={"axis": -1, "rounding": "None", "compute_dtype": "None",
                      "out_dtype": "int8"}, support_level=11,
               attrs_type_key="relay.attrs.RequantizeAttrs",
               description="output_zero_point + input_scale / output_scale * "
                           "(data - input_zero_point), rounded and clamped"))


def requantize(data, input_scale, input_zero_point, output_scale, output_zero_point, axis=-1,
               rounding="None", compute_dtype="None", out_dtype="int8"):
    """relay.qnn.op.requantize; rounding / compute_dtype "None" take requantize_config's."""
    rounding, compute_dtype = _CONFIG.get().resolve(rounding, compute_dtype)
    check_constants("qnn.requantize", input_scale)
    check_constants("qnn.requantize", output_scale, output_zero_point, out_dtype)
    return make_call("qnn.requantize", [data, input_scale, input_zero_point, output_scale,
                                        output_zero_point], axis=int(axis),
                     rounding=str(rounding), compute_dtype=str(compute_dtype),
                     out_dtype=str(out_dtype))


# --- simulated quantize / dequantize (TVM: float in and out, dtype as a runtime code) -------


def _simulated_rel(op: str):
    def rel(types, attrs):
        check_arity(op, types, 4)
        data = tensor_arg(op, types, 0, "data")
        check_dtype(op, data, FLOAT_INPUTS, "data")
        code = tensor_arg(op, types, 1, "dtype code")
        if code.dtype != "int32" or code.ndim != 0:
            raise fail(op, f"the dtype code must be an int32 scalar, got {code}")
        axis = quant_axis(op, attrs, data.ndim)
        check_param(op, types, 2, "scale", "float32", data, axis)
        check_param(op, types, 3, "zero_point", "int32", data, axis)
        return data
    return rel


def _simulated_ref(quantizing: bool):
    def reference(inputs, attrs):
        x, code, scale, zp = inputs
        name = SQNN_CODE_TO_DTYPE.get(int(code))
        if name is None:
            raise CompilerError(f"simulated {'quantize' if quantizing else 'dequantize'}: "
                                f"unknown dtype code {int(code)}; codes are "
                                f"{SQNN_DTYPE_TO_CODE}")
        if name == "disable":
            return x.copy()
        axis = _axis(attrs, x)
        s = qnn_math.expand_param(scale, x.ndim, axis).astype(x.dtype)
        z = qnn_math.expand_param(zp, x.ndim, axis).astype(x.dtype)
        if not quantizing:
            return ((x - z) * s).astype(x.dtype)
        lo, hi = qnn_math.dtype_range(name)
        with np.errstate(all="ignore"):
            return np.clip(np.rint(x / s) + z, lo, hi).astype(x.dtype)
    return reference


for _name, _q in (("qnn.simulated_quantize", True), ("qnn.simulated_dequantize", False)):
    register(OpDef(name=_name, num_inputs=4, type_rel=_simulated_rel(_name),
                   pattern=OpPattern.BROADCAST, reference=_simulated_ref(_q),
                   attrs={"axis": -1}, support_level=11,
                   attrs_type_key="relay.attrs.SimulatedQuantizeAttrs"))


def _dtype_code(dtype):
    if isinstance(dtype, RelayExpr):
        return dtype
    if dtype not in SQNN_DTYPE_TO_CODE:
        raise CompilerError(f"simulated quantization dtype must be one of "
                            f"{list(SQNN_DTYPE_TO_CODE)}, got {dtype!r}")
    return const(SQNN_DTYPE_TO_CODE[dtype], "int32")


def simulated_quantize(data, output_scale, output_zero_point, axis=-1, out_dtype="int8"):
    """relay.qnn.op.simulated_quantize: quantize's values, kept in data's float type;
    out_dtype may be a run-time int32 code (SQNN_DTYPE_TO_CODE)."""
    return make_call("qnn.simulated_quantize", [data, _dtype_code(out_dtype),
                                                _flat(output_scale), _flat(output_zero_point)],
                     axis=int(axis))


def simulated_dequantize(data, input_scale, input_zero_point, axis=-1, in_dtype="int8"):
    """relay.qnn.op.simulated_dequantize: (data - zero_point) * scale in data's float type."""
    return make_call("qnn.simulated_dequantize", [data, _dtype_code(in_dtype),
                                                  _flat(input_scale), _flat(input_zero_point)],
                     axis=int(axis))


def _flat(param):
    """TVM reshapes simulated-quantization parameters to 1-D."""
    return reshape(param, [-1])
