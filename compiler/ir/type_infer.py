"""Type inference (what the InferType pass runs): forward over the IR, filling in what the user
left out.

Algorithm: one post-order sweep (explicit stack, compiler.ir.traversal.post_order) per
function. Leaves get their types from annotations (vars), data (constants) or the module
(global vars); every other node's type follows from its children's: op calls through the op's
`type_rel`, function calls by checking the arguments against the callee's FuncType. A let var
without annotation is typed from its value: post-order visits the value's whole subtree
before the let body, so the var is bound the moment its value is typed. Every node gets
`_checked_type` in place. Only if something has to be filled in (a let var's annotation, a
function's ret_type, an IncompleteType) is a second sweep run that rebuilds the nodes above
the fill-ins; otherwise the very same nodes come back, so identity and memo tables survive.

Module functions are inferred callees first (a post-order of the call graph), so `main` may
come before the functions it calls; mutually recursive functions need full annotations.
A parameter without annotation is typed at its first use as an op argument, by the op's
OpDef.solve_missing (conv2d's weight from channels and kernel_size, dense's from units,
bias_add's from the data's axis: what TVM's type relations solve); there is no general
unification, so a parameter no solver can type is an error naming it. An op call's type_args
are its argument types, as TVM fills them; a call of a polymorphic function keeps its own.
"""
from __future__ import annotations

from compiler.errors import CompilerError, TypeInferenceError
from .expr import (VARIADIC, Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,
                   TupleGetItem, Var)
from .dims import Any as AnyDim
from .module import IRModule
from .traversal import children, post_order, rewrite_post_order
from .types import FuncType, IncompleteType, TensorType, TupleType, Type, instantiate

_BOOL_SCALAR = TensorType((), "bool")


def is_complete(ty: Type | None) -> bool:
    """A type with no IncompleteType anywhere inside (types are shallow; recursion is fine)."""
    if ty is None or isinstance(ty, IncompleteType):
        return False
    if isinstance(ty, TupleType):
        return all(is_complete(f) for f in ty.fields)
    if isinstance(ty, FuncType):
        return all(is_complete(a) for a in ty.arg_types) and is_complete(ty.ret_type)
    return True


def _matches(annotation: Type, actual: Type) -> bool:
    """actual fits an annotation whose IncompleteTypes are holes."""
    if isinstance(annotation, IncompleteType):
        return True
    if isinstance(annotation, TupleType) and isinstance(actual, TupleType):
        return len(annotation.fields) == len(actual.fields) and all(
            _matches(a, b) for a, b in zip(annotation.fields, actual.fields))
    if isinstance(annotation, FuncType) and isinstance(actual, FuncType):
        return len(annotation.arg_types) == len(actual.arg_types) and all(
            _matches(a, b) for a, b in zip(annotation.arg_types, actual.arg_types)) and \
            _matches(annotation.ret_type, actual.ret_type)
    if isinstance(annotation, TensorType) and isinstance(actual, TensorType):
        # an Any on either side fits any dim (TVM unifies them; the run time checks)
        return annotation.dtype == actual.dtype and len(annotation.shape) == \
            len(actual.shape) and all(a == b or isinstance(a, AnyDim) or isinstance(b, AnyDim)
                                      for a, b in zip(annotation.shape, actual.shape))
    return annotation == actual


def unify(a: Type, b: Type) -> Type | None:
    """The type both a and b fit, TVM's unification of two branch types: dims that differ
    become a fresh Any where either is dynamic; None when they cannot be unified."""
    if a == b:
        return a
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        if a.dtype != b.dtype or len(a.shape) != len(b.shape):
            return None
        dims = []
        for x, y in zip(a.shape, b.shape):
            if x != y and not (isinstance(x, AnyDim) or isinstance(y, AnyDim)):
                return None
            dims.append(x if x == y else AnyDim())
        return TensorType(dims, a.dtype)
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.fields) == len(b.fields):
        fields = [unify(x, y) for x, y in zip(a.fields, b.fields)]
        return None if any(f is None for f in fields) else TupleType(fields)
    return None


def brief(node: RelayExpr, depth: int = 1) -> str:
    """A one-line abbreviation of an expression for error messages (never the whole graph)."""
    kind = type(node)
    if kind is Var:
        return f"%{node.name_hint}"
    if kind is GlobalVar:
        return f"@{node.name_hint}"
    if kind is Op:
        return node.name
    if kind is Constant:
        return f"const<{node.data.dtype}{list(node.data.shape)}>"
    if kind is Call:
        head = brief(node.op, 0) if type(node.op) in (Op, GlobalVar, Var) else "fn"
        if depth <= 0:
            return f"{head}(...)"
        args = [brief(a, depth - 1) for a in node.args[:6]]
        if len(node.args) > 6:
            args.append(f"... {len(node.args) - 6} more")
        return f"{head}({', '.join(args)})"
    if kind is Tuple:
        return f"({', '.join(brief(f, depth - 1) for f in node.fields)})" if depth > 0 else "(...)"
    if kind is TupleGetItem:
        return f"{brief(node.tuple_value, 0)}.{node.index}"
    if kind is Function:
        return f"fn ({', '.join(brief(p) for p in node.params)}) {{...}}"
    if kind is Let:
        return f"let {brief(node.var)} = {brief(node.value, 0)}; ..."
    if kind is If:
        return f"if ({brief(node.cond, 0)}) {{...}} else {{...}}"
    return kind.__name__


