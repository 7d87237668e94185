"""What crosses the VM's boundary: arguments checked against a function's parameter types on
the way in, results wrapped as NDArray / ADT on the way out.

An argument is an NDArray, a numpy array or a Python scalar (a tensor), or a tuple / list /
ADT of them (a tuple parameter). Its dtype must be the parameter's, its rank the parameter's,
and each dim equal to the parameter's where that dim is not Any; a wrong one is a ValueError
naming the parameter, the (symbolic) shape expected and the shape given. Arrays kernels
cannot read directly (not C-contiguous, not 64-byte aligned, byte-swapped) are copied once.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import numpy_dtype
from ..memory import ALIGNMENT
from ..ndarray import NDArray
from .objects import ADT
from .program import TENSOR, TUPLE, VMFunction


def check_arguments(func: VMFunction, args: tuple, kwargs: dict,
                    addresses: dict | None = None) -> list:
    """func's arguments, positional then by name, checked and made kernel-ready; the
    tensors' addresses go into `addresses` ({id: (tensor, address)}) when given."""
    params = func.params
    if len(args) > len(params):
        raise TypeError(f"{func.name!r} takes {len(params)} arguments {list(params)}, "
                        f"got {len(args)}")
    values = list(args)
    for name in kwargs:
        if name not in params:
            raise TypeError(f"{func.name!r} has no parameter {name!r}; it takes "
                            f"{list(params)}")
        if params.index(name) < len(args):
            raise TypeError(f"{func.name!r}: parameter {name!r} given twice")
    for name in params[len(args):]:
        if name not in kwargs:
            raise TypeError(f"{func.name!r}: missing argument {name!r} (it takes "
                            f"{list(params)})")
        values.append(kwargs[name])
    addresses = {} if addresses is None else addresses
    return [_checked(name, ty, v, addresses)
            for name, ty, v in zip(params, func.param_types, values)]


def _checked(name: str, ty: tuple, value: Any, addresses: dict) -> Any:
    """value as the VM holds it, after checking it against ty (iterative over nested tuples)."""
    root: list = [None]
    stack = [(name, ty, value, root, 0)]
    while stack:
        what, t, v, out, slot = stack.pop()
        if t[0] == TENSOR:
            out[slot] = _tensor(what, t, v, addresses)
        elif t[0] == TUPLE:
            if not isinstance(v, (tuple, list)) or len(v) != len(t[1]):
                got = f"{len(v)} fields" if isinstance(v, (tuple, list)) else type(v).__name__
                raise ValueError(f"input {what!r}: expected a tuple of {len(t[1])} fields, "
                                 f"got {got}")
            fields: list = [None] * len(t[1])
            out[slot] = fields
            stack.extend((f"{what}[{i}]", ft, fv, fields, i)
                         for i, (ft, fv) in enumerate(zip(t[1], v)))
        else:
            out[slot] = v
    return _freeze(root[0])


def _freeze(value: Any) -> Any:
    """Lists built by _checked as the tuples the VM holds (inner ones first)."""
    if not isinstance(value, list):
        return value
    order, stack = [], [value]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(f for f in v if isinstance(f, list))
    frozen: dict[int, tuple] = {}
    for v in reversed(order):
        frozen[id(v)] = tuple(frozen.get(id(f), f) if isinstance(f, list) else f for f in v)
    return frozen[id(value)]


def symbolic_shape(dims: tuple) -> str:
    """(?, 128) for dims (None, 128): how an expected shape with Any dims is written."""
    inner = ", ".join("?" if d is None else str(d) for d in dims)
    return f"({inner}{',' if len(dims) == 1 else ''})"


def _tensor(what: str, ty: tuple, value: Any, addresses: dict) -> np.ndarray:
    _, dims, dtype = ty
    if type(value) is np.ndarray and value.ndim == len(dims) and \
            value.dtype == numpy_dtype(dtype) and value.flags.c_contiguous and \
            value.flags.writeable and value.dtype.isnative and \
            all(d is None or d == s for d, s in zip(dims, value.shape)):
        address = value.ctypes.data
        if address % ALIGNMENT == 0:  # kernel-ready as it is: the common case, checked fast
            addresses[id(value)] = (value, address)
            return value
    if isinstance(value, NDArray):
        array = value._view()
    elif isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, (bool, int, float, np.generic)):
        array = np.asarray(value)
        if array.ndim == 0 and not dims and array.dtype.kind == np.dtype(dtype).kind:
            array = array.astype(dtype)  # a Python scalar for a scalar parameter
    else:
        raise TypeError(f"input {what!r}: expected an NDArray or numpy array of shape "
                        f"{symbolic_shape(dims)} dtype {dtype}, got {type(value).__name__}")
    if array.dtype.name != dtype or array.ndim != len(dims) or any(
            d is not None and d != s for d, s in zip(dims, array.shape)):
        raise ValueError(f"input {what!r}: expected shape {symbolic_shape(dims)} dtype {dtype}, "
                         f"got shape {array.shape} dtype {array.dtype.name}")
    ready = NDArray(array)._view()  # copies only what kernels cannot read in place
    addresses[id(ready)] = (ready, ready.ctypes.data)
    return ready


def wrap_output(value: Any) -> Any:
    """A VM result as the user gets it: tensors as NDArray (a constant as a copy), tuples as
    ADT, closures as they are (iterative over nested tuples)."""
    if not isinstance(value, tuple):
        return _wrap_leaf(value)
    order, stack = [], [value]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(f for f in v if isinstance(f, tuple))
    wrapped: dict[int, ADT] = {}
    for v in reversed(order):
        tag = v.tag if isinstance(v, ADT) else 0
        wrapped[id(v)] = ADT(tag, [wrapped[id(f)] if isinstance(f, tuple) else _wrap_leaf(f)
                                   for f in v])
    return wrapped[id(value)]


def _wrap_leaf(value: Any) -> Any:
    if type(value) is np.ndarray and value.flags.writeable:
        return NDArray._wrap(value)  # the VM's own storage, or an input made kernel-ready
    if isinstance(value, np.ndarray):
        return NDArray(value)  # a read-only array (a constant) is copied by NDArray
    return value

