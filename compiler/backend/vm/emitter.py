"""One Relay function (typed, fused, in A-normal form) -> the bytecode of a VMFunction.

ANF makes every intermediate value a let whose operands are atoms, and places each let in
the innermost scope (function body or If branch) that uses it, so compiling is a walk down
let chains: each let's value becomes a few instructions writing the let var's register.

  constant        LoadConst
  tuple / proj.   AllocADT / GetField
  If              If cond, <true branch>, Move, Goto, <false branch>, Move (a branch in tail
                  position ends in its own Ret instead)
  call of         a primitive function: allocate each output, InvokePacked; a reshape-only
                  one is ReshapeTensor (no kernel). A static-shaped output is a placeholder
                  storage_plan.py resolves once the function is complete (static storage of
                  the function's memory plan, or the pool's when it escapes); a dynamic
                  function is preceded by ShapeFunc (its shape program) and its dynamic
                  outputs are AllocStorage + AllocTensorReg of the shapes computed
                  a global function: Invoke;  a closure value: InvokeClosure
  fn (non-prim.)  AllocClosure of a lifted function whose first parameters are the captured
                  free variables (a let-bound function calling itself re-makes its closure
                  on entry)
  the body's atom Ret

Registers: parameters first, then one per let var and temporary, never reused; after the
let that last uses a variable (uses inside a nested branch or closure count at the let that
holds them), KillRegister drops it, so pool storage goes back to the pool for the next
allocation. If branches nest through a trampoline (an explicit stack of generators), never
through Python recursion.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from compiler.backend.graph_codegen import NOP
from compiler.errors import CompilerError
from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,
                              TupleGetItem, Var)
from compiler.ir.traversal import children, post_order
from compiler.ir.types import TensorType, TupleType, Type
from runtime.vm import bytecode as bc

from .storage_plan import PLANNED, STORAGE_ALIGNMENT, PlannedTensor
from .value_types import is_dynamic, tensor_types


class FunctionEmitter:
    """Emits one function; `module` (ModuleCompiler) resolves globals, constants, kernels and
    lifts closures."""

    def __init__(self, module, name: str, params: list[Var], body: RelayExpr,
                 self_closure: tuple[Var, int, list[Var]] | None = None) -> None:
        self.module = module
        self.name = name
        self.code: list[tuple] = []
        self.regs: dict[Var, int] = {}
        self.num_registers = 0
        self.primitive: dict[Var, Function] = {}  # let-bound primitive functions
        self.planned: list[PlannedTensor] = []  # static tensors, by PLANNED placeholder
        self.params = params
        for p in params:
            self.regs[p] = self._new_reg()
        if self_closure is not None:  # a let-bound function that calls itself
            var, index, captured = self_closure
            self.regs[var] = self._emit_dst(bc.ALLOC_CLOSURE, index,
                                            tuple(self.regs[v] for v in captured))
        self.body = body
        self.nested = nested_free_vars(body)

    def check_params(self, program: int) -> None:
        """A ShapeFunc with no outputs over the parameters' tensors: shape program `program`
        checks them (its errors name the parameter, the shape expected and the one given)."""
        tensors = []
        for p in self.params:
            ty = p._checked_type or p.type_annotation
            reg = self.regs[p]
            tensors.extend([reg] if isinstance(ty, TensorType) else self._flatten(reg, ty))
        self._emit(bc.SHAPE_FUNC, program, tuple(tensors), ())

    # ---- registers and instructions ---------------------------------------------------------
    def _new_reg(self) -> int:
        self.num_registers += 1
        return self.num_registers - 1

    def _emit(self, *inst) -> int:
        self.code.append(tuple(inst))
        return len(self.code) - 1

    def _emit_dst(self, *fields) -> int:
        dst = self._new_reg()
        self._emit(*fields, dst)
        return dst

    def _atom(self, expr: RelayExpr) -> int:
        kind = type(expr)
        if kind is Var:
            if expr not in self.regs:
                raise CompilerError(f"relay.vm.compile: {self.name}: variable "
                                    f"%{expr.name_hint} is used outside its scope or unbound")
            return self.regs[expr]
        if kind is GlobalVar:
            return self._emit_dst(bc.ALLOC_CLOSURE, self.module.function_index(expr), ())
        if kind is Constant:
            return self._emit_dst(bc.LOAD_CONST, self.module.constant_index(expr.data))
        raise CompilerError(f"relay.vm.compile: {self.name}: expected an atom (run "
                            f"ToANormalForm first), got {type(expr).__name__}")

    # ---- the walk ------------------------------------------------------------------------------
    def run(self) -> list[tuple]:
        """The function's instructions (a trampoline over _expr generators)."""
        stack: list[Iterator] = [self._expr(self.body, tail=True)]
        value = None
        while stack:
            try:
                request = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                value = done.value
                continue
            stack.append(self._expr(*request))
            value = None
        return self.code

    def _expr(self, expr: RelayExpr, tail: bool):
        """Emit a let chain; returns the register of its value (after a Ret when tail)."""
        lets = []
        while type(expr) is Let:
            lets.append((expr.var, expr.value))
            expr = expr.body
        if lets and expr is lets[-1][0]:  # `let %v = e; %v` is e: a call there is a tail call
            expr = lets.pop()[1]
        last_use = _last_uses(lets, expr, self.nested)
        for i, (var, value) in enumerate(lets):
            if type(value) is If:
                reg = yield from self._if(value, tail=False)
            else:
                reg = self._value(value, var)
            if reg is not None:
                self.regs[var] = reg
            for dead in last_use.get(i, ()):
                if dead in self.regs:
                    self._emit(bc.KILL_REGISTER, self.regs[dead])
        if type(expr) is If:
            reg = yield from self._if(expr, tail)
            if tail:
                return reg  # each branch returned
        else:
            reg = self._atom(expr) if type(expr) is Var else self._value(expr, None)
            if reg is None:
                raise CompilerError(f"relay.vm.compile: {self.name} returns a primitive "
                                    f"function as a value; call it instead")
        if tail:
            self._emit(bc.RET, reg)
        return reg

    def _if(self, node: If, tail: bool):
        cond = self._atom(node.cond)
        at_if = self._emit(bc.IF, cond, 1, 0)
        dst = None if tail else self._new_reg()
        then = yield (node.true_branch, tail)
        if not tail:
            self._emit(bc.MOVE, then, dst)
            at_goto = self._emit(bc.GOTO, 0)
        self.code[at_if] = (bc.IF, cond, 1, len(self.code) - at_if)
        other = yield (node.false_branch, tail)
        if not tail:
            self._emit(bc.MOVE, other, dst)
            self.code[at_goto] = (bc.GOTO, len(self.code) - at_goto)
        return dst

    def _value(self, value: RelayExpr, var: Var | None) -> int | None:
        kind = type(value)
        if kind in (Var, GlobalVar, Constant):
            reg = self._atom(value)
            return self._emit_dst(bc.MOVE, reg) if kind is Var else reg
        if kind is Tuple:
            return self._emit_dst(bc.ALLOC_ADT, 0, tuple(self._atom(f) for f in value.fields))
        if kind is TupleGetItem:
            return self._emit_dst(bc.GET_FIELD, self._atom(value.tuple_value), value.index)
        if kind is Function:
            if value.is_primitive:
                if var is None:
                    return None
                self.primitive[var] = value
                return None
            index, captured = self.module.lift(value, self.name, var)
            return self._emit_dst(bc.ALLOC_CLOSURE, index,
                                  tuple(self.regs[v] for v in captured))
        if kind is Call:
            return self._call(value)
        raise CompilerError(f"relay.vm.compile: {self.name}: cannot compile a "
                            f"{kind.__name__} here")

    def _call(self, call: Call) -> int:
        op = call.op
        if type(op) is Var and op in self.primitive:
            op = self.primitive[op]
        if type(op) is Function and op.is_primitive:
            return self._packed(op, call)
        args = tuple(self._atom(a) for a in call.args)
        if type(op) is GlobalVar:
            return self._emit_dst(bc.INVOKE, self.module.function_index(op), args)
        if type(op) is Op:
            raise CompilerError(f"relay.vm.compile: {self.name}: a call of operator "
                                f"{op.name} outside a primitive function (run FuseOps)")
        return self._emit_dst(bc.INVOKE_CLOSURE, self._atom(op) if type(op) is Var
                              else self._value(op, None), args)

    def _packed(self, func: Function, call: Call) -> int:
        """Outputs allocated, then the kernel called; the result register (a tuple for
        several outputs, shaped as the function's return type)."""
        inputs: list[int] = []
        temps: list[int] = []
        for arg in call.args:
            reg = self._atom(arg)
            if isinstance(arg.checked_type, TensorType):
                inputs.append(reg)
            else:
                fields = self._flatten(reg, arg.checked_type)
                inputs.extend(fields)
                temps.extend(fields)
        kernel = self.module.kernel_index(func)
        ret = func.ret_type or func.body.checked_type
        out_types = tensor_types(ret, "a primitive function's result")
        shapes = self._shape_func(func, inputs, len(out_types)) if is_dynamic(func) else None
        if kernel == NOP:
            if shapes is None:
                shape = self.module.constant_index(np.array(out_types[0].shape, dtype="int64"))
                shapes = [self._emit_dst(bc.LOAD_CONST, shape)]
            out = self._emit_dst(bc.RESHAPE_TENSOR, inputs[0], shapes[0])
            self._kill(shapes + temps)
            return out
        outputs = [self._alloc(t) if shapes is None or not t.is_dynamic else
                   self._alloc_dynamic(t, shape)
                   for t, shape in zip(out_types, shapes or out_types)]
        self._emit(bc.INVOKE_PACKED, kernel, len(outputs), tuple(inputs + outputs))
        self._kill((shapes or []) + temps)
        return self._regroup(ret, outputs)

    def _shape_func(self, func: Function, inputs: list[int], num_outputs: int) -> list[int]:
        """ShapeFunc: registers holding the output shapes of a dynamic primitive function at
        run time (its shape program also checks the inputs against the function's
        constraints)."""
        program = self.module.shape_program_index(func)
        shapes = [self._new_reg() for _ in range(num_outputs)]
        self._emit(bc.SHAPE_FUNC, program, tuple(inputs), tuple(shapes))
        return shapes

    def _kill(self, regs: list[int]) -> None:
        for reg in regs:
            self._emit(bc.KILL_REGISTER, reg)

    def _alloc_dynamic(self, ty: TensorType, shape: int) -> int:
        """A tensor of the shape a register holds, in storage of its size."""
        storage = self._emit_dst(bc.ALLOC_STORAGE, shape, STORAGE_ALIGNMENT, ty.dtype)
        tensor = self._emit_dst(bc.ALLOC_TENSOR_REG, storage, 0, shape, ty.dtype)
        self._emit(bc.KILL_REGISTER, storage)
        return tensor

    def _alloc(self, ty: TensorType) -> int:
        """A static-shaped tensor: a placeholder storage_plan replaces once the function is
        complete (static storage of the function's memory plan, or the pool's)."""
        nbytes = math.prod(ty.shape) * np.dtype(ty.dtype).itemsize
        self.planned.append(PlannedTensor(nbytes, tuple(ty.shape), ty.dtype))
        return self._emit_dst(PLANNED, len(self.planned) - 1)

    def _flatten(self, reg: int, ty: Type) -> list[int]:
        """Registers of the tensors of a tuple value, in order (GetField, nested)."""
        out, stack = [], [(reg, ty)]
        while stack:
            r, t = stack.pop()
            if isinstance(t, TensorType):
                out.append(r)
            elif isinstance(t, TupleType):
                fields = [(self._emit_dst(bc.GET_FIELD, r, i), f) for i, f in enumerate(t.fields)]
                stack.extend(reversed(fields))
            else:
                raise CompilerError(f"relay.vm.compile: a primitive function argument of "
                                    f"type {t}")
        return out

    def _regroup(self, ty: Type, outputs: list[int]) -> int:
        """The register of a value of type ty built from its flat tensor registers (AllocADT
        per tuple, inner ones first)."""
        if isinstance(ty, TensorType):
            return outputs[0]
        flat = iter(outputs)
        stack = [(iter(ty.fields), [])]
        while True:
            fields, regs = stack[-1]
            field = next(fields, None)
            if field is None:
                reg = self._emit_dst(bc.ALLOC_ADT, 0, tuple(regs))
                stack.pop()
                if not stack:
                    return reg
                stack[-1][1].append(reg)
            elif isinstance(field, TupleType):
                stack.append((iter(field.fields), []))
            else:
                regs.append(next(flat))


