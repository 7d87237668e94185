"""tvm.te: the tensor expression language custom op computes are written in (codegen.te)."""
from codegen.te import (Tensor, argmax, argmin, compute, constant, extern,  # noqa: F401
                        materialize, max, min, placeholder, prod, reduce_axis, sum)
from codegen.tir.ops import (cast, const, erf, exp, if_then_else, log, sigmoid,  # noqa: F401
                             sqrt, tanh)
from runtime.unsupported import missing_names

__getattr__ = missing_names(__name__, {
    "create_schedule": "relayjit schedules lowered kernels itself (strategies in "
                       "compiler.op.strategy); compute rules need no schedule",
    "create_prim_func": "lower a Relay function with relay.build instead",
    "var": "shapes are static ints or relay.Any() dims",
    "size_var": "shapes are static ints or relay.Any() dims",
    "thread_axis": "GPU targets are not supported",
})
