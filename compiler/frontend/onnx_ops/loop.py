"""ONNX Loop as a recursive Relay function, as TVM's frontend builds it.

    let %loop_<node>: fn(i, cond, v..., scans...) = fn (...) {
        if (cond && i < M) { %loop_<node>(i + 1, cond', v'..., concat(scans, s'[None])...) }
        else { (i, cond, v..., scans...) }
    };
    %loop_<node>(0, cond0, v0..., empty scans...)

The body subgraph is converted once over the function's parameters (its outer-scope
references become the closure's captured values). A loop-carried value whose shape the body
changes (a sequence of tokens growing by one each step) is typed with Any in the dims that
change: the body is converted again over the widened types until they stop changing. Scan
outputs grow by one row per iteration, so their accumulators are (?, ...) from the start.

A loop whose trip count and condition fold at import (a constant M, a condition the body
keeps constant) and that runs at most MAX_UNROLLED_LOOP times is unrolled instead, the body
converted once per iteration over the previous one's values: the graph stays static (the
graph executor runs it), and loop-carried sequences may change length, as each iteration
sees the lengths the previous one made.

Otherwise how many times the loop runs is known only when it runs (a trip count from the
data, or a condition the body computes), so it needs the Relay VM; each iteration is one call
of the function, and the VM bounds the calls of one run (VirtualMachine(max_calls=...), a
VMError past it), so a runaway loop is an error, never a hang.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import Any
from compiler.ir.expr import Call, Function, If, Let, Tuple, TupleGetItem, Var
from compiler.ir.types import FuncType, TensorType, TupleType

from .common import OptionalValue, const, converter, infer_type, op, scalar_bool

_I64, _BOOL = TensorType((), "int64"), TensorType((), "bool")
MAX_UNROLLED_LOOP = 64  # iterations


def _unrolled(ctx, graph, trip, cond0, initial: list):
    """The loop's outputs, unrolled, when its iterations are known at import; else None."""
    limit = ctx.maybe_value(trip) if trip is not None else None
    going = ctx.maybe_value(cond0)
    if going is None or (trip is not None and limit is None):
        return None
    limit = MAX_UNROLLED_LOOP + 1 if trip is None else int(limit)
    if limit > MAX_UNROLLED_LOOP:
        return None
    values, stacked, step = list(initial), None, 0
    while bool(going) and step < limit:
        outs = ctx.graph.subgraph(graph, [const(step, "int64"), const(True, "bool"), *values],
                                  f"{ctx.where} iteration {step}")
        going = ctx.maybe_value(outs[0])
        if going is None:
            return None
        going = bool(np.asarray(going).reshape(-1)[0])
        values = outs[1:1 + len(initial)]
        items = outs[1 + len(initial):]
        stacked = [[] for _ in items] if stacked is None else stacked
        for k, item in enumerate(items):
            stacked[k].append(op("expand_dims", item, axis=0, num_newaxis=1))
        step += 1
    if stacked is None and len(graph.output) > 1 + len(initial):
        return None  # no iteration: the scan outputs' element shapes are not known
    scans = [op("concatenate", Tuple(items), axis=0) for items in stacked or []]
    return values + scans


def _widen(ctx, index: int, before: TensorType, after) -> TensorType:
    """A loop-carried type that fits both the value entering and the value the body
    returns: their dims, Any where they differ (an Any stays the same Any, so the types
    settle)."""
    if not isinstance(after, TensorType) or after.dtype != before.dtype or \
            len(after.shape) != len(before.shape):
        raise ctx.error(f"loop-carried value {index} enters as {before} but the body returns "
                        f"{after}: its element type and rank must stay the same")
    return TensorType([a if a == b or isinstance(a, Any) else Any()
                       for a, b in zip(before.shape, after.shape)], before.dtype)


def _scalar_of(ctx, value, dtype: str, what: str):
    if value is None:
        return None
    if ctx.dtype(value) != dtype:
        value = op("cast", value, dtype=dtype)
    shape = ctx.shape(value)
    if int(np.prod(shape, dtype=np.int64)) != 1:
        raise ctx.error(f"the {what} must have one element, got shape {shape}")
    return value if shape == () else op("reshape", value, newshape=[])


def loop_name(ctx) -> str:
    """The recursive function's name, after the node (printed IR reads as the model)."""
    return "loop_" + "".join(c if c.isalnum() else "_" for c in ctx.name)


def carried_types(ctx, initial: list) -> list:
    """The tensor types of the loop-carried initial values (sequences cannot be carried)."""
    types = []
    for k, value in enumerate(initial):
        ty = None if isinstance(value, OptionalValue) else infer_type(value, ctx.graph.types)
        if not isinstance(ty, TensorType):
            raise ctx.error(f"loop-carried value {k} is a sequence or an optional, and the "
                            "loop's iterations are known only at run time: only tensors can "
                            "be carried through a loop that is not unrolled")
        types.append(ty)
    return types


