"""relayjit's runtime: NDArray, graph executor, params blobs and module load; needs only
numpy and llvmlite, so an exported model runs without the compiler."""
from __future__ import annotations

from . import debug_executor, graph_executor, threadpool, vm
from . import ndarray as nd
from .device import Device, cpu, device
from .errors import KernelError
from .factory import GraphExecutorFactoryModule, load_module
from .library import Kernel, KernelLibrary, host_target_machine
from .ndarray import NDArray
from .params import load_param_dict, save_param_dict

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
    "GraphExecutorFactoryModule",
    "host_target_machine",
]
