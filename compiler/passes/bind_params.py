"""relay.build_module.bind_params_by_name: freeze named function parameters into constants.

As TVM's BindParamsByName: only params whose name_hint matches a function parameter are
bound (other names are ignored, so a params dict may hold more than the function needs); a
name carried by several parameters is an error, since it cannot say which one is meant. The
values become relay constants keeping their dtype, and relay.bind removes the bound parameters.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from compiler.errors import BindError
from compiler.ir.expr import Constant, Function, RelayExpr, const
from compiler.ir.types import TensorType, type_to_str
from runtime.ndarray import NDArray

from .bind import bind


def _to_constant(name: str, value: Any) -> RelayExpr:
    if isinstance(value, Constant):
        return value
    if isinstance(value, NDArray):
        return const(value)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        return const(array, dtype=str(array.dtype))
    if isinstance(value, RelayExpr):
        raise BindError(f"bind_params_by_name: param {name!r} must be a tensor value "
                        f"(numpy array or NDArray), got the expression {value!r:.60}")
    try:
        return const(value)
    except (TypeError, ValueError) as err:
        raise BindError(f"bind_params_by_name: param {name!r} must be a numpy array or NDArray, "
                        f"got {type(value).__name__}: {err}") from None


def _check_type(name: str, annotation, value: Constant) -> None:
    """A parameter annotated with a tensor type must get a tensor of that shape and dtype."""
    if not isinstance(annotation, TensorType):
        return
    got = TensorType(value.data.shape, value.data.dtype)
    if got != annotation:
        raise BindError(f"bind_params_by_name: param {name!r} expects {type_to_str(annotation)}, "
                        f"got {type_to_str(got)}")


def bind_params_by_name(func: Function, params: Mapping[str, Any]) -> Function:
    """Bind the parameters of func named in params to constants; unknown names are ignored."""
    if not isinstance(func, Function):
        raise TypeError(f"bind_params_by_name expects a relay Function, got "
                        f"{type(func).__name__}")
    if not params:
        return func
    by_name: dict[str, list] = {}
    for p in func.params:
        by_name.setdefault(p.name_hint, []).append(p)
    binds = {}
    for name, value in params.items():
        if not isinstance(name, str):
            raise BindError(f"bind_params_by_name: param names must be str, got "
                            f"{type(name).__name__}: {name!r:.60}")
        found = by_name.get(name)
        if not found:
            continue
        if len(found) > 1:
            raise BindError(f"bind_params_by_name: multiple parameters of the function are named "
                            f"{name!r} ({len(found)} of them); cannot tell which to bind")
        value = _to_constant(name, value)
        if isinstance(value, Constant):
            _check_type(name, found[0].type_annotation, value)
        binds[found[0]] = value
    if not binds:
        return func
    return bind(func, binds)