def _arguments_first(node: RelayExpr) -> tuple:
    """children(), with a called function literal after the call's arguments."""
    if type(node) is Call and type(node.op) is Function:
        return (*node.args, node.op)
    return children(node)


def _types_str(types) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


class _Inferer:
    """Types one expression; `global_type(gv)` supplies the types of module functions."""

    def __init__(self, global_type):
        self.global_type = global_type
        self.types: dict = {}
        self.untyped: set = set()  # params waiting for an op's solve_missing to type them
        self.argument_of: dict = {}  # unannotated param of a called literal -> its argument
        self.needs_fill = False

    # ----- the sweep
    def infer(self, expr: RelayExpr) -> Type:
        # a function literal called in place (a fused function) comes after its call's
        # arguments, so its unannotated params take their types (TVM unifies them)
        order = post_order(expr, children_of=_arguments_first)
        let_values = {n.var: n.value for n in order
                      if type(n) is Let and not is_complete(n.var.type_annotation)}
        self.argument_of = {p: a for n in order
                            if type(n) is Call and type(n.op) is Function
                            and len(n.op.params) == len(n.args)
                            for p, a in zip(n.op.params, n.args)
                            if not is_complete(p.type_annotation)}
        pending: dict = {}
        types = self.types
        for node in order:
            if type(node) is Var:
                self._type_var(node, let_values, pending)
                continue
            if type(node) is Op:
                continue  # typed by the call that applies it
            ty = self._type_of(node)
            types[node] = ty
            node._set_checked_type(ty)
            for var in pending.pop(node, ()):
                self._bind_let_var(var, ty)
        return types[expr] if type(expr) is not Op else self._op_value_error(expr)

    def _type_var(self, var: Var, let_values: dict, pending: dict) -> None:
        ann = var.type_annotation
        if is_complete(ann):
            self.types[var] = ann
            var._set_checked_type(ann)
            return
        value = let_values.get(var)
        argument = self.argument_of.get(var)
        if argument is not None and argument in self.types:
            self._fill_param(var, self.types[argument])
        elif value is None:
            self.untyped.add(var)  # typed by the op call that first uses it, if it can be
        elif value in self.types:
            self._bind_let_var(var, self.types[value])
        else:
            pending.setdefault(value, []).append(var)

    def _fill_param(self, var: Var, ty: Type) -> None:
        """Type an unannotated parameter (the annotation is filled in by the second sweep)."""
        self.untyped.discard(var)
        self.types[var] = ty
        var._set_checked_type(ty)
        self.needs_fill = True

    def _bind_let_var(self, var: Var, ty: Type) -> None:
        ann = var.type_annotation
        if ann is not None and not _matches(ann, ty):
            raise TypeInferenceError(f"InferType: let %{var.name_hint} is annotated {ann} but its "
                                     f"value has type {ty}")
        self.types[var] = ty
        var._set_checked_type(ty)
        self.needs_fill = True

    def _child(self, node: RelayExpr, parent: RelayExpr) -> Type:
        try:
            return self.types[node]
        except KeyError:
            if node in self.untyped:
                ann = node.type_annotation
                what = "has no type annotation" if ann is None else f"is annotated {ann}"
                raise TypeInferenceError(
                    f"InferType: variable %{node.name_hint} {what}, and its type cannot be "
                    f"inferred from its use in {brief(parent)} (ops such as nn.conv2d, "
                    "nn.dense and nn.bias_add type a weight from their attributes and the "
                    "data): give it a full annotation, e.g. "
                    f"relay.var({node.name_hint!r}, shape=(...), dtype=\"float32\")") from None
            if type(node) is Var:
                raise TypeInferenceError(
                    f"InferType: let var %{node.name_hint} is used (in {brief(parent)}) before "
                    "its value is typed (a recursive let?): annotate the var") from None
            if type(node) is Op:
                self._op_value_error(node)
            raise

    @staticmethod
    def _op_value_error(op: Op):
        raise TypeInferenceError(f"InferType: the op {op.name} is used as a value; ops can only "
                                 "be called")

    # ----- per node kind
    def _type_of(self, node: RelayExpr) -> Type:
        kind = type(node)
        if kind is Call:
            return self._type_call(node)
        if kind is Constant:
            return TensorType(node.data.shape, node.data.dtype)
        if kind is Tuple:
            return TupleType([self._child(f, node) for f in node.fields])
        if kind is TupleGetItem:
            return self._type_getitem(node)
        if kind is Let:
            value = self._child(node.value, node)
            if not _matches(self._child(node.var, node), value):
                raise TypeInferenceError(f"InferType: let %{node.var.name_hint} is annotated "
                                         f"{node.var.type_annotation} but its value has type "
                                         f"{value}")
            return self._child(node.body, node)
        if kind is If:
            return self._type_if(node)
        if kind is Function:
            return self._type_function(node)
        if kind is GlobalVar:
            return self.global_type(node)
        raise TypeInferenceError(f"InferType: cannot type a {kind.__name__} node")

    def _type_call(self, call: Call) -> Type:
        if type(call.op) is Op:
            self._solve_untyped_args(call)
            return self._type_op_call(call, [self._child(a, call) for a in call.args])
        fty = self._child(call.op, call)
        if not isinstance(fty, FuncType):
            raise TypeInferenceError(f"InferType: {brief(call)} calls {brief(call.op, 0)}, whose "
                                     f"type is {fty}, not a function type")
        if not fty.type_params and len(fty.arg_types) == len(call.args):
            for arg, want in zip(call.args, fty.arg_types):  # an unannotated argument var
                if arg in self.untyped and is_complete(want):  # takes the param's type
                    self._fill_param(arg, want)
        arg_types = [self._child(a, call) for a in call.args]
        if len(fty.arg_types) != len(arg_types):
            raise TypeInferenceError(f"InferType: {brief(call)}: the callee takes "
                                     f"{len(fty.arg_types)} argument(s), got {len(arg_types)}")
        if fty.type_params:  # polymorphic callee: solve its type params from the arguments
            try:
                fty = instantiate(fty, arg_types)
            except TypeError as err:
                raise TypeInferenceError(f"InferType: {brief(call)}: {err}") from None
        for i, (want, got) in enumerate(zip(fty.arg_types, arg_types)):
            if not _matches(want, got):
                raise TypeInferenceError(
                    f"InferType: {brief(call)}: argument {i} has type {got}, but the callee "
                    f"{brief(call.op, 0)} expects {want} (callee type {fty})")
        return fty.ret_type

    def _solve_untyped_args(self, call: Call) -> None:
        """Type the call's unannotated params through the op's solve_missing, if it has one."""
        opdef = call.op.op_def
        if opdef.solve_missing is None or not any(a in self.untyped for a in call.args):
            return
        known = [self.types.get(a) for a in call.args]
        try:
            solved = opdef.solve_missing(known, call.attrs)
        except (CompilerError, TypeError, ValueError, IndexError, AttributeError) as err:
            raise TypeInferenceError(f"InferType: {opdef.name} cannot type the unannotated "
                                     f"arguments of {brief(call)}: {err}") from err
        for index, ty in solved.items():
            var = call.args[index]
            if known[index] is None and var in self.untyped:
                self.untyped.discard(var)
                self.types[var] = ty
                var._set_checked_type(ty)
                self.needs_fill = True

    def _type_op_call(self, call: Call, arg_types: list) -> Type:
        name = call.op.name
        opdef = call.op.op_def
        if opdef.num_inputs != VARIADIC and opdef.num_inputs != len(arg_types):
            raise TypeInferenceError(f"InferType: {brief(call)}: {name} takes "
                                     f"{opdef.num_inputs} argument(s), got {len(arg_types)}")
        try:
            ty = opdef.type_rel(arg_types, call.attrs)
        except (CompilerError, TypeError, ValueError, IndexError, KeyError, AttributeError) as err:
            raise TypeInferenceError(
                f"InferType: {name} rejects its argument types in {brief(call)}: "
                f"argument types {_types_str(arg_types)}"
                + (f", attrs {dict(call.attrs)}" if call.attrs else "") + f": {err}") from err
        if not isinstance(ty, Type):
            raise TypeInferenceError(f"InferType: the type relation of {name} returned "
                                     f"{type(ty).__name__} {ty!r:.60}, expected a Type")
        # TVM fills an op call's type_args with its argument types (structural equality and
        # hashing ignore them for op calls, so setting them in place changes no identity)
        object.__setattr__(call, "type_args", tuple(arg_types))
        return ty

    def _type_getitem(self, node: TupleGetItem) -> Type:
        tty = self._child(node.tuple_value, node)
        if not isinstance(tty, TupleType):
            raise TypeInferenceError(f"InferType: {brief(node)} projects field {node.index} of "
                                     f"{brief(node.tuple_value, 0)}, whose type {tty} is not a "
                                     "tuple type")
        if node.index >= len(tty.fields):
            raise TypeInferenceError(f"InferType: {brief(node)}: index {node.index} is out of "
                                     f"range for a tuple of {len(tty.fields)} field(s) {tty}")
        return tty.fields[node.index]

    def _type_if(self, node: If) -> Type:
        cond = self._child(node.cond, node)
        if cond != _BOOL_SCALAR:
            raise TypeInferenceError(f"InferType: {brief(node)}: the condition must be a bool "
                                     f"scalar ({_BOOL_SCALAR}), got {cond}")
        then = self._child(node.true_branch, node)
        other = self._child(node.false_branch, node)
        both = unify(then, other)
        if both is None:
            raise TypeInferenceError(f"InferType: {brief(node)}: the branches have different "
                                     f"types: true branch {then}, false branch {other}")
        return both

    def _type_function(self, fn: Function) -> FuncType:
        params = [self._child(p, fn) for p in fn.params]
        body = self._child(fn.body, fn)
        if fn.ret_type is not None and not _matches(fn.ret_type, body):
            raise TypeInferenceError(f"InferType: {brief(fn)} declares return type "
                                     f"{fn.ret_type}, but its body has type {body}")
        if not is_complete(fn.ret_type):
            self.needs_fill = True
        return FuncType(params, body, fn.type_params)

    # ----- the fill-in sweep
    def fill_in(self, expr: RelayExpr) -> RelayExpr:
        """Rebuild expr with the inferred annotations; untouched when nothing was missing."""
        if not self.needs_fill:
            return expr
        types = self.types

        def rewrite(old, new):
            kind = type(old)
            if kind is Var and not is_complete(old.type_annotation):
                new = Var(old.name_hint, types[old], old.span)
            elif kind is Function and not is_complete(old.ret_type):
                new = Function(new.params, new.body, types[old].ret_type, new.type_params,
                               new.attrs, new.span)
            if new is not old and old in types:
                new._set_checked_type(types[old])
            return new
        return rewrite_post_order(expr, rewrite)