def _last_uses(lets: list, final: RelayExpr, nested: dict) -> dict[int, list[Var]]:
    """{let index: the variables bound in this chain whose last use is that let's value}
    (a variable never used dies right after its own let; the final atom's are not killed).
    `nested` gives the free variables of each If and closure (nested_free_vars)."""
    bound = {var: i for i, (var, _) in enumerate(lets)}
    last: dict[Var, int] = {var: i for var, i in bound.items()}
    for i, (_, value) in enumerate(lets):
        for v in _used(value, nested):
            if v in bound:
                last[v] = i
    for v in _used(final, nested):
        last.pop(v, None)
    out: dict[int, list[Var]] = {}
    for v, i in last.items():
        out.setdefault(i, []).append(v)
    return out


def _used(value: RelayExpr, nested: dict) -> list[Var] | set[Var]:
    kind = type(value)
    if kind is Var:
        return [value]
    if kind is Call:
        return [a for a in (value.op, *value.args) if type(a) is Var]
    if kind is Tuple:
        return [f for f in value.fields if type(f) is Var]
    if kind is TupleGetItem:
        return [value.tuple_value] if type(value.tuple_value) is Var else []
    if kind in (If, Function):
        return nested.get(value, ())
    return []


def nested_free_vars(body: RelayExpr) -> dict[RelayExpr, frozenset]:
    """The free variables of every If and non-primitive function in body, in one bottom-up
    pass (each variable is carried up only until its binder: linear for ANF programs, where
    a value's uses are near its let, instead of one traversal per If)."""
    free: dict[RelayExpr, frozenset] = {}
    out: dict[RelayExpr, frozenset] = {}
    empty: frozenset = frozenset()
    skip = (lambda e: not (type(e) is Function and e.is_primitive))
    for node in post_order(body, expand=skip):
        kind = type(node)
        if kind is Var:
            free[node] = frozenset((node,))
        elif kind is Function:
            free[node] = empty if node.is_primitive else \
                free[node.body].difference(node.params)
            out[node] = free[node]
        elif kind is Let:
            free[node] = (free[node.value] | free[node.body]) - {node.var}
        else:
            sets = [free[c] for c in children(node)]
            free[node] = empty.union(*sets) if sets else empty
            if kind is If:
                out[node] = free[node]
    return out
