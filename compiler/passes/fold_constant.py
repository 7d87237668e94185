"""FoldConstant: evaluate at compile time what only depends on constants (TVM's rules).

Algorithm: one explicit-stack post-order rewrite of each function (Primitive functions are
left untouched, inside and out). At each node, after its children were rewritten:

- Call of an Op whose arguments are all constants (a Tuple of constants counts) is
  evaluated and replaced by a Constant (a Tuple of Constants for a tuple result). Skipped:
  calls with no arguments (folding `zeros(shape)` only bloats the params), calls whose
  callee is not an Op, stateful ops (nn.dropout) and non-computational ops.
- `shape_of` / `ndarray_size` fold from the argument's static type whatever the argument
  is (computed as int32, then cast to the attribute's dtype).
- `If` with a constant condition becomes the taken branch; `TupleGetItem(Tuple(...), i)`
  becomes the field; `let v = <constant>; body` becomes body with v replaced.

Evaluation runs the real compiled path, not a numpy reference, unless the reference gives
the compiled kernel's bits exactly (data movement, and the float operations IEEE 754 rounds
correctly everywhere) and the tensors are small enough for it to be cheaper
(_fold_by_reference); that is most of what a CNN folds (BatchNorm into weights, weight
packing) at a fraction of the cost of compiling a kernel. Otherwise the call is wrapped as
a primitive function over parameters (one per tensor, tuple arguments flattened), type
inferred under a fresh PassContext, lowered through the compute rules
(compiler.op.compute.lower_function, as relay.build lowers), JIT-compiled by codegen.jit and
run on the CPU. Compiled kernels are cached by the structural hash of that function, which does not depend on the constants'
values, so 100 weights going through the same exp compile once per shape signature. Each
kernel runs once, so small ones compile at LLVM O0 (see _opt_level); all share one kernel
name so the persistent compile cache (codegen.cache) finds them again in the next process.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

from codegen import jit
from compiler.errors import CompilerError
from compiler.ir.attrs import DictAttrs
from compiler.ir.expr import (Call, Constant, Function, If, Let, Op, RelayExpr, Tuple,
                              TupleGetItem, Var)
from compiler.ir.module import IRModule
from compiler.ir.structural import structural_equal, structural_hash
from compiler.ir.traversal import children, post_order, with_children
from compiler.ir.type_infer import infer_module
from compiler.ir.dims import Any as AnyDim
from compiler.ir.types import TensorType, TupleType, Type, is_dynamic_type
from compiler.op.compute.lower_function import lower_primitive_function
from compiler.op.interpreter import apply_op
from compiler.target import codegen_options
from compiler.transform import FunctionPass, PassContext, function_pass, register_pass
from runtime.ndarray import NDArray, empty

__all__ = ["FoldConstant", "fold_constant", "evaluate_call", "kernel_cache_info"]

_CACHE_SIZE = 1024
# (structural hash, CodegenOptions) -> [(Function, library, name)]
_cache: OrderedDict = OrderedDict()
_cache_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0}
KERNEL_NAME = "relayjit_fold_constant"
# Folding kernels over at most this many elements (inputs + outputs) compile at LLVM O0.
FAST_COMPILE_MAX_ELEMENTS = 1 << 22


def kernel_cache_info() -> dict:
    """Hits, misses and size of the folding-kernel cache (tests and benchmarks read it)."""
    with _cache_lock:
        return {**_stats, "size": sum(len(v) for v in _cache.values())}


def clear_kernel_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _stats.update(hits=0, misses=0)


def is_constant(expr: RelayExpr) -> bool:
    """A Constant, or a Tuple whose fields are all constants (TVM's IsComplexConstant)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if type(e) is Tuple:
            stack.extend(e.fields)
        elif type(e) is not Constant:
            return False
    return True


def _flatten_constants(expr: RelayExpr) -> list[Constant]:
    out, stack = [], [expr]
    while stack:
        e = stack.pop()
        if type(e) is Tuple:
            stack.extend(reversed(e.fields))
        else:
            out.append(e)
    return out


# ---- evaluation through the JIT ----------------------------------------------------------


def _primitive_for(call: Call) -> tuple[Function, list[Constant]]:
    """fn (p0, p1, ...) { op(args with constants replaced by params) } with Primitive=1."""
    params: list[Var] = []
    consts: list[Constant] = []

    def to_param(arg: RelayExpr) -> RelayExpr:
        if type(arg) is Constant:
            var = Var(f"p{len(params)}", TensorType(arg.data.shape, arg.data.dtype))
            params.append(var)
            consts.append(arg)
            return var
        # a tuple of constants: rebuild it over parameters (fields first, in order)
        built: dict = {}
        for e in post_order(arg):
            built[e] = to_param(e) if type(e) is Constant else Tuple([built[f] for f in e.fields])
        return built[arg]

    body = Call(call.op, [to_param(a) for a in call.args], call.attrs, call.type_args)
    func = Function(params, body, None, None, DictAttrs({"Primitive": 1}))
    return func, consts


def _infer(func: Function) -> Function:
    return infer_module(IRModule.from_expr(func))["main"]


def _compile(func: Function) -> tuple:
    """(library, kernel name) for a type-inferred primitive function, cached structurally per
    CodegenOptions (the current target's: relay.build enters its own)."""
    options = codegen_options()
    key = (structural_hash(func), options)
    with _cache_lock:
        for cached, lib, name in _cache.get(key, ()):
            if structural_equal(cached, func):
                _stats["hits"] += 1
                _cache.move_to_end(key)
                return lib, name
        _stats["misses"] += 1
    # Each kernel has a library of its own, so one fixed name serves: it keeps the compile
    # caches' keys (structure, names) equal across processes and across equal kernels.
    name = KERNEL_NAME
    prim = lower_primitive_function(func, name, options)
    lib = jit.build_library([prim], _opt_level(prim), options=options)
    with _cache_lock:
        _cache.setdefault(key, []).append((func, lib, name))
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return lib, name


def _opt_level(prim) -> int:
    """LLVM opt level for a kernel that runs once: O0 (about 4x cheaper to compile) unless
    it touches so much data that unoptimised code would cost more than compiling it."""
    elements = 0
    for buf in prim.params:
        elements += int(np.prod(buf.shape, dtype=np.int64))
    return 3 if elements > FAST_COMPILE_MAX_ELEMENTS else 0


# The numpy reference folds an op whose OpDef says it gives the compiled kernel's bits
# (exact_reference: data movement, correctly rounded float arithmetic); everything else runs
# the JIT: transcendental functions use our own approximations, integer division and casts
# have C semantics numpy does not share.
EXACT_FLOAT_DTYPES = frozenset({"float32", "float64"})


# Past this many input elements the compiled kernel's single pass beats the reference's
# several (numpy temporaries, then the copy into aligned storage): VGG-19's and ZFNet's
# dense weights (17-100M elements) folded 2-3x slower by reference.
REFERENCE_MAX_ELEMENTS = 1 << 22


def _fold_by_reference(call: Call, consts: list[Constant]) -> bool:
    """Whether the numpy reference folds this call: exact, and small enough to be cheaper."""
    if sum(int(np.prod(c.data.shape, dtype=np.int64)) for c in consts) > REFERENCE_MAX_ELEMENTS:
        return False
    opdef = call.op.op_def
    if opdef.reshape_only or opdef.exact_reference == "values":
        return True
    return opdef.exact_reference == "float" and all(
        str(c.data.dtype) in EXACT_FLOAT_DTYPES for c in consts)


def _numpy_value(arg: RelayExpr):
    """A constant argument as the reference takes it: a read-only view (constants are
    immutable; the view saves copying the weights), or a tuple of them."""
    if type(arg) is Constant:
        view = arg.data._view().view()
        view.flags.writeable = False
        return view
    return tuple(_numpy_value(f) for f in arg.fields)


def _evaluate_by_reference(call: Call, ret: Type) -> RelayExpr | None:
    """The folded value from the op's numpy reference; None when its result does not have
    the call's static type (then the JIT decides)."""
    value = apply_op(call, [_numpy_value(a) for a in call.args])
    values = value if isinstance(value, tuple) else (value,)
    types = _output_types(ret)
    if len(values) != len(types) or any(
            not _fits(v.shape, t.shape) or v.dtype != np.dtype(t.dtype)
            for v, t in zip(values, types)):
        return None
    # NDArray keeps an aligned, writeable, contiguous result as it is and copies the rest
    # (views of the read-only arguments among them)
    consts = [Constant(NDArray(v)) for v in values]
    return consts[0] if isinstance(ret, TensorType) else Tuple(consts)


def _fits(shape: tuple, dims: tuple) -> bool:
    """A concrete shape matches a type's dims (an Any matches any size)."""
    return len(shape) == len(dims) and all(isinstance(d, AnyDim) or d == s
                                           for s, d in zip(shape, dims))


def _output_types(ty: Type) -> list[TensorType]:
    if isinstance(ty, TensorType):
        return [ty]
    if isinstance(ty, TupleType) and all(isinstance(f, TensorType) for f in ty.fields):
        return list(ty.fields)
    raise CompilerError(f"FoldConstant: cannot evaluate a call returning {ty}; expected a "
                        "tensor or a tuple of tensors")


def evaluate_call(call: Call) -> RelayExpr:
    """Run an all-constant op call through the JIT; a Constant (or a Tuple of them)."""
    with PassContext(opt_level=0):  # a fresh context: the user's config must not leak in
        func, consts = _primitive_for(call)
        func = _infer(func)
        ret = func.body.checked_type
        if is_dynamic_type(ret):  # a dyn.* op: no kernel without the output shape
            value = apply_op(call, [_numpy_value(a) for a in call.args])
            consts = [Constant(NDArray(v)) for v in (value if isinstance(value, tuple)
                                                      else (value,))]
            return consts[0] if isinstance(ret, TensorType) else Tuple(consts)
        lib, name = _compile(func)
    out_types = _output_types(ret)
    outputs = [empty(t.shape, t.dtype) for t in out_types]
    inputs = [c.data for c in consts]
    lib[name](*inputs, *outputs)
    if isinstance(ret, TensorType):
        return Constant(outputs[0])
    return Tuple([Constant(o) for o in outputs])


def _shape_const(call: Call) -> RelayExpr | None:
    """shape_of / ndarray_size from the static type of the argument."""
    name = call.op.name
    if name not in ("shape_of", "ndarray_size") or len(call.args) != 1:
        return None
    ty = call.args[0]._checked_type
    if not isinstance(ty, TensorType) or ty.is_dynamic:  # known only at run time
        return None
    dtype = getattr(call.attrs, "dtype", None) if call.attrs is not None else None
    dtype = dtype or "int32"
    if name == "shape_of":
        value = np.array(ty.shape, dtype="int32")
    else:
        value = np.array(int(np.prod(ty.shape, dtype=np.int64)), dtype="int32")
    return Constant(value.astype(str(dtype)))


# ---- the rewrite -------------------------------------------------------------------------


def _fold_call(call: Call, old: Call) -> RelayExpr:
    if not call.args or not isinstance(call.op, Op):
        return call
    opdef = call.op.op_def
    if opdef.stateful:
        return call
    # shape_of/ndarray_size read the original call's argument type, still valid
    shaped = _shape_const(old)
    if shaped is not None:
        return shaped
    if opdef.non_computational:
        return call
    if not all(is_constant(a) for a in call.args):
        return call
    ret = old._checked_type
    if ret is not None and _fold_by_reference(call, _flatten_constants(Tuple(call.args))):
        folded = _evaluate_by_reference(call, ret)
        if folded is not None:
            return folded
    return evaluate_call(call)


def fold_constant(func: Function, keep: Callable[[Call], bool] | None = None) -> Function:
    """Fold the constant parts of `func` (unchanged if it is Primitive); calls for which
    keep(call) is true stay (DynamicToStatic keeps dyn.* calls to make them static)."""
    if func.is_primitive:
        return func
    memo: dict = {}
    let_values: dict = {}  # let var -> constant it was bound to
    # frame: [node, children, next index, new children]
    stack = [[func, children(func), 0, []]]
    while stack:
        frame = stack[-1]
        node, kids, i, new = frame
        if i < len(kids):
            child = kids[i]
            if child not in memo and not (type(child) is Function and child.is_primitive):
                stack.append([child, children(child), 0, []])
                continue
            value = let_values.get(child, memo.get(child, child))
            new.append(value)
            frame[2] = i + 1
            if type(node) is Let and i == 1 and is_constant(value):
                let_values[node.var] = value  # uses in the body (visited next) see the value
            continue
        stack.pop()
        memo[node] = _rebuild(node, new, let_values, keep)
    return memo[func]


def _rebuild(node: RelayExpr, new: list, let_values: dict, keep) -> RelayExpr:
    kind = type(node)
    if kind is Let and node.var in let_values:
        return new[2]
    rebuilt = with_children(node, new) if new else node
    if kind is Call:
        return rebuilt if keep is not None and keep(rebuilt) else _fold_call(rebuilt, node)
    if kind is If and type(rebuilt.cond) is Constant:
        taken = bool(np.asarray(rebuilt.cond.data.numpy()).reshape(-1)[0])
        return rebuilt.true_branch if taken else rebuilt.false_branch
    if kind is TupleGetItem and type(rebuilt.tuple_value) is Tuple:
        return rebuilt.tuple_value.fields[node.index]
    return rebuilt


@register_pass
def FoldConstant(fold_qnn: bool = False) -> FunctionPass:  # noqa: N802  (TVM's pass name)
    """Evaluate constant sub-expressions at compile time (opt_level 2)."""

    def transform(func: Function, mod, ctx) -> Function:
        return fold_constant(func)

    return function_pass(transform, opt_level=2, name="FoldConstant")