def recursive_loop(ctx, trip, cond0, initial: list, step) -> list:
    """A Relay loop (the module docstring's shape); its outputs: the final carried values,
    then each scan output's rows stacked on a new axis 0.

    step(i, cond, carried params) converts one iteration and gives (condition, new carried
    values, scan items); it is called again while the carried types widen."""
    name = loop_name(ctx)
    carried = carried_types(ctx, initial)
    for _ in range(max([len(t.shape) for t in carried] + [0]) + 2):
        params = [Var(f"{name}_i", _I64), Var(f"{name}_cond", _BOOL)] + \
            [Var(f"{name}_v{k}", t) for k, t in enumerate(carried)]
        cond_out, values, items = step(params[0], params[1], params[2:])
        widened = [_widen(ctx, k, t, infer_type(v, ctx.graph.types))
                   for k, (t, v) in enumerate(zip(carried, values))]
        if widened == carried:
            break
        carried = widened
    else:
        raise ctx.error("the loop-carried types do not settle")
    item_types = [infer_type(v, ctx.graph.types) for v in items]
    accumulators = []
    for k, ty in enumerate(item_types):
        if not isinstance(ty, TensorType) or ty.is_dynamic:
            raise ctx.error(f"scan output {k} has type {ty}; scan outputs of a dynamic shape "
                            "are not supported")
        accumulators.append(TensorType((Any(), *ty.shape), ty.dtype))
    scans = [Var(f"{name}_scan{k}", t) for k, t in enumerate(accumulators)]
    state_types = [_I64, _BOOL, *carried, *accumulators]
    result_type = TupleType(state_types)
    loop = Var(name, FuncType(state_types, result_type))
    i, cond = params[0], params[1]
    go_on = cond if trip is None else op("logical_and", cond, op("less", i, trip))
    grown = [op("concatenate", Tuple([acc, op("expand_dims", item, axis=0, num_newaxis=1)]),
                axis=0) for acc, item in zip(scans, items)]
    recur = Call(loop, [op("add", i, const(1, "int64")), cond_out, *values, *grown])
    fn = Function([*params, *scans], If(go_on, recur, Tuple([*params, *scans])), result_type)
    empties = [const(np.zeros((0, *t.shape), t.dtype), t.dtype) for t in item_types]
    run = Let(loop, fn, Call(loop, [const(0, "int64"), cond0, *initial, *empties]))
    ctx.graph.types[run] = result_type
    return [TupleGetItem(run, 2 + k) for k in range(len(carried) + len(scans))]


@converter("Loop", 1)
def _loop(ctx, inputs):
    graph = ctx.attr("body")
    if graph is None:
        raise ctx.error("the body attribute is required")
    graph = graph.g
    trip, cond0 = (inputs + [None, None])[:2]
    initial = list(inputs[2:])
    if any(v is None for v in initial):
        raise ctx.error("every loop-carried initial value is required")
    trip = _scalar_of(ctx, trip, "int64", "trip count M")
    cond0 = _scalar_of(ctx, cond0, "bool", "condition") if cond0 is not None else \
        const(True, "bool")
    unrolled = _unrolled(ctx, graph, trip, cond0, initial)
    if unrolled is not None:
        return unrolled

    def step(i, cond, carried):
        outs = ctx.graph.subgraph(graph, [i, cond, *carried], f"{ctx.where} body")
        if len(outs) < 1 + len(carried):
            raise ctx.error(f"the body gives {len(outs)} outputs; it must give the condition "
                            f"and the {len(carried)} loop-carried values")
        n = len(carried)
        items = [_as_declared(ctx, item, graph.output[1 + n + k])
                 for k, item in enumerate(outs[1 + n:])]
        return scalar_bool(ctx, outs[0], "condition the body returns"), outs[1:1 + n], items
    return recursive_loop(ctx, trip, cond0, initial, step)


def _as_declared(ctx, item, value_info):
    """A scan item whose computed type has Any dims (a slice at the loop index) reshaped to
    the static shape the body declares for it, checked when it runs; else as it is."""
    ty = infer_type(item, ctx.graph.types)
    declared = value_info.type.tensor_type.shape.dim \
        if value_info.type.HasField("tensor_type") and \
        value_info.type.tensor_type.HasField("shape") else None
    if not isinstance(ty, TensorType) or not ty.is_dynamic or declared is None or \
            len(declared) != len(ty.shape) or \
            not all(d.HasField("dim_value") for d in declared):
        return item
    return op("reshape", item, newshape=[int(d.dim_value) for d in declared])
