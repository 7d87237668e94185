"""relay.build_module: build, create_executor and bind_params_by_name, as tvm.relay's."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from compiler.driver.build import build
from compiler.driver.build_vm import compile as vm_compile
from compiler.errors import CompilerError
from compiler.ir.expr import Function, RelayExpr, const
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType, TupleType
from compiler.op import interpreter
from compiler.passes.bind import bind
from compiler.passes.bind_params import bind_params_by_name
from compiler.target import Target
from runtime.device import cpu
from runtime.graph_executor import GraphModule
from runtime.ndarray import NDArray, array
from runtime.vm import VirtualMachine

__all__ = ["build", "create_executor", "bind_params_by_name", "Executor"]


def _main_of(mod: IRModule | None, expr: RelayExpr | None) -> IRModule:
    if expr is None:
        if mod is None:
            raise CompilerError("evaluate(): give an expression or create the executor with a "
                                "module (its main runs)")
        return mod
    if isinstance(expr, IRModule):
        return expr
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"evaluate(): expected a relay expression, got {type(expr).__name__}")
    new = IRModule.from_expr(expr)
    if mod is not None:  # keep the module's other global functions visible
        for gv, func in mod.functions.items():
            if gv.name_hint != "main":
                new[gv.name_hint] = func
    return new


def _to_nd(value: Any):
    if isinstance(value, tuple):
        return tuple(_to_nd(v) for v in value)
    return value if isinstance(value, NDArray) else array(np.asarray(value))


def _as_input(param, value: Any) -> np.ndarray:
    if isinstance(value, NDArray):
        return value.numpy()
    ty = param.checked_type if param._checked_type is not None else param.type_annotation
    dtype = ty.dtype if isinstance(ty, TensorType) else None
    return np.asarray(value, dtype=dtype)


class Executor:
    """relay.create_executor(...): `.evaluate(expr=None)` gives a callable over inputs."""

    def __init__(self, kind: str, mod: IRModule | None, device: Any, target: Any,
                 params: dict | None):
        if kind not in ("debug", "graph", "vm"):
            raise CompilerError(f"create_executor: kind must be 'debug', 'graph' or 'vm', got "
                                f"{kind!r}")
        self.kind, self.mod, self.device = kind, mod, device
        self.target = Target(target if target is not None else "llvm")
        self.params = params or {}

    def evaluate(self, expr: RelayExpr | None = None, binds: dict | None = None):
        """A callable over main's inputs; for an expression that is not a function (nor a
        module), its value, as TVM's evaluate gives. `binds` ({Var: value}) fixes free vars
        of `expr` to constants first, as TVM's does with lets."""
        if binds:
            if expr is None or isinstance(expr, IRModule):
                raise CompilerError("evaluate(expr, binds): binds apply to an expression's "
                                    "free vars; give the expression")
            expr = bind(expr, {var: value if isinstance(value, RelayExpr) else const(
                value.numpy() if isinstance(value, NDArray) else value)
                for var, value in binds.items()})
        mod = _main_of(self.mod, expr)
        if self.params:
            mod = mod.shallow_copy()
            mod["main"] = bind_params_by_name(mod["main"], self.params)
        run = {"debug": self._debug, "graph": self._graph, "vm": self._vm}[self.kind](mod)
        if expr is None or isinstance(expr, (Function, IRModule)):
            return run
        return run()

    def _debug(self, mod: IRModule):
        def run(*args: Any):
            values = [a.numpy() if hasattr(a, "numpy") else a for a in args]
            return _to_nd(interpreter.evaluate(mod, values))
        return run

    def _graph(self, mod: IRModule):
        factory = build(mod, target=self.target)
        main = factory.ir_mod["main"]
        gmod = GraphModule(factory["default"](self.device or cpu(0)))
        params: Sequence = main.params
        ret = main.ret_type or main.body.checked_type

        def run(*args: Any, **kwargs: Any):
            if len(args) + len(kwargs) != len(params):
                raise CompilerError(f"the function takes {len(params)} input(s) "
                                    f"{[p.name_hint for p in params]}, got {len(args)} "
                                    f"positional and {sorted(kwargs)} named")
            for i, (p, value) in enumerate(zip(params, args)):
                gmod.set_input(i, _as_input(p, value))  # by index: names may repeat
            for i, p in enumerate(params[len(args):], len(args)):
                if p.name_hint not in kwargs:
                    raise CompilerError(f"missing input {p.name_hint!r}")
                gmod.set_input(i, _as_input(p, kwargs[p.name_hint]))
            gmod.run()
            outs = iter([gmod.get_output(i) for i in range(gmod.get_num_outputs())])
            return _nest_like(ret, outs)
        return run


    def _vm(self, mod: IRModule):
        exe = vm_compile(mod, target=self.target)
        machine = VirtualMachine(exe, self.device or cpu(0))
        params = {p.name_hint: p for p in mod["main"].params}

        def convert(name: str, value: Any) -> Any:
            param = params.get(name)
            ty = None if param is None else param._checked_type or param.type_annotation
            return _as_input(param, value) if isinstance(ty, TensorType) else value

        def run(*args: Any, **kwargs: Any):
            names = exe.function("main").params
            values = [convert(n, v) for n, v in zip(names, args)] + list(args[len(names):])
            return machine.invoke("main", *values,
                                  **{n: convert(n, v) for n, v in kwargs.items()})
        return run


def _nest_like(ty, flat_outputs):
    """The graph's flat outputs regrouped as the (possibly nested) tuple type `ty` says."""
    if not isinstance(ty, TupleType):
        return next(flat_outputs)
    return tuple(_nest_like(field, flat_outputs) for field in ty.fields)


def create_executor(kind: str = "debug", mod: IRModule | None = None, device: Any = None,
                    target: Any = "llvm", params: dict | None = None) -> Executor:
    """An executor of `kind` ("debug": the reference interpreter, "graph": relay.build,
    "vm": relay.vm.compile and the Relay VM, for control flow and dynamic shapes)."""
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    return Executor(kind, mod, device, target, params)
