"""Relay -> codegen bridge: lower one fused Primitive function to a codegen PrimFunc.

It sits with the compute rules it applies, below the passes, because FoldConstant compiles
what it folds through it as relay.build does.

Each parameter becomes a te.placeholder; the body is walked once in post-order (explicit
stack, no recursion over the graph) and every op call is replaced by the implementation the
strategy layer selects for it (compiler.op.strategy: the schedules, for the build's
CodegenOptions) or, where none applies, its registered compute rule, applied to the tensors of
its arguments, so a fused chain of ops becomes one tensor expression that codegen.lower turns
into loop nests (elementwise producers inline).
"""
from __future__ import annotations

import re

from codegen import te, tir
from codegen.errors import CodegenError, LoweringError
from codegen.lower import lower
from codegen.options import CodegenOptions
from codegen.tir.functor import post_order as tir_post_order
from codegen.tir.stmt import PrimFunc
from compiler.errors import CompilerError
from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,
                              TupleGetItem, Var)
from compiler.ir.traversal import post_order
from compiler.ir.type_infer import InferTypeLocal
from compiler.ir.types import TensorType, TupleType, Type
from compiler.op.registry import CANONICALIZE
from compiler.op.strategy import CallInfo, compute_with_strategy

__all__ = ["lower_primitive_function", "lower_to_tensors"]

Value = te.Tensor | tuple
# Inlining substitutes a producer's whole body at each use, so cost grows with chain depth
# (and LLVM slows down on very deep expressions); past this many inlined ops a tensor is
# materialized into a buffer instead. A performance heuristic: codegen is iterative.
MAX_INLINE_DEPTH = 32
# A value read by several ops is inlined into each of them: recomputation is cheap for a short
# chain, but a chain of such diamonds (e.g. a tree descent: each step's index feeds several
# gathers of the next) grows exponentially; from this depth on a shared value gets a buffer,
# unless its expression is at most SHARED_INLINE_NODES nodes: copying that is cheaper than a
# pass through memory, and a doubling chain outgrows it in a few levels. (A dequantised
# accumulator read twice by a GELU, x * erf(x), was a buffer: int8 BERT-style encoder's FFN
# kernel 1.5 -> 1.0 ms.)
SHARED_INLINE_DEPTH = 4
SHARED_INLINE_NODES = 64


def lower_primitive_function(func: Function, name: str, options: CodegenOptions) -> PrimFunc:
    """The PrimFunc computing func (Primitive=1, type-inferred) for `options`: params in,
    body's tensors out."""
    inputs, outputs = lower_to_tensors(func, name, options)
    try:
        return lower(name, inputs, outputs, options.parallel, options.vectorize)
    except CodegenError as err:
        raise LoweringError(f"lowering {name}: {_strip(str(err), name)}") from None


def lower_to_tensors(func: Function, name: str, options: CodegenOptions
                     ) -> tuple[list[te.Tensor], list[te.Tensor]]:
    """The placeholders and output tensors of func (for callers that schedule themselves)."""
    ctx = f"lowering {name}"
    if not isinstance(func, Function):
        raise LoweringError(f"{ctx}: expected a relay Function, got {type(func).__name__}")
    env: dict[RelayExpr, Value] = {}
    depth: dict[int, int] = {}  # id(tensor) -> ops inlined into it
    inputs: list[te.Tensor] = []
    used: set[str] = set()
    for k, p in enumerate(func.params):
        ty = _type_of(p, ctx)
        if not isinstance(ty, TensorType):
            raise LoweringError(f"{ctx} > parameter %{p.name_hint}: has type {ty}; only tensor "
                                f"parameters are supported (a tuple parameter must be split "
                                f"into tensors before lowering)")
        pname = _unique(_ident(p.name_hint) or f"p{k}", used)
        try:
            t = te.placeholder(ty.shape, ty.dtype, pname)
        except CodegenError as err:
            raise LoweringError(f"{ctx} > parameter %{p.name_hint}: {err}") from None
        inputs.append(t)
        env[p] = t
    _lower_body(func.body, env, set(func.params), ctx, options, used, depth)
    outputs = _flatten(env[func.body], ctx)
    return inputs, outputs


