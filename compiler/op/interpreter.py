"""The "debug" executor: evaluates Relay with the registry's numpy references, no codegen.

It is the living definition of what a program means, so FoldConstant, the frontend's
conversion-time folding and the conformance harness can all compare against it.

Evaluation is iterative within a function body (an explicit stack, so 10,000-node chains
are fine). Only calling a function value (a Primitive function from FuseOps, a global
function, a closure) starts a nested evaluation, so Python's stack grows with the depth of
function calls, never with the number of nodes.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.attrs import Attrs
from compiler.ir.dims import Any as AnyDim
from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr,
                              Tuple, TupleGetItem, Var)
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType

_NO_ATTRS = Attrs({})


class InterpreterError(CompilerError):
    """The debug interpreter could not evaluate an expression."""


class Closure:
    """A function value: the function and the environment it was created in."""

    __slots__ = ("func", "env")

    def __init__(self, func: Function, env: dict):
        self.func = func
        self.env = env

    def __repr__(self) -> str:
        return f"Closure({len(self.func.params)} params)"


def _to_numpy(value: Any, where: str) -> np.ndarray:
    """Accept numpy arrays, NDArrays and Python scalars as argument values."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "numpy") and callable(value.numpy):
        return value.numpy()
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    if isinstance(value, (tuple, list)):
        return tuple(_to_numpy(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise InterpreterError(f"{where}: expected a numpy array, NDArray or scalar, got "
                           f"{type(value).__name__}")


def _check_arg(param: Var, value: Any, where: str) -> Any:
    """Scalars take the parameter's dtype; tensors must match its annotated shape and dtype."""
    ann = param.type_annotation
    if not isinstance(ann, TensorType) or isinstance(value, tuple):
        return value
    if value.ndim == 0 and value.dtype != np.dtype(ann.dtype) and ann.shape == ():
        value = value.astype(ann.dtype)
    fits = len(value.shape) == len(ann.shape) and all(
        isinstance(want, AnyDim) or want == got for want, got in zip(ann.shape, value.shape))
    if not fits or value.dtype != np.dtype(ann.dtype):
        raise InterpreterError(f"{where}: argument {param.name_hint!r} expects "
                               f"{ann.shape} {ann.dtype}, got {tuple(value.shape)} {value.dtype}")
    return value


class Interpreter:
    """Evaluates expressions; global functions come from `mod` when one is given."""

    def __init__(self, mod: IRModule | None = None):
        self.mod = mod

    def call(self, callee: Any, args: Sequence[Any], where: str = "function") -> Any:
        """Apply a function value (Closure) to evaluated arguments."""
        if not isinstance(callee, Closure):
            raise InterpreterError(f"{where}: cannot call a value of type {type(callee).__name__}")
        func = callee.func
        if len(args) != len(func.params):
            raise InterpreterError(f"{where}: function takes {len(func.params)} argument(s), "
                                   f"got {len(args)}")
        env = dict(callee.env)
        for param, value in zip(func.params, args):
            env[param] = _check_arg(param, value, where)
        return self.eval(func.body, env)

    def eval(self, root: RelayExpr, env: dict | None = None) -> Any:
        """Evaluate root with Var values from env; only the taken If branch is evaluated."""
        env = {} if env is None else env
        memo: dict = {}
        stack = [root]
        while stack:
            node = stack[-1]
            if node in memo:
                stack.pop()
                continue
            kind = type(node)
            if kind is If:
                if node.cond not in memo:
                    stack.append(node.cond)
                    continue
                taken = node.true_branch if bool(np.asarray(memo[node.cond])) else \
                    node.false_branch
                if taken not in memo:
                    stack.append(taken)
                    continue
                memo[node] = memo[taken]
            elif kind is Let:
                if node.value not in memo:
                    stack.append(node.value)
                    continue
                env[node.var] = memo[node.value]
                if node.body not in memo:
                    stack.append(node.body)
                    continue
                memo[node] = memo[node.body]
            else:
                pending = [c for c in self._operands(node) if c not in memo]
                if pending:
                    stack.extend(reversed(pending))
                    continue
                memo[node] = self._compute(node, memo, env)
            stack.pop()
        return memo[root]

    @staticmethod
    def _operands(node: RelayExpr) -> tuple:
        kind = type(node)
        if kind is Call:
            return node.args if type(node.op) is Op else (node.op, *node.args)
        if kind is Tuple:
            return node.fields
        if kind is TupleGetItem:
            return (node.tuple_value,)
        return ()

    def _compute(self, node: RelayExpr, memo: dict, env: dict) -> Any:
        kind = type(node)
        if kind is Call:
            args = [memo[a] for a in node.args]
            if type(node.op) is Op:
                return apply_op(node, args)
            return self.call(memo[node.op], args, _describe(node.op))
        if kind is Constant:
            return node.data.numpy()
        if kind is Var:
            if node not in env:
                raise InterpreterError(f"free variable {node.name_hint!r} has no value; pass it "
                                       "as an argument or bind it")
            return env[node]
        if kind is Tuple:
            return tuple(memo[f] for f in node.fields)
        if kind is TupleGetItem:
            value = memo[node.tuple_value]
            if not isinstance(value, tuple) or node.index >= len(value):
                raise InterpreterError(f"TupleGetItem index {node.index} on a value that is not a "
                                       f"tuple of more than {node.index} fields")
            return value[node.index]
        if kind is Function:
            return Closure(node, env)
        if kind is GlobalVar:
            if self.mod is None or node not in self.mod:
                raise InterpreterError(f"global function @{node.name_hint} is not in the module")
            return Closure(self.mod[node], {})
        if kind is Op:
            raise InterpreterError(f"operator {node.name} used as a value (only calls of ops "
                                   "can be evaluated)")
        raise InterpreterError(f"cannot evaluate a {kind.__name__} node")

def apply_op(call: Call, args: list) -> Any:
    """The op's numpy reference applied to evaluated arguments (a tuple for several outputs)."""
    opdef = call.op.op_def
    try:
        out = opdef.reference(args, call.attrs if call.attrs is not None else _NO_ATTRS)
    except CompilerError:
        raise
    except Exception as err:
        shapes = [getattr(a, "shape", "tuple") for a in args]
        raise InterpreterError(f"evaluating {opdef.name} on argument shapes {shapes}: "
                               f"{type(err).__name__}: {err}") from err
    if isinstance(out, (tuple, list)):
        return tuple(np.asarray(o) for o in out)
    return np.asarray(out)


def _describe(callee: RelayExpr) -> str:
    if isinstance(callee, GlobalVar):
        return f"@{callee.name_hint}"
    return type(callee).__name__.lower()


def evaluate(expr_or_mod: RelayExpr | IRModule, args: Sequence[Any] = (),
             mod: IRModule | None = None) -> np.ndarray | tuple:
    """Evaluate a function (or IRModule main, or closed expression) applied to args."""
    if isinstance(expr_or_mod, IRModule):
        mod = expr_or_mod
        expr_or_mod = mod["main"]
    if not isinstance(expr_or_mod, RelayExpr):
        raise TypeError(f"evaluate expects a relay expression or IRModule, got "
                        f"{type(expr_or_mod).__name__}")
    interp = Interpreter(mod)
    values = [_to_numpy(a, f"argument {i}") for i, a in enumerate(args)]
    if isinstance(expr_or_mod, Function):
        return interp.call(Closure(expr_or_mod, {}), values, "main")
    if isinstance(expr_or_mod, GlobalVar):
        return interp.call(interp.eval(expr_or_mod), values, _describe(expr_or_mod))
    if values:
        raise InterpreterError(f"evaluate: {len(values)} argument(s) given for an expression "
                               "that is not a function")
    return interp.eval(expr_or_mod)


def small_constant_value(expr: RelayExpr, limit: int = 16) -> np.ndarray | None:
    """The value of a closed expression of at most `limit` nodes (a quantization parameter: a
    constant, maybe cast or reshaped), else None. Bounded: it looks at no more than `limit`
    nodes of a large expression before giving up."""
    if isinstance(expr, Constant):
        return expr.data.numpy()
    stack, seen = [expr], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit or isinstance(node, (Var, GlobalVar, Function, Let, If)):
            return None
        if isinstance(node, Call):
            stack.extend(node.args)
        elif isinstance(node, Tuple):
            stack.extend(node.fields)
        elif isinstance(node, TupleGetItem):
            stack.append(node.tuple_value)
    value = evaluate(expr)
    return value if isinstance(value, np.ndarray) else None
