"""tvm.contrib as scripts import it: graph_executor, debugger.debug_executor, utils.tempdir."""
from runtime import graph_executor  # noqa: F401
from runtime.aliases import alias_submodules
from runtime.unsupported import missing_names

from . import debugger, utils  # noqa: F401

alias_submodules(__name__, {"graph_executor": graph_executor})

__getattr__ = missing_names(__name__, {
    "graph_runtime": "TVM's old name: use compiler.contrib.graph_executor",
    "download": "relayjit fetches nothing: load models from local files",
    "cc": "relay.build links in memory; export_library writes a loadable .rjit file",
    "ndk": "Android builds are not supported (CPU host only)",
    "cblas": "dense/matmul use relayjit's own micro-kernels",
    "mkl": "dense/matmul use relayjit's own micro-kernels",
    "dnnl": "BYOC is not supported",
    "tensorrt": "BYOC is not supported",
    "cudnn": "GPU targets are not supported",
    "rpc": "RPC to remote devices is not supported",
})
