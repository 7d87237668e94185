"""GraphExecutorFactoryModule: what relay.build returns; makes graph modules and exports itself."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .device import Device, device as to_device
from .dynamic_module import DynamicModule
from .export import read_module, write_module
from .graph_runtime import GraphExecutor
from .graph_json import parse_graph
from .library import KernelLibrary
from .ndarray import NDArray, array
from .params import load_param_dict
from .vm.executable import Executable
from .vm.serialize import read_file


class GraphExecutorFactoryModule:
    """Graph JSON + kernel library + params; `factory["default"](dev)` makes a runnable module."""

    def __init__(
        self,
        graph_json: str,
        lib: KernelLibrary,
        params: Mapping[str, NDArray | np.ndarray] | None = None,
        libmod_name: str = "default",
    ) -> None:
        if not isinstance(graph_json, str):
            raise TypeError(f"graph_json must be str, got {type(graph_json).__name__}")
        if not isinstance(lib, KernelLibrary):
            raise TypeError(f"lib must be a KernelLibrary, got {type(lib).__name__}")
        parse_graph(graph_json)  # fail at build time, not at first use
        self.graph_json = graph_json
        self.lib = lib
        self.params: dict[str, NDArray] = {
            name: v if isinstance(v, NDArray) else array(v) for name, v in (params or {}).items()
        }
        self.libmod_name = libmod_name
        lib.params = self.params

    def get_graph_json(self) -> str:
        """The graph JSON text."""
        return self.graph_json

    def get_lib(self) -> KernelLibrary:
        """The compiled kernels."""
        return self.lib

    def get_params(self) -> dict[str, NDArray]:
        """The params (p0, p1, ...) the graph's inputs are loaded with."""
        return dict(self.params)

    def create(self, dev: Device | str = "cpu", share_params: bool = False) -> GraphExecutor:
        """A fresh executor with its own storage and the params already loaded; with
        share_params, it reads this factory's params in place where it can instead of
        copying them (they may then not be set again through it)."""
        dev = dev[0] if isinstance(dev, (list, tuple)) and len(dev) == 1 else dev
        shared = {n: v._view() for n, v in self.params.items()} if share_params else None
        executor = GraphExecutor(self.graph_json, self.lib, to_device(dev), shared)
        executor.load_params({n: v for n, v in self.params.items()
                              if n not in executor.shared_names})
        return executor

    def __getitem__(self, key: str) -> Callable[..., GraphExecutor]:
        """`factory["default"](dev)`, or TVM's `factory["debug_create"]("default", dev)` (the
        executor for debug_executor.GraphModuleDebug)."""
        if key == "debug_create":
            return self._debug_create
        if key != self.libmod_name:
            raise KeyError(f"factory has module {self.libmod_name!r} (and 'debug_create'), "
                           f"not {key!r}")
        return self.create

    def _debug_create(self, name: str, dev: Device | str = "cpu") -> GraphExecutor:
        if name != self.libmod_name:
            raise KeyError(f"debug_create: factory has module {self.libmod_name!r}, not "
                           f"{name!r}")
        return self.create(dev)

    def __iter__(self) -> Iterator[Any]:
        """Legacy unpacking: `graph_json, lib, params = relay.build(...)`."""
        return iter((self.graph_json, self.lib, self.params))

    def export_library(self, file_name: str) -> None:
        """Write graph, params and object code to one file that `runtime.load_module` reads."""
        write_module(file_name, self)

    def __repr__(self) -> str:
        return (
            f"GraphExecutorFactoryModule({self.libmod_name!r}, {len(self.lib.function_names)} "
            f"kernels, {len(self.params)} params)"
        )


def load_module(path: str | os.PathLike
                ) -> GraphExecutorFactoryModule | Executable | DynamicModule:
    """Read a module written by export_library: a graph factory, the Executable of a Relay
    VM export, or a DynamicModule (a model with dynamic axes, built per shape by
    compiler.load); ValueError naming `path` when it is not one (FileNotFoundError when
    there is no such file)."""
    path = os.fspath(path)
    contents = read_module(path)
    if contents.meta.get("executor") == "dynamic":
        try:
            return DynamicModule.from_contents(contents)
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: not a loadable relayjit module: {err}") from err
    if contents.code is not None:  # a Relay VM executable
        try:
            return Executable.load_exec(*read_file(path, contents))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: not a loadable relayjit module: {err}") from err
    try:
        lib = KernelLibrary(contents.objects, contents.meta["function_names"],
                            target=contents.target)
        if lib.signatures is None:
            raise ValueError("its object code has no kernel signature table (written by an "
                             "older relayjit?): build and export it again")
        return GraphExecutorFactoryModule(contents.graph_json, lib,
                                          load_param_dict(contents.params_blob),
                                          contents.meta["libmod_name"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a loadable relayjit module: {err}") from err
