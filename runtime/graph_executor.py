"""GraphModule: TVM's graph executor API over a GraphExecutor (graph JSON + kernel library)."""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from .benchmark import BenchmarkResult, time_calls
from .device import Device
from .graph_runtime import GraphExecutor
from .library import KernelLibrary
from .ndarray import NDArray
from .params import load_param_dict

__all__ = ["GraphModule", "GraphExecutor", "create"]

# Executors that completed a run through a GraphModule: their output storage holds results.
# Kept per executor, not per GraphModule, so GraphModule(other_module) and two GraphModules over
# one executor agree; weak, so a dropped executor is forgotten.
_HAS_RUN: weakref.WeakSet = weakref.WeakSet()


def create(graph_json_str: str, libmod: KernelLibrary, device: Device | list) -> GraphModule:
    """A GraphModule running `graph_json_str` with kernels from `libmod` on `device`."""
    if isinstance(device, (list, tuple)):
        if len(device) != 1:
            raise ValueError(f"create: expected one device, got {device}")
        device = device[0]
    return GraphModule(executor_with_library_params(graph_json_str, libmod, device))


def executor_with_library_params(graph_json_str: str, libmod: KernelLibrary,
                                  device: Device) -> GraphExecutor:
    """A GraphExecutor whose inputs named by the params the library's build bound start with
    them (TVM's `create(graph_json, lib.lib, dev)` runs without set_params)."""
    executor = GraphExecutor(graph_json_str, libmod, device)
    executor.load_params(libmod.params)
    return executor


class GraphModule:
    """Set inputs, run, read outputs: the surface of tvm.contrib.graph_executor.GraphModule."""

    def __init__(self, module: GraphExecutor | GraphModule) -> None:
        if isinstance(module, GraphModule):
            module = module.module
        if not isinstance(module, GraphExecutor):
            raise TypeError(
                "GraphModule expects the module from factory['default'](dev) or "
                f"graph_executor.create(...), got {type(module).__name__}"
            )
        self.module = module
        self._ex = module

    def set_input(self, key: int | str | None = None, value: Any = None, **params: Any) -> None:
        """Copy `value` into input `key` (name or index) and each name=value in `params`."""
        if key is not None and value is not None:
            self._ex.set_input(key, value)
        elif key is not None:
            self._ex.resolve_input(key)  # TVM ignores a missing value; we still check the key
        for name in params:
            self._ex.resolve_input(name)
        for name, val in params.items():
            self._ex.set_input(name, val)

    def set_params(self, params: dict[str, NDArray | np.ndarray]) -> None:
        """Copy params into their inputs' storage; they then count as set for every run."""
        self._ex.load_params(params)

    def load_params(self, params_bytes: bytes) -> None:
        """Load a params blob (save_param_dict layout) into the matching inputs."""
        self._ex.load_params(load_param_dict(params_bytes))

    def run(self, **input_dict: Any) -> None:
        """Set `input_dict` (if any), then run every kernel."""
        if input_dict:
            self.set_input(**input_dict)
        self._ex.run()
        _HAS_RUN.add(self._ex)

    def get_num_outputs(self) -> int:
        """Number of graph outputs."""
        return len(self._ex.plan.outputs)

    def get_num_inputs(self) -> int:
        """Number of graph inputs, params included (as TVM's NumInputs counts)."""
        return len(self._ex.plan.input_names)

    def get_input(self, index: int | str, out: NDArray | None = None) -> NDArray:
        """The input's storage (a live view, as in TVM), or a copy into `out`."""
        arr = self._ex.input_array(self._ex.resolve_input(index))
        if out is not None:
            return out.copyfrom(arr)
        return NDArray(arr, self._ex.device)

    def get_input_index(self, name: str) -> int:
        """Index of input `name`, or -1 when the graph has no such input."""
        return self._ex.input_index.get(name, -1)

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """(shape_dict, dtype_dict) of the inputs that are not loaded params."""
        plan = self._ex.plan
        shapes, dtypes = {}, {}
        for name, eid in zip(plan.input_names, plan.input_entries):
            if name not in self._ex.param_names:
                shapes[name] = plan.shapes[eid]
                dtypes[name] = plan.dtypes[eid]
        return shapes, dtypes

    def get_output(self, index: int, out: NDArray | None = None) -> NDArray:
        """A copy of output `index` (storage is reused by the next run), or copied into `out`.

        Before the first run() the output storage holds no result (it is zeroed or shared with
        intermediates), so reading it is an error rather than silent zeros.
        """
        arr = self._ex.output_array(index)
        if self._ex not in _HAS_RUN:
            raise RuntimeError(f"get_output({index}): run() has not been called on this graph "
                               "module yet, so its outputs hold no result; set the inputs and "
                               "call run() first")
        if out is not None:
            return out.copyfrom(arr)
        return NDArray(arr.copy(), self._ex.device)

    def benchmark(
        self,
        device: Device,
        func_name: str = "run",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: float | None = None,
        end_to_end: bool = False,
        **kwargs: Any,
    ) -> BenchmarkResult:
        """Time `run` (with `end_to_end`, also the copy of `kwargs` inputs) per TVM's benchmark."""
        if func_name != "run":
            raise ValueError(f"benchmark: func_name must be 'run', got {func_name!r}")
        if not isinstance(device, Device):
            raise TypeError(f"benchmark: device must be a Device, got {type(device).__name__}")
        if end_to_end:
            def call() -> None:
                self.run(**kwargs)
        else:
            if kwargs:
                self.set_input(**kwargs)
            self._ex.check_inputs_set()
            call = self._ex.run
        result = time_calls(call, repeat, number, min_repeat_ms or 0)
        _HAS_RUN.add(self._ex)  # the timed calls ran the graph: outputs hold a result
        return result

    def __getitem__(self, key: str) -> Any:
        """Look up a method by its TVM packed-function name (e.g. "set_input", "run")."""
        if key.startswith("_") or not hasattr(self, key):
            raise AttributeError(f"GraphModule has no function {key!r}")
        return getattr(self, key)