# ---------------------------------------------------------------------------------------------
# module level

def _callees(func: Function) -> list:
    return [n for n in post_order(func) if type(n) is GlobalVar]


def _callee_first_order(mod: IRModule) -> list:
    """Global vars so that callees precede callers (cycles are broken arbitrarily)."""
    functions = mod.functions
    done: set = set()
    order = []
    for root in functions:
        if root in done:
            continue
        done.add(root)
        stack = [(root, iter(_callees(functions[root])))]
        while stack:
            gv, it = stack[-1]
            nxt = next((c for c in it if c in functions and c not in done), None)
            if nxt is None:
                stack.pop()
                order.append(gv)
            else:
                done.add(nxt)
                stack.append((nxt, iter(_callees(functions[nxt]))))
    return order


def infer_module(mod: IRModule) -> IRModule:
    """Type every function of mod; the result shares every function that needed no fill-in."""
    functions = mod.functions
    solved: dict = {}

    def global_type(gv: GlobalVar) -> Type:
        if gv in solved:
            return solved[gv]
        func = functions.get(gv)
        if func is None:
            raise TypeInferenceError(f"InferType: @{gv.name_hint} is not a function of this "
                                     f"module (it has {[g.name_hint for g in functions]})")
        fty = func.func_type_annotation
        if fty is None or not is_complete(fty):
            raise TypeInferenceError(f"InferType: @{gv.name_hint} is called recursively before "
                                     "its type is known: annotate its parameters and ret_type")
        return fty

    out = mod.shallow_copy()
    for gv in _callee_first_order(mod):
        inferer = _Inferer(global_type)
        fty = inferer.infer(functions[gv])
        solved[gv] = fty
        gv._set_checked_type(fty)
        new = inferer.fill_in(functions[gv])
        if new is not functions[gv]:
            out.update_func(gv, new)
    return out


def _local_global_type(gv: GlobalVar) -> Type:
    if gv._checked_type is not None:
        return gv._checked_type
    raise TypeInferenceError(f"InferTypeLocal: the type of @{gv.name_hint} is unknown: run "
                             "InferType on its module first")


def infer_type_local(expr: RelayExpr, mod: IRModule | None = None) -> RelayExpr:
    """Type one expression; returns it with inferred annotations filled in (same node if none)."""
    if mod is not None:
        infer_module(mod)  # types the global vars
    inferer = _Inferer(_local_global_type)
    inferer.infer(expr)
    return inferer.fill_in(expr)


def InferTypeLocal(expr: RelayExpr) -> Type:
    """Infer expr in place (sets checked_type on its nodes) and return its type, as TVM's."""
    inferer = _Inferer(_local_global_type)
    return inferer.infer(expr)