def _lower_body(body: RelayExpr, env: dict, bound: set, ctx: str, options: CodegenOptions,
                used: set, depth: dict) -> None:
    """Lower every node of body into env (post-order, explicit stack); the vars in `bound`
    already have their tensors in env."""
    order = post_order(body, visited=bound)
    readers: dict = {}  # node -> how many ops/tuples read it
    for node in order:
        for child in (node.args if type(node) is Call else node.fields if type(node) is Tuple
                      else ()):
            readers[child] = readers.get(child, 0) + 1
    for node in order:
        kind = type(node)
        if kind is Op:
            continue
        if kind is Call:
            value = _lower_call(node, env, ctx, options, used, depth)
            env[node] = _bound_depth(value, node, env, depth, readers.get(node, 0) > 1)
        elif kind is Tuple:
            env[node] = tuple(env[f] for f in node.fields)
        elif kind is TupleGetItem:
            value = env[node.tuple_value]
            if not isinstance(value, tuple) or not 0 <= node.index < len(value):
                raise LoweringError(f"{ctx}: TupleGetItem index {node.index} on a value that "
                                    f"is not a tuple of at least {node.index + 1} fields")
            env[node] = value[node.index]
        elif kind is Constant:
            env[node] = _constant(node, ctx, _unique("const", used))
        elif kind is Var:
            raise LoweringError(f"{ctx}: free variable %{node.name_hint} is not a parameter")
        else:
            what = {Let: "let", If: "if", Function: "a nested function",
                    GlobalVar: "a global function"}.get(kind, kind.__name__)
            raise LoweringError(f"{ctx}: {what} cannot appear inside a primitive function")


def _expand(call: Call, canonical, env: dict, ctx: str, options: CodegenOptions,
            used: set, depth: dict) -> Value:
    """An op without a compute rule, lowered through its canonical form (the op attribute
    CANONICALIZE: its definition in other ops), built over the call's argument values."""
    types = [_type_of(a, ctx) for a in call.args]
    params = [Var(f"arg{i}", ty) for i, ty in enumerate(types)]
    body = canonical(call.attrs, params, types)
    InferTypeLocal(Function(params, body))
    inner = {p: env[a] for p, a in zip(params, call.args)}
    _lower_body(body, inner, set(params), ctx, options, used, depth)
    return inner[body]


def _lower_call(call: Call, env: dict, ctx: str, options: CodegenOptions, used: set,
                depth: dict) -> Value:
    if not isinstance(call.op, Op):
        raise LoweringError(f"{ctx}: calls of {type(call.op).__name__} cannot be lowered; only "
                            f"operator calls can appear inside a primitive function")
    op = call.op.name
    where = f"{ctx} > {op}"
    try:
        opdef = call.op.op_def
    except CompilerError as err:
        raise LoweringError(f"{where}: {err}") from None
    out_type = _type_of(call, where)
    args = [env[a] for a in call.args]
    info = CallInfo(op, call.attrs, tuple(_type_of(a, where) for a in call.args), out_type)
    try:
        result = compute_with_strategy(info, args, options)
    except LoweringError as err:
        raise LoweringError(f"{where}: {_strip(str(err), op)}") from None
    except (CodegenError, CompilerError, ValueError) as err:
        raise LoweringError(f"{where}: {err}") from None
    canonical = opdef.get_attr(CANONICALIZE) if opdef.compute is None else None
    if result is None and opdef.compute is None and canonical is None:
        raise LoweringError(f"{where}: no compute rule is registered for this op, and no "
                            f"implementation of its strategy applies")
    try:
        if result is None and canonical is not None:
            result = _expand(call, canonical, env, where, options, used, depth)
        elif result is None:
            result = opdef.compute(args, call.attrs, out_type)
    except LoweringError as err:
        raise LoweringError(f"{where}: {_strip(str(err), op)}") from None
    except (CodegenError, CompilerError) as err:
        raise LoweringError(f"{where}: {err}") from None
    _check_result(result, out_type, where)
    return result


