"""relay.testing: workloads for trying the compiler, as tvm.relay.testing.

`mlp`, `resnet`, `mobilenet`, `squeezenet`, `densenet`, `inception_v3`, `lstm`, `dqn` and
`dcgan` each give `get_workload(batch_size=1, ..., dtype="float32") -> (mod, params)` with
seeded Xavier-initialised weights; `layers` has the parameter-creating layer helpers.
"""
from compiler.ir.expr import Function
from compiler.ir.module import IRModule
from compiler.transform.pass_infra import InferType
from compiler.transform import Pass, Sequential

from . import init, layers  # noqa: F401
from . import (dcgan, densenet, dqn, inception_v3, lstm, mlp, mobilenet,  # noqa: F401
               resnet, squeezenet)
from .init import Initializer, Xavier, create_workload  # noqa: F401


def run_opt_pass(expr, opt_pass, import_prelude: bool = False):
    """Run InferType then `opt_pass` (a pass or a list of passes) on expr; give back the
    resulting function, or its body when expr was not a function."""
    if import_prelude:
        raise NotImplementedError("run_opt_pass: relayjit has no Relay prelude (ADTs, lists)")
    if isinstance(opt_pass, (list, tuple)):
        opt_pass = Sequential(list(opt_pass))
    if not isinstance(opt_pass, Pass):
        raise TypeError(f"run_opt_pass: expected a pass or a list of passes, got "
                        f"{type(opt_pass).__name__}")
    mod = InferType()(IRModule.from_expr(expr))
    entry = opt_pass(mod)["main"]
    return entry if isinstance(expr, Function) else entry.body


def run_infer_type(expr):
    """expr type-checked: the function, or the body when expr was not a function."""
    entry = InferType()(IRModule.from_expr(expr))["main"]
    return entry if isinstance(expr, Function) else entry.body
