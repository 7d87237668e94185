"""tvm.runtime as scripts spell it (`tvm.runtime.load_module`, `tvm.runtime.vm`,
`from tvm.runtime import ndarray`): the `runtime` package's names, seen from `compiler`.
The runtime itself does not import the compiler; an exported model needs only `runtime`."""
from runtime import *  # noqa: F401,F403
from runtime import __all__ as _runtime_names
from runtime import debug_executor, graph_executor, ndarray, params, vm  # noqa: F401
from runtime.vm import profiler as profiler_vm  # noqa: F401  (TVM's tvm.runtime.profiler_vm)
from runtime.aliases import alias_submodules
from runtime.unsupported import missing_names

from .testing import device_enabled as enabled  # noqa: F401  (TVM's tvm.runtime.enabled)

__all__ = list(_runtime_names) + ["ndarray", "params", "profiler_vm", "enabled"]

alias_submodules(__name__, {"vm": vm, "ndarray": ndarray, "params": params,
                            "graph_executor": graph_executor, "debug_executor": debug_executor,
                            "profiler_vm": profiler_vm})

__getattr__ = missing_names(__name__, {
    "Module": "a built library is a runtime.library.KernelLibrary (lib.get_lib()), a graph "
              "module a runtime.graph_executor.GraphModule; there is no generic Module object",
    "Object": "IR and runtime values are plain Python classes, not tvm.runtime.Object",
    "String": "use a Python str",
    "ShapeTuple": "use a tuple of ints",
    "convert": "pass Python values (lists, ints, strings) directly",
    "container": "use Python tuples and lists; the VM returns runtime.vm.ADT for tuples",
})
