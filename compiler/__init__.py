"""relayjit's compiler: `import compiler as tvm; from compiler import relay` ports TVM Relay code.

The tvm.* namespaces scripts import are here under their TVM names (runtime, contrib,
testing, instrument, error, te, tir); names relayjit knowingly lacks raise an error saying
what to use instead."""
from runtime import cpu, device, nd  # noqa: F401
from runtime.errors import TVMError  # noqa: F401
from runtime.registry import get_global_func, list_global_func_names, register_func  # noqa: F401
from runtime.aliases import alias_submodules
from runtime.unsupported import missing_names

from . import ir  # noqa: F401
from .ir import IRModule, assert_structural_equal, structural_equal, structural_hash  # noqa: F401
from . import transform  # noqa: F401
from . import target  # noqa: F401
from . import tir  # noqa: F401
from . import relay  # noqa: F401
from .ir import parser  # noqa: F401  (TVM's tvm.parser)
from . import contrib, error, instrument, runtime, te, testing  # noqa: F401
from .tools.session import InferenceSession, load  # noqa: F401

# TVM's tvm.ir.transform is tvm.transform; the IR layer sits below the pass infrastructure, so
# the package that holds both links them (attribute and import path, one module object).
ir.transform = transform
alias_submodules("compiler.ir", {"transform": transform})

__getattr__ = missing_names(__name__, {
    "autotvm": "autotuning is not supported; relayjit's schedules pick tile sizes from the "
               "target (compiler.op.strategy)",
    "auto_scheduler": "autotuning is not supported; relayjit's schedules pick tile sizes "
                      "from the target",
    "meta_schedule": "autotuning is not supported",
    "relax": "Relax is not supported: use Relay (compiler.relay)",
    "topi": "TOPI is not exposed; custom ops register te computes (relay.op.register_compute)",
    "rpc": "RPC to remote devices is not supported",
    "micro": "microTVM is not supported (CPU host only)",
    "cuda": "GPU devices are not supported: use tvm.cpu()",
    "gpu": "GPU devices are not supported: use tvm.cpu()",
    "opencl": "GPU devices are not supported: use tvm.cpu()",
    "vulkan": "GPU devices are not supported: use tvm.cpu()",
    "metal": "GPU devices are not supported: use tvm.cpu()",
    "rocm": "GPU devices are not supported: use tvm.cpu()",
    "build": "tvm.build of TE schedules is not supported: build Relay with relay.build",
    "lower": "tvm.lower of TE schedules is not supported: inspect kernels with "
             "`relayjit inspect --dump tir`",
})
