"""relay.quantize: quantize a float program here (TVM's relay.quantize.quantize and qconfig),
into QNN ops.

    with relay.quantize.qconfig(calibrate_mode="kl_divergence", weight_scale="max"):
        mod = relay.quantize.quantize(mod, params, dataset)   # dataset: [{input: array}, ...]

Steps: bind the params and fold (SimplifyInference, FoldConstant, FoldScaleAxis: batch norms
into the weights, as TVM's prerequisite_optimize); choose the quantization points around the
convolutions and dense layers (passes/quantize_annotate.py); run the float program on the
dataset, built by relay.build, collecting every point's values; choose each scale
(driver/calibrate.py); insert quantize/dequantize pairs with them; FakeQuantizationToInteger
turns the regions between pairs into QNN ops (do_simulation=True stops before, leaving the
fake-quantized float program, TVM's simulated form). Symmetric int8 per tensor, as TVM's.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Iterable

import numpy as np

import runtime
from compiler.errors import CompilerError
from compiler.ir.expr import Function, Tuple
from compiler.ir.module import IRModule
from compiler.passes.bind_params import bind_params_by_name
from compiler.passes.fake_quantization_to_integer import FakeQuantizationToInteger
from compiler.passes.fold_constant import FoldConstant
from compiler.passes.fold_scale_axis import FoldScaleAxis
from compiler.passes.quantize_annotate import QMAX, insert_pairs, plan
from compiler.passes.simplify_inference import SimplifyInference
from compiler.transform import PassContext, Sequential
from compiler.transform.pass_infra import InferType
from runtime import graph_executor
from .build import build
from .calibrate import CALIBRATE_MODES, WEIGHT_SCALES, Statistics, threshold, weight_threshold

__all__ = ["QConfig", "qconfig", "current_qconfig", "quantize"]

_DEFAULTS = {"nbit_input": 8, "nbit_weight": 8, "nbit_activation": 32, "dtype_input": "int8",
             "dtype_weight": "int8", "dtype_activation": "int32",
             "calibrate_mode": "global_scale", "global_scale": 8.0, "weight_scale": "power2",
             "skip_dense_layer": True, "skip_conv_layers": [0], "do_simulation": False,
             "round_for_shift": True, "debug_enabled_ops": None, "rounding": "UPWARD",
             "calibrate_chunk_by": -1, "partition_conversions": "disabled"}


class QConfig:
    """The quantization configuration (TVM's QConfig): read its fields as attributes; use
    relay.quantize.qconfig(**fields) as a context manager to make one current."""

    def __init__(self, **fields):
        unknown = set(fields) - set(_DEFAULTS)
        if unknown:
            raise CompilerError(f"qconfig: unknown option(s) {sorted(unknown)}; options are "
                                f"{sorted(_DEFAULTS)}")
        values = {**_DEFAULTS, **fields}
        _check(values)
        self.__dict__.update(values)
        self._tokens: list = []

    def __enter__(self) -> QConfig:
        self._tokens.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return "qconfig(" + ", ".join(f"{k}={self.__dict__[k]!r}" for k in _DEFAULTS) + ")"


def _check(values: dict) -> None:
    """What relayjit implements of TVM's options, refused clearly where it does not."""
    fixed = {"nbit_input": 8, "nbit_weight": 8, "dtype_input": "int8", "dtype_weight": "int8",
             "dtype_activation": "int32", "partition_conversions": "disabled"}
    for key, value in fixed.items():
        if values[key] != value:
            raise CompilerError(f"qconfig: {key}={values[key]!r} is not supported; relayjit "
                                f"quantizes to int8 with int32 accumulation ({key}={value!r})")
    if values["calibrate_mode"] not in CALIBRATE_MODES:
        raise CompilerError(f"qconfig: calibrate_mode must be one of {list(CALIBRATE_MODES)}, "
                            f"got {values['calibrate_mode']!r}")
    if values["weight_scale"] not in WEIGHT_SCALES:
        raise CompilerError(f"qconfig: weight_scale must be one of {list(WEIGHT_SCALES)}, got "
                            f"{values['weight_scale']!r}")


_CURRENT: ContextVar[QConfig | None] = ContextVar("qconfig", default=None)


def qconfig(**fields) -> QConfig:
    """A QConfig with TVM's defaults for the fields not given."""
    return QConfig(**fields)


def current_qconfig() -> QConfig:
    return _CURRENT.get() or QConfig()


def quantize(mod, params: dict | None = None, dataset: Iterable[dict] | None = None
             ) -> IRModule:
    """The module's main function quantized to QNN ops under the current qconfig."""
    cfg = current_qconfig()
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    mod = mod.shallow_copy()
    if params:
        mod["main"] = bind_params_by_name(mod["main"], params)
    with PassContext(opt_level=3):
        mod = Sequential([InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis(),
                          FoldConstant(), InferType()])(mod)
    func = mod["main"]
    points = plan(func, cfg.skip_conv_layers, cfg.skip_dense_layer, cfg.debug_enabled_ops)
    weights = {w: weight_threshold(w.data.numpy(), cfg.weight_scale) / QMAX
               for w in points.weights}
    stats = _calibrate(func, points.activations, dataset, cfg.calibrate_mode)
    activations = {node: threshold(s, cfg.calibrate_mode, cfg.global_scale) / QMAX
                   for node, s in zip(points.activations, stats)}
    mod["main"] = insert_pairs(func, points, activations, weights)
    mod = InferType()(mod)
    return mod if cfg.do_simulation else FakeQuantizationToInteger()(mod)


def _calibrate(func: Function, points: list, dataset, mode: str) -> list:
    """Statistics of every point's values over the dataset (the float program built once,
    every point an output)."""
    stats = [Statistics() for _ in points]
    if not points or mode == "global_scale":
        return stats
    if dataset is None:
        raise CompilerError(f"relay.quantize: calibrate_mode={mode!r} needs a dataset (an "
                            f"iterable of {{input name: array}}); global_scale needs none")
    probe = Function(func.params, Tuple(list(points)))
    module = graph_executor.GraphModule(build(probe, target="llvm")["default"](runtime.cpu()))
    count = 0
    for sample in dataset:
        module.run(**{k: np.asarray(v) for k, v in dict(sample).items()})
        for i, s in enumerate(stats):
            s.add(module.get_output(i).numpy())
        count += 1
    if count == 0:
        raise CompilerError("relay.quantize: the calibration dataset is empty")
    return stats
