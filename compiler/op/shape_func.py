"""Shape functions: how a function's output shapes follow from its input shapes at run time.

shape_program(func) gives the runtime.shape_program.ShapeProgram of a type-checked function
(the contract the VM compiler codes against; see that module's docstring). It re-runs the
type relations of func's body with every dynamic input dim replaced by a fresh symbol bound
to "input i, dim j": relations compute with symbolic dims (compiler.ir.dims), so the output
types come out as expressions of those symbols, and the equality and broadcast constraints
the relations meet are collected as the program's run-time checks. An op whose output
shape depends on input *values* declares a shape function instead (OpDef.shape_func, a
ShapeFuncDef naming a runtime.shape_functions entry); the program calls it with the shapes
and values it needs (the values must be parameters or constants of func: such ops are
OPAQUE, so fusion never hides their value inputs inside a group).

Nothing else keeps a list of shape functions: the registry's type relations and ShapeFuncDefs
are the only source.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.dims import Any, _Symbol, collect_constraints
from compiler.ir.expr import (Call, Constant, Function, Let, Op, RelayExpr, Tuple, TupleGetItem,
                              Var)
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType, TupleType, Type
from runtime.shape_functions import register_shape_function
from runtime.shape_program import ShapeProgram
from .registry import ShapeFuncDef, get_def, register_op_attr

__all__ = ["shape_program", "input_checks", "register_shape_func", "ShapeFuncError",
           "flatten_types"]


class ShapeFuncError(CompilerError):
    """A function's output shapes cannot be expressed as a shape program."""


class _Unknown(Exception):
    """A dim built from a symbol the program cannot compute (partial mode drops it)."""


