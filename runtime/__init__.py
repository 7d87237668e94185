"""relayjit's runtime: NDArray, graph executor, params blobs and module load; needs only
numpy and llvmlite, so an exported model runs without the compiler."""
from __future__ import annotations

from . import debug_executor, graph_executor, threadpool, vm
from . import ndarray as nd
from .device import Device, cpu, device
from .errors import KernelError, TVMError, VMError
from .factory import GraphExecutorFactoryModule, load_module
from .library import Kernel, KernelLibrary, host_target_machine
from .ndarray import NDArray
from .params import load_param_dict, save_param_dict
from .registry import get_global_func, list_global_func_names, register_func

__all__ = [
    "nd",
    "NDArray",
    "Device",
    "cpu",
    "device",
    "save_param_dict",
    "load_param_dict",
    "load_module",
    "graph_executor",
    "vm",
    "debug_executor",
    "threadpool",
    "KernelLibrary",
    "Kernel",
    "KernelError",
    "TVMError",
    "VMError",
    "register_func",
    "get_global_func",
    "list_global_func_names",
    "GraphExecutorFactoryModule",
    "host_target_machine",
]
