"""ONNX control flow: If and Scan, whose bodies are subgraph attributes.

A body is converted by GraphConverter.subgraph: its declared inputs take the given
expressions, and it may read any value of an enclosing graph (outer-scope references).

If: a condition known at import picks its branch there; otherwise a relay.If over the two
branches (a tuple of their outputs when there are several). Scan: its length is a static
dimension of the scan inputs, so it is unrolled, the body converted once per step over
`take` slices of the scan inputs, and each scan output stacked (in reverse for a reverse
direction); a scan longer than MAX_UNROLLED_SCAN steps runs as a Relay loop instead
(loop.recursive_loop, on the VM).
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import If, Tuple, TupleGetItem
from compiler.ir.types import TupleType

from .common import OptionalValue, const, converter, infer_type, norm_axis, op, scalar_bool
from .loop import recursive_loop

MAX_UNROLLED_SCAN = 64  # steps; a longer Scan runs as a Relay loop


def _graph_attr(ctx, name: str):
    attr = ctx.attr(name)
    if attr is None:
        raise ctx.error(f"the {name} attribute is required")
    return attr.g


def _present(ctx, values: list, branch: str) -> list:
    """Branch outputs with optionals unwrapped (both branches must hold their values)."""
    out = []
    for i, value in enumerate(values):
        if isinstance(value, OptionalValue):
            if value.element is None:
                raise ctx.error(f"output {i} of the {branch} branch is an empty optional "
                                "and the condition is known only at run time: an optional "
                                "whose presence depends on data is not supported")
            value = value.element
        out.append(value)
    return out


@converter("If", 1)
def _if(ctx, inputs):
    cond = inputs[0]
    if cond is None:
        raise ctx.error("the cond input is required")
    static = ctx.maybe_value(cond)
    if static is not None:
        flat = np.asarray(static).reshape(-1)
        if flat.size != 1:
            raise ctx.error(f"the condition must have one element, got {flat.size}")
        branch = "then_branch" if bool(flat[0]) else "else_branch"
        return ctx.graph.subgraph(_graph_attr(ctx, branch), [], f"{ctx.where} {branch}")
    then = _present(ctx, ctx.graph.subgraph(_graph_attr(ctx, "then_branch"), [],
                                            f"{ctx.where} then_branch"), "then")
    other = _present(ctx, ctx.graph.subgraph(_graph_attr(ctx, "else_branch"), [],
                                             f"{ctx.where} else_branch"), "else")
    if len(then) != len(other) or len(then) != ctx.num_outputs():
        raise ctx.error(f"the branches give {len(then)} and {len(other)} outputs; the node has "
                        f"{ctx.num_outputs()}")
    types = ctx.graph.types
    then_ty = [infer_type(v, types) for v in then]
    other_ty = [infer_type(v, types) for v in other]
    for i, (a, b) in enumerate(zip(then_ty, other_ty)):
        if a != b:
            raise ctx.error(f"output {i}: the then branch gives {a} and the else branch {b}; "
                            "branch outputs of different types are not supported")
    single = len(then) == 1
    expr = If(scalar_bool(ctx, cond, "condition"), then[0] if single else Tuple(then),
              other[0] if single else Tuple(other))
    types[expr] = then_ty[0] if single else TupleType(then_ty)
    return expr if single else [TupleGetItem(expr, i) for i in range(len(then))]


def _take(x, index: int, axis: int):
    return op("take", x, const(index, "int64"), axis=axis, mode="clip")


def _scan_steps(ctx, body, states: list, scans: list, in_axes: list, in_reverse: list,
                out_axes: list, out_reverse: list) -> list:
    """Scan (opset 9 semantics) unrolled: final states then stacked scan outputs."""
    lengths = {int(ctx.shape(x)[a]) for x, a in zip(scans, in_axes)}
    if len(lengths) != 1:
        raise ctx.error(f"the scan inputs have different lengths along their scan axes: "
                        f"{sorted(lengths)}")
    length = lengths.pop()
    if length > MAX_UNROLLED_SCAN:
        return _scan_loop(ctx, body, states, scans, in_axes, in_reverse, out_axes, out_reverse,
                          length)
    if length == 0:
        raise ctx.error("a scan of 0 steps has empty scan outputs of unknown shape")
    num_outputs = len(body.output) - len(states)
    stacked = [[] for _ in range(num_outputs)]
    for t in range(length):
        slices = [_take(x, length - 1 - t if rev else t, a)
                  for x, a, rev in zip(scans, in_axes, in_reverse)]
        outs = ctx.graph.subgraph(body, states + slices, f"{ctx.where} step {t}")
        states = outs[:len(states)]
        for k, value in enumerate(outs[len(states):]):
            stacked[k].append(value)
    results = list(states)
    for k, items in enumerate(stacked):
        if out_reverse[k]:
            items = items[::-1]
        rank = ctx.rank(items[0]) + 1
        results.append(op("stack", Tuple(items), axis=norm_axis(ctx, out_axes[k], rank)))
    return results


def _scan_loop(ctx, body, states: list, scans: list, in_axes: list, in_reverse: list,
               out_axes: list, out_reverse: list, length: int) -> list:
    """A long scan as a Relay loop (loop.recursive_loop) over `take` at the step index."""
    last = const(length - 1, "int64")

    def step(i, cond, carried):
        slices = [op("take", x, op("subtract", last, i) if rev else i, axis=a, mode="clip")
                  for x, a, rev in zip(scans, in_axes, in_reverse)]
        outs = ctx.graph.subgraph(body, [*carried, *slices], f"{ctx.where} step")
        return const(True, "bool"), outs[:len(carried)], outs[len(carried):]
    outs = recursive_loop(ctx, const(length, "int64"), const(True, "bool"), states, step)
    results = outs[:len(states)]
    for k, stacked in enumerate(outs[len(states):]):
        element = infer_type(stacked, ctx.graph.types).shape[1:]
        stacked = op("reshape", stacked, newshape=[length, *element])  # static again
        if out_reverse[k]:
            stacked = op("reverse", stacked, axis=0)
        axis = norm_axis(ctx, out_axes[k], len(element) + 1)
        if axis:
            order = list(range(1, len(element) + 1))
            stacked = op("transpose", stacked, axes=order[:axis] + [0] + order[axis:])
        results.append(stacked)
    return results


def _scan_attrs(ctx, count: int, name: str, default: int) -> list:
    values = ctx.attr(name)
    values = [default] * count if values is None else [int(v) for v in values]
    if len(values) != count:
        raise ctx.error(f"{name} has {len(values)} entries, expected {count}")
    return values


@converter("Scan", 9)
def _scan(ctx, inputs):
    body = _graph_attr(ctx, "body")
    num_scans = int(ctx.attr("num_scan_inputs"))
    num_states = len(inputs) - num_scans
    states, scans = list(inputs[:num_states]), list(inputs[num_states:])
    num_out = len(body.output) - num_states
    in_axes = [norm_axis(ctx, a, ctx.rank(x)) for a, x in
               zip(_scan_attrs(ctx, num_scans, "scan_input_axes", 0), scans)]
    return _scan_steps(ctx, body, states, scans, in_axes,
                       _scan_attrs(ctx, num_scans, "scan_input_directions", 0),
                       _scan_attrs(ctx, num_out, "scan_output_axes", 0),
                       _scan_attrs(ctx, num_out, "scan_output_directions", 0))


@converter("Scan", 8)
def _scan_v8(ctx, inputs):
    """Opset 8: every input has a leading batch axis and scans along axis 1; each batch
    element runs its own scan (sequence_lens, when given, must be the full length)."""
    body = _graph_attr(ctx, "body")
    num_scans = int(ctx.attr("num_scan_inputs"))
    lens, rest = inputs[0], list(inputs[1:])
    num_states = len(rest) - num_scans
    num_out = len(body.output) - num_states
    batch = int(ctx.shape(rest[0])[0])
    if lens is not None:
        full = int(ctx.shape(rest[num_states])[1])
        given = ctx.value(lens, "sequence_lens")
        if np.any(np.asarray(given) != full):
            raise ctx.error(f"sequence_lens {np.asarray(given).tolist()} shorter than the scan "
                            f"length {full} are not supported")
    directions = _scan_attrs(ctx, num_scans, "directions", 0)
    per_batch = []
    for b in range(batch):
        items = [_take(x, b, 0) for x in rest]
        per_batch.append(_scan_steps(ctx, body, items[:num_states], items[num_states:],
                                     [0] * num_scans, directions, [0] * num_out,
                                     [0] * num_out))
    return [op("stack", Tuple([outs[k] for outs in per_batch]), axis=0)
            for k in range(num_states + num_out)]
