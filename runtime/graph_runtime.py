"""GraphExecutor: storage pools, input bookkeeping and the kernel loop behind GraphModule.

Setup resolves everything once: one 64-byte-aligned pool per storage_id, each entry a view
into its pool, and per kernel node a ctypes array of buffer addresses. `run` is then a plain
loop of raw ctypes calls with those precomputed addresses.
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .device import Device
from .dtypes import numpy_dtype
from .errors import KernelError
from .graph_json import NOP, GraphPlan, OpNode, parse_graph
from .library import KernelLibrary
from .memory import aligned_bytes, view_as
from .ndarray import NDArray

# One step of the run loop: raw function, its argument (an address), node name for errors.
Step = tuple[Callable[[int], int], int, str]


class GraphExecutor:
    """The runtime module a factory's `lib["default"](dev)` returns; GraphModule wraps it."""

    def __init__(self, graph_json: str, lib: KernelLibrary, device: Device) -> None:
        if not isinstance(lib, KernelLibrary):
            raise TypeError(f"lib must be a KernelLibrary, got {type(lib).__name__}")
        if not isinstance(device, Device):
            raise TypeError(f"device must be a runtime Device, got {type(device).__name__}")
        self.graph_json = graph_json
        self.lib = lib
        self.device = device
        self.plan: GraphPlan = parse_graph(graph_json)
        self.entries: list[np.ndarray] = self._allocate(self.plan)
        self.input_index = {name: i for i, name in enumerate(self.plan.input_names)}
        self.input_set = [False] * len(self.plan.input_names)
        self.param_names: set[str] = set()
        self._keepalive: list[Any] = []
        steps = (self._step(op) for op in self.plan.ops)
        self.steps: list[Step] = [s for s in steps if s is not None]

    @staticmethod
    def _allocate(plan: GraphPlan) -> list[np.ndarray]:
        dtypes = [numpy_dtype(d) for d in plan.dtypes]
        sizes = [math.prod(s) * dt.itemsize for s, dt in zip(plan.shapes, dtypes)]
        pool_bytes: dict[int, int] = {}
        for sid, size in zip(plan.storage_ids, sizes):
            pool_bytes[sid] = max(pool_bytes.get(sid, 0), size)
        pools = {sid: aligned_bytes(n) for sid, n in pool_bytes.items()}
        return [
            view_as(pools[sid], shape, dt)
            for sid, shape, dt in zip(plan.storage_ids, plan.shapes, dtypes)
        ]

    def _step(self, op: OpNode) -> Step | None:
        if op.func_name == NOP:
            return self._nop_step(op)
        try:
            kernel = self.lib.get_function(op.func_name)
        except KeyError:
            raise ValueError(
                f"graph node {op.name!r} calls {op.func_name!r}, which the library lacks; "
                f"library has {list(self.lib.function_names)}"
            ) from None
        addrs = [self.entries[e].ctypes.data for e in op.inputs + op.outputs]
        args = (ctypes.c_void_p * max(len(addrs), 1))(*addrs)
        self._keepalive.append(args)
        return (kernel.cfunc, ctypes.addressof(args), op.name)

    def _nop_step(self, op: OpNode) -> Step | None:
        """A reshape-only node: shares its input's storage, or copies when the plan split them."""
        (src,), (dst,) = op.inputs, op.outputs
        a, b = self.entries[src], self.entries[dst]
        if a.nbytes != b.nbytes:
            raise ValueError(
                f"graph node {op.name!r} is __nop (reshape-only) but maps {a.shape} {a.dtype} "
                f"({a.nbytes} bytes) to {b.shape} {b.dtype} ({b.nbytes} bytes)"
            )
        if self.plan.storage_ids[src] == self.plan.storage_ids[dst]:
            return None  # same pool, same bytes: the output already aliases the input
        dst_addr, src_addr, n = b.ctypes.data, a.ctypes.data, a.nbytes

        def copy(_unused: int) -> int:
            ctypes.memmove(dst_addr, src_addr, n)
            return 0

        return (copy, 0, op.name)

    # ---- inputs -------------------------------------------------------------------------

    def resolve_input(self, key: int | str) -> int:
        """Input index for a name or index; KeyError / IndexError name what is known."""
        if isinstance(key, str):
            if key not in self.input_index:
                raise KeyError(
                    f"unknown input {key!r}; graph inputs are {list(self.plan.input_names)}"
                )
            return self.input_index[key]
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not 0 <= key < len(self.plan.input_names):
                raise IndexError(
                    f"input index {key} out of range; graph has "
                    f"{len(self.plan.input_names)} inputs"
                )
            return int(key)
        raise TypeError(f"input key must be a name or an index, got {type(key).__name__}")

    def input_array(self, index: int) -> np.ndarray:
        """The live storage of input `index`."""
        return self.entries[self.plan.input_entries[index]]

    def set_input(self, key: int | str, value: Any) -> None:
        """Copy `value` into input `key`'s storage after checking shape and dtype exactly."""
        index = self.resolve_input(key)
        dst = self.input_array(index)
        if isinstance(value, NDArray):
            value = value._view()
        elif not isinstance(value, np.ndarray):
            raise TypeError(
                f"input {self.plan.input_names[index]!r}: expected numpy.ndarray or NDArray, "
                f"got {type(value).__name__}"
            )
        if value.shape != dst.shape or value.dtype.name != dst.dtype.name:
            raise ValueError(
                f"input {self.plan.input_names[index]!r}: expected shape {dst.shape} "
                f"dtype {dst.dtype.name}, got shape {value.shape} dtype {value.dtype.name}"
            )
        np.copyto(dst, value)  # also handles non-contiguous and byte-swapped sources
        self.input_set[index] = True

    def load_params(self, params: Mapping[str, NDArray | np.ndarray]) -> None:
        """Copy params into their inputs' storage; names the graph does not use are skipped."""
        for name, value in params.items():
            if name in self.input_index:
                self.set_input(name, value)
                self.param_names.add(name)

    # ---- running ------------------------------------------------------------------------

    def check_inputs_set(self) -> None:
        """Raise naming every input that was never given a value."""
        missing = [n for n, ok in zip(self.plan.input_names, self.input_set) if not ok]
        if missing:
            raise ValueError(f"input(s) never set before run: {missing}")

    def run(self) -> None:
        """Call every kernel in order."""
        if not all(self.input_set):
            self.check_inputs_set()
        for fn, arg, name in self.steps:
            if fn(arg):
                raise KernelError(f"kernel of graph node {name!r} returned a nonzero status")

    def output_array(self, index: int) -> np.ndarray:
        """The live storage of output `index`."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"output index must be an int, got {type(index).__name__}")
        n = len(self.plan.outputs)
        if not 0 <= index < n:
            raise IndexError(f"output index {index} out of range; graph has {n} outputs")
        return self.entries[self.plan.outputs[index]]


def create_executor(graph_json: str, lib: KernelLibrary, device: Device) -> GraphExecutor:
    """Build a GraphExecutor (what `create` and factories hand to GraphModule)."""
    return GraphExecutor(graph_json, lib, device)