def flatten_types(ty: Type) -> list:
    """The tensor types of ty, tuples flattened field by field (the program's order)."""
    out, stack = [], [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(reversed(t.fields))
        elif isinstance(t, TensorType):
            out.append(t)
        else:
            raise ShapeFuncError(f"shape program: {t} is not a tensor or a tuple of tensors")
    return out


def _rebuild(ty: Type, tensors: list) -> Type:
    """ty with its tensor types replaced, in flatten_types order, by `tensors`."""
    it = iter(tensors)

    def build(t):
        if isinstance(t, TupleType):
            return TupleType([build(f) for f in t.fields])
        return next(it)
    return build(ty)


def _json_value(value, where: str):
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    raise ShapeFuncError(f"{where}: attribute value {value!r} cannot go into a shape program")


class _Builder:
    """Emits the register program; maps symbols and expressions to registers."""

    def __init__(self):
        self.instructions: list = []
        self.checks: list = []
        self.atom_regs: dict = {}  # symbol or node key -> register
        self.memo: dict = {}  # ("const", v) or a dim key -> register
        self.needs_values: list = []

    def emit(self, *ins) -> int:
        key = ins if ins[0] != "call" else None  # the rest are pure: emitted once
        if key is not None and key in self.memo:
            return self.memo[key]
        self.instructions.append(list(ins))
        reg = len(self.instructions) - 1
        if key is not None:
            self.memo[key] = reg
        return reg

    def bind_symbol(self, dim: Any, reg: int) -> None:
        self.atom_regs[dim.symbol.key] = reg

    def reg(self, dim) -> int:
        """The register computing dim (an int or an expression of bound symbols)."""
        if not isinstance(dim, Any):
            return self.emit("const", int(dim))
        for atom in dim.atoms():
            if atom.key in self.atom_regs:
                continue
            if isinstance(atom, _Symbol):
                raise _Unknown(atom)
            a, b = (self._linear(x) for x in atom.args)
            self.atom_regs[atom.key] = self.emit(atom.op, a, b)
        return self._linear(dim)

    def _linear(self, dim) -> int:
        if not isinstance(dim, Any):
            return self.emit("const", int(dim))
        total = None
        for atom, coeff in dim.terms:
            term = self.atom_regs[atom.key]
            if coeff != 1:
                term = self.emit("mul", term, self.emit("const", coeff))
            total = term if total is None else self.emit("add", total, term)
        if dim.const:
            total = self.emit("add", total, self.emit("const", dim.const))
        return total

    def check(self, kind: str, a, b, message: str) -> None:
        entry = [kind, self.reg(a), self.reg(b), message]
        if entry[:3] not in [c[:3] for c in self.checks]:
            self.checks.append(entry)


class _Walk:
    """Types a function body again over symbolic inputs, emitting the program as it goes."""

    def __init__(self, func: Function, partial: bool):
        self.func, self.partial = func, partial
        self.b = _Builder()
        self.types: dict = {}
        self.inputs: list = []  # (name, shape with None for dynamic)
        self.input_of: dict = {}  # param Var -> first flat input index

    def params(self) -> None:
        seen: dict = {}  # a dynamic dim of the declared types -> the symbol standing for it
        for param in self.func.params:
            ty = _declared(param)
            self.input_of[param] = len(self.inputs)
            tensors = []
            for k, t in enumerate(flatten_types(ty)):
                index = len(self.inputs)
                name = param.name_hint if k == 0 and not isinstance(ty, TupleType) else \
                    f"{param.name_hint}.{k}"
                self.inputs.append((name, [None if isinstance(d, Any) else int(d)
                                           for d in t.shape]))
                dims = []
                for j, d in enumerate(t.shape):
                    if not isinstance(d, Any):
                        dims.append(d)
                        continue
                    reg = self.b.emit("dim", index, j)
                    if d in seen:  # the same unknown twice: one symbol, checked equal
                        self.b.check("eq", _bound(self.b, reg, name, j), seen[d],
                                     "the declared types share this dynamic dim")
                        dims.append(seen[d])
                        continue
                    seen[d] = _bound(self.b, reg, name, j)
                    dims.append(seen[d])
                tensors.append(TensorType(dims, t.dtype))
            self.types[param] = _rebuild(ty, tensors)

    def run(self) -> Type:
        body = self.func.body
        let_values = {n.var: n.value for n in post_order(body) if type(n) is Let}
        types = self.types
        for node in post_order(body):
            kind = type(node)
            if kind is Op or node in types:
                continue
            if kind is Var:
                if node in let_values:
                    continue  # typed from its value when used
                raise ShapeFuncError(f"shape program: free variable %{node.name_hint}")
            types[node] = self._type(node, let_values)
        return self._get(body, let_values)

    def _get(self, node, let_values):
        while node not in self.types and node in let_values:  # a let var: its value's type
            node = let_values[node]
        return self.types[node]

    def _type(self, node: RelayExpr, let_values: dict) -> Type:
        kind = type(node)
        if kind is Constant:
            return TensorType(node.data.shape, node.data.dtype)
        if kind is Tuple:
            return TupleType([self._get(f, let_values) for f in node.fields])
        if kind is TupleGetItem:
            return self._get(node.tuple_value, let_values).fields[node.index]
        if kind is Let:
            return self._get(node.body, let_values)
        if kind is Call and type(node.op) is Op:
            return self._op_call(node, [self._get(a, let_values) for a in node.args])
        if self.partial and node._checked_type is not None:
            return _fresh(node.checked_type)  # control flow, calls: unknown here
        raise ShapeFuncError(f"shape program: cannot compute the shapes of a "
                             f"{kind.__name__} node (only op calls, tuples and lets)")

    def _op_call(self, call: Call, arg_types: list) -> Type:
        opdef = get_def(call.op.name)
        with collect_constraints() as found:
            try:
                out = opdef.type_rel(arg_types, call.attrs)
            except (CompilerError, TypeError, ValueError, IndexError, KeyError) as err:
                raise ShapeFuncError(f"shape program: {opdef.name} rejects the symbolic input "
                                     f"types {[str(t) for t in arg_types]}: {err}") from err
        for kind, a, b, message in found:
            try:
                self.b.check(kind, a, b, message)
            except _Unknown:
                if not self.partial:
                    raise ShapeFuncError(f"shape program: {message} involves a dim "
                                         "that is not computable") from None
        unknown = [(j, t) for t in flatten_types(out) for j, d in enumerate(t.shape)
                   if not self._computable(d)]
        if not unknown:  # the relation computed every dim: it is the shape function
            return out
        if opdef.shape_func is not None:
            return self._declared_call(call, opdef.name, opdef.shape_func, arg_types, out)
        if not self.partial:
            j, t = unknown[0]
            raise ShapeFuncError(f"shape program: {opdef.name}'s output dim {j} ({t}) depends "
                                 "on input values, and the op declares no shape function "
                                 "(relay.op.register_shape_func)")
        return out

    def _computable(self, dim) -> bool:
        """Every symbol dim is built from has a register (input dims, call results)."""
        return not isinstance(dim, Any) or all(
            atom.key in self.b.atom_regs for atom in dim.atoms() if isinstance(atom, _Symbol))

    def _declared_call(self, call: Call, name: str, sf: ShapeFuncDef, arg_types: list,
                       out: Type) -> Type:
        args, index = [], 0
        for arg, ty in zip(call.args, arg_types):
            for t in flatten_types(ty):
                if sf.reads_value(index):
                    args.append(self._value_arg(call, name, arg, index))
                else:
                    args.append(["shape", [self._reg_or_unknown(d) for d in t.shape]])
                index += 1
        outs = flatten_types(out)
        attrs = {k: _json_value(v, f"{name}.{k}") for k, v in (call.attrs or {}).items()}
        reg = self.b.emit("call", sf.name, attrs, args, [len(t.shape) for t in outs])
        tensors = []
        for k, t in enumerate(outs):
            dims = [d if not isinstance(d, Any) else
                    _bound(self.b, self.b.emit("item", reg, k, j), name, j)
                    for j, d in enumerate(t.shape)]
            tensors.append(TensorType(dims, t.dtype))
        return _rebuild(out, tensors)

    def _reg_or_unknown(self, dim) -> int:
        try:
            return self.b.reg(dim)
        except _Unknown:
            raise ShapeFuncError("shape program: a declared shape function needs a shape "
                                 "that is not computable here") from None

    def _value_arg(self, call: Call, name: str, arg: RelayExpr, index: int) -> list:
        if type(arg) is Constant:
            data = arg.data.numpy()
            return ["const", data.tolist(), data.dtype.name]
        if type(arg) is Var and arg in self.input_of and \
                isinstance(self.types[arg], TensorType):
            i = self.input_of[arg]
            if i not in self.b.needs_values:
                self.b.needs_values.append(i)
            return ["value", i]
        raise ShapeFuncError(f"shape program: {name} reads the value of its input {index} to "
                             "compute its output shape, so that input must be a parameter or "
                             f"a constant of the function, got a {type(arg).__name__}")

    def program(self, out: Type | None) -> ShapeProgram:
        outputs = []
        if out is not None:
            outputs = [[self.b.reg(d) for d in t.shape] for t in flatten_types(out)]
        return ShapeProgram(self.inputs, sorted(self.b.needs_values), self.b.instructions,
                            self.b.checks, outputs)


def _declared(param: Var) -> Type:
    ty = param._checked_type if param._checked_type is not None else param.type_annotation
    if ty is None:
        raise ShapeFuncError(f"shape program: parameter %{param.name_hint} has no type; run "
                             "InferType first")
    return ty


def _bound(b: _Builder, reg: int, name: str, j: int) -> Any:
    sym = Any(f"{name}.shape[{j}]")
    b.bind_symbol(sym, reg)
    return sym


def _fresh(ty: Type) -> Type:
    """ty with every dynamic dim replaced by a new unknown symbol."""
    return _rebuild(ty, [TensorType([Any() if isinstance(d, Any) else d for d in t.shape],
                                    t.dtype) for t in flatten_types(ty)])


def shape_program(func: Function) -> ShapeProgram:
    """The ShapeProgram computing func's output shapes (and checking its inputs) from its
    input shapes (and the values of the inputs in needs_values). func must be type-checked
    and made of op calls, tuples and lets (a fused primitive function, or a dataflow main);
    ShapeFuncError otherwise."""
    if not isinstance(func, Function):
        raise ShapeFuncError(f"shape_program expects a relay Function, got "
                             f"{type(func).__name__}")
    walk = _Walk(func, partial=False)
    walk.params()
    return walk.program(walk.run())


def input_checks(func: Function) -> ShapeProgram:
    """A ShapeProgram with no outputs that checks func's inputs against every constraint
    its body puts on them that can be checked from the input shapes alone; for any function,
    control flow included (what the VM runs when main's inputs are bound)."""
    walk = _Walk(func, partial=True)
    walk.params()
    walk.run()
    for ty in walk.types.values():  # compute every dim it can: broadcasts check as they go
        for t in flatten_types(ty) if isinstance(ty, (TensorType, TupleType)) else ():
            for d in t.shape:
                if isinstance(d, Any) and walk._computable(d):
                    walk.b.reg(d)
    return walk.program(None)


def register_shape_func(op_name: str, data_dependent, shape_func: Callable | None = None,
                        level: int = 10):
    """TVM's relay.op.register_shape_func: shape_func(attrs, inputs, out_ndims) -> [int64
    shape vector per output], reading input values where data_dependent (a bool for all
    inputs or one per input) says so, else input shapes. A decorator without shape_func."""
    def add(fn: Callable) -> Callable:
        opdef = get_def(op_name)
        flags = tuple(bool(f) for f in data_dependent) \
            if isinstance(data_dependent, (list, tuple)) else bool(data_dependent)
        current = opdef.attr_levels.get("FShapeFunc")
        register_op_attr(op_name, "FShapeFunc", ShapeFuncDef(op_name, flags), level)
        if opdef.attr_levels.get("FShapeFunc") == level:  # this level won: it runs
            register_shape_function(op_name, fn, override=current is not None)
        return fn
    return add if shape_func is None else add(shape_func)
