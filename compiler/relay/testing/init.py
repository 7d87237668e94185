"""Weight initializers and create_workload, as tvm.relay.testing.init.

A parameter is initialised by its name's suffix (`..._weight` Xavier, `..._bias`/`_beta`/
`_moving_mean` zeros, `..._gamma`/`_moving_var` ones), so a builder only has to name its
vars the TVM way. Randomness comes from the initializer's own RandomState, which
create_workload seeds: the same seed gives the same params in every call and process,
without touching numpy's global generator.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import RelayExpr
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.transform.pass_infra import InferType
from runtime import cpu
from runtime import ndarray as nd

__all__ = ["Initializer", "Xavier", "create_workload"]

_CONSTANT_SUFFIXES = (("bias", 0.0), ("beta", 0.0), ("gamma", 1.0), ("moving_mean", 0.0),
                      ("moving_var", 1.0), ("moving_inv_var", 0.0), ("moving_avg", 0.0),
                      ("min", 0.0), ("max", 0.0))


class Initializer:
    """Fills a parameter array in place according to its name (TVM's Initializer)."""

    def __init__(self, **kwargs):
        # kwargs: TVM's subclasses pass their settings up (super().__init__(magnitude=...))
        self._kwargs = kwargs
        self.rng = np.random.RandomState(0)

    def __call__(self, desc: str, arr: np.ndarray) -> None:
        if desc.endswith("weight"):
            self._init_weight(desc, arr)
            return
        for suffix, value in _CONSTANT_SUFFIXES:
            if desc.endswith(suffix):
                arr[...] = value
                return
        self._init_default(desc, arr)

    def _init_weight(self, name: str, arr: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _init_weight")

    def _init_default(self, name: str, arr: np.ndarray) -> None:
        raise ValueError(f"Unknown initialization pattern for {name!r}: the name should end "
                         f"with weight, bias, gamma, beta, moving_mean or moving_var")


class Xavier(Initializer):
    """Xavier/Glorot initialisation: scale sqrt(magnitude / factor) over the fans."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg",
                 magnitude: float = 3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Xavier: rnd_type must be 'uniform' or 'gaussian', got {rnd_type!r}")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Xavier: factor_type must be 'avg', 'in' or 'out', got "
                             f"{factor_type!r}")
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, float(magnitude)

    def _init_weight(self, name: str, arr: np.ndarray) -> None:
        shape = arr.shape
        if len(shape) < 2:
            raise ValueError(f"Xavier initializer cannot be applied to vector {name!r}: it "
                             f"requires at least 2D, got shape {shape}")
        receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = np.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            arr[...] = self.rng.uniform(-scale, scale, size=shape)
        else:
            arr[...] = self.rng.normal(0, scale, size=shape)


def create_workload(net, initializer: Initializer | None = None, seed: int = 0):
    """(mod, params) for a network: type-checked module and one initialised array per
    parameter of main except the inputs named `data...`."""
    if not isinstance(net, (IRModule, RelayExpr)):
        raise TypeError(f"create_workload: expected a relay expression or IRModule, got "
                        f"{type(net).__name__}")
    # any expression, as TVM's: its free vars become main's parameters
    mod = net if isinstance(net, IRModule) else IRModule.from_expr(net)
    mod = InferType()(mod)
    initializer = initializer if initializer is not None else Xavier()
    initializer.rng = np.random.RandomState(seed)
    params = {}
    for param in mod["main"].params:
        name = param.name_hint
        if name.startswith("data"):
            continue
        ty = param.checked_type
        if not isinstance(ty, TensorType):
            raise TypeError(f"create_workload: parameter {name!r} has type {ty}, expected a "
                            "tensor")
        value = np.zeros(ty.shape, dtype=ty.dtype)
        initializer(name, value)
        params[name] = nd.array(value, device=cpu(0))
    return mod, params
