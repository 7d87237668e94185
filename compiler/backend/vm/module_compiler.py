"""A fused, typed, A-normal-form IRModule -> the parts of a VM Executable.

Every global function becomes a VMFunction (in module order; their indices are what Invoke
names); every non-primitive function expression inside them is lifted into a VMFunction of
its own, whose first parameters are the free variables it captures (lambda lifting, as TVM's
LambdaLift, done while emitting). Constants are collected once each (by identity, and shape
constants for ReshapeTensor by value), shape programs once each (by value). A global function
given input checks (relay.vm.compile gives main's: the constraints its body puts on its
dynamic inputs) checks its arguments first, so a wrong shape is an error naming the input.
Primitive functions are resolved to kernel entries by a KernelResolver: the same structural
class, the same kernel. Each function's static tensors are then placed by its memory plan
(storage_plan.py).
"""
from __future__ import annotations

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import Function, GlobalVar, Var
from compiler.ir.module import IRModule
from compiler.ir.vars import free_vars
from compiler.op.shape_func import ShapeFuncError, shape_program
from runtime.shape_program import ShapeProgram, ShapeProgramFormatError
from runtime.vm.program import VMFunction

from .emitter import FunctionEmitter
from .storage_plan import plan_storage
from .value_types import param_type
from .kernels import KernelResolver


class ModuleCompiler:
    """Compiles every function of `mod` (see the module docstring)."""

    def __init__(self, mod: IRModule, kernels: KernelResolver,
                 input_checks: dict[str, ShapeProgram] | None = None) -> None:
        self.mod = mod
        self.kernels = kernels
        self.input_checks = input_checks or {}  # global name -> the checks of its inputs
        self.globals = {gv: i for i, (gv, _) in enumerate(mod.functions.items())}
        self.constants: list[np.ndarray] = []
        self._const_ids: dict[int, int] = {}
        self._shape_consts: dict[tuple, int] = {}
        self.shape_programs: list[ShapeProgram] = []
        self._program_index: dict[str, int] = {}  # a program's JSON -> its index
        # (index, name, function, captured vars, self var) of closures still to emit
        self._pending: list[tuple] = []
        self._lifted = 0

    def function_index(self, gv: GlobalVar) -> int:
        if gv not in self.globals:
            raise CompilerError(f"relay.vm.compile: call of @{gv.name_hint}, which is not "
                                f"in the module")
        return self.globals[gv]

    def constant_index(self, data) -> int:
        """Index of a constant: a Constant's NDArray (by identity) or a shape array (by value)."""
        if isinstance(data, np.ndarray):
            key = (data.dtype.name, tuple(data.tolist()))
            if key not in self._shape_consts:
                self._shape_consts[key] = len(self.constants)
                self.constants.append(data)
            return self._shape_consts[key]
        if id(data) not in self._const_ids:
            self._const_ids[id(data)] = len(self.constants)
            self.constants.append(data._view())
        return self._const_ids[id(data)]

    def kernel_index(self, func: Function):
        return self.kernels.resolve(func)

    def shape_program_index(self, func: Function) -> int:
        """Index of the ShapeProgram of a dynamic primitive function (equal programs shared)."""
        try:
            program = shape_program(func)
        except (ShapeFuncError, ShapeProgramFormatError) as err:
            raise CompilerError(f"relay.vm.compile: a dynamic-shaped function whose output "
                                f"shapes cannot be computed at run time is not supported: "
                                f"{err}") from None
        return self.add_shape_program(program)

    def add_shape_program(self, program: ShapeProgram) -> int:
        key = program.to_json()
        if key not in self._program_index:
            self._program_index[key] = len(self.shape_programs)
            self.shape_programs.append(program)
        return self._program_index[key]

    def lift(self, func: Function, parent: str, var: Var | None) -> tuple[int, list[Var]]:
        """Index of the VMFunction a closure expression becomes, and the variables it
        captures (passed as its first arguments)."""
        captured = [v for v in free_vars(func) if v is not var]
        index = len(self.globals) + self._lifted
        self._lifted += 1
        calls_itself = var is not None and var in free_vars(func)
        self._pending.append((index, f"{parent}_lifted_{self._lifted - 1}", func, captured,
                              var if calls_itself else None))
        return index, captured

    def compile(self) -> list[VMFunction]:
        """The VMFunctions: the module's, then lifted closures in the order they were met."""
        functions: list[VMFunction] = []
        for gv, func in self.mod.functions.items():
            functions.append(self._emit(gv.name_hint, list(func.params), func.body,
                                        checks=self.input_checks.get(gv.name_hint)))
        done = 0
        while done < len(self._pending):  # lifting can lift more: a worklist, no recursion
            index, name, func, captured, self_var = self._pending[done]
            done += 1
            self_closure = (self_var, index, captured) if self_var is not None else None
            functions.append(self._emit(name, captured + list(func.params), func.body,
                                        self_closure))
            assert len(functions) - 1 == index
        return functions

    def _emit(self, name: str, params: list[Var], body, self_closure=None,
              checks: ShapeProgram | None = None) -> VMFunction:
        emitter = FunctionEmitter(self, name, params, body, self_closure)
        if checks is not None:
            emitter.check_params(self.add_shape_program(checks))
        code, registers = plan_storage(emitter.run(), emitter.planned, emitter.num_registers,
                                       self.kernels.arguments())
        types = tuple(param_type(p._checked_type or p.type_annotation) for p in params)
        return VMFunction(name, tuple(p.name_hint for p in params), types,
                          max(registers, 1), tuple(code))
