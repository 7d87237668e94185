"""relayjit's compiler: `import compiler as tvm; from compiler import relay` ports TVM Relay code."""
from runtime import cpu, device, nd  # noqa: F401

from . import ir  # noqa: F401
from .ir import IRModule, assert_structural_equal, structural_equal, structural_hash  # noqa: F401
from . import transform  # noqa: F401
from . import target  # noqa: F401
from . import tir  # noqa: F401
from . import relay  # noqa: F401
from .ir import parser  # noqa: F401  (TVM's tvm.parser)
from .tools.session import InferenceSession, load  # noqa: F401