def _bound_depth(result: Value, call: Call, env: dict, depth: dict, shared: bool) -> Value:
    """Materialize outputs whose inlined chain got too deep (MAX_INLINE_DEPTH), or that are
    read by several ops and already deep (SHARED_INLINE_DEPTH)."""
    below = max((depth.get(id(t), 0) for a in call.args for t in _flatten_any(env[a])),
                default=0)
    cut = below + 1 >= MAX_INLINE_DEPTH or (
        shared and below + 1 >= SHARED_INLINE_DEPTH
        and any(not t.materialized and len(tir_post_order(t.body)) > SHARED_INLINE_NODES
                for t in _flatten_any(result)))
    out = [te.materialize(t) if cut else t for t in _flatten_any(result)]
    for t in out:
        depth[id(t)] = 0 if t.materialized else below + 1
    return tuple(out) if isinstance(result, tuple) else out[0]


def _flatten_any(value: Value) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def _check_result(result: Value, ty: Type, where: str) -> None:
    """A compute rule must produce exactly the checked type: catches rule bugs early."""
    if isinstance(ty, TupleType):
        if not isinstance(result, tuple) or len(result) != len(ty.fields):
            raise LoweringError(f"{where}: compute rule returned {result!r}, expected a tuple of "
                                f"{len(ty.fields)} tensors for type {ty}")
        for r, f in zip(result, ty.fields):
            _check_result(r, f, where)
        return
    if not isinstance(result, te.Tensor):
        raise LoweringError(f"{where}: compute rule returned {type(result).__name__}, "
                            f"expected a te.Tensor of type {ty}")
    if tuple(result.shape) != tuple(ty.shape) or result.dtype != ty.dtype:
        raise LoweringError(f"{where}: compute rule produced {result.shape} {result.dtype}, "
                            f"expected {ty.shape} {ty.dtype}")


def _constant(node: Constant, ctx: str, name: str) -> te.Tensor:
    """Scalar constants inline as tir.const; a tensor constant (left inside the function by
    relay.FuseOps.link_params) is compiled into the kernel as read-only data."""
    array = node.data.numpy() if hasattr(node.data, "numpy") else node.data
    if array.size != 1:
        try:
            return te.constant(array, name)
        except CodegenError as err:
            raise LoweringError(f"{ctx}: constant {array.shape} {array.dtype}: {err}") from None
    try:
        value = tir.const(array.reshape(()).item(), str(array.dtype))
    except CodegenError as err:
        raise LoweringError(f"{ctx}: constant of dtype {array.dtype}: {err}") from None
    return te.compute(array.shape, lambda *i: value, name="const")


def _flatten(value, ctx: str) -> list[te.Tensor]:
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple):
            stack.extend(reversed(v))
        elif isinstance(v, te.Tensor):
            out.append(v)
        else:
            raise LoweringError(f"{ctx}: the function body has no tensor value ({v!r})")
    if not out:
        raise LoweringError(f"{ctx}: the function returns an empty tuple")
    return out


def _type_of(node: RelayExpr, ctx: str) -> Type:
    ty = node._checked_type
    if ty is None and isinstance(node, Var):
        ty = node.type_annotation
    if ty is None:
        raise LoweringError(f"{ctx}: a node has no checked_type; run InferType before lowering")
    return ty


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name or "")


def _unique(name: str, used: set) -> str:
    base, k = name, 1
    while name in used:
        name, k = f"{base}_{k}", k + 1
    used.add(name)
    return name


def _strip(msg: str, prefix: str) -> str:
    """Avoid 'lowering f: lowering f: ...' when an inner error already names the same thing."""
    head = f"lowering {prefix}: "
    return msg[len(head):] if msg.startswith(head) else (
        msg[len(prefix) + 2:] if msg.startswith(prefix + ": ") else msg)
