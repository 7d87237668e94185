"""ONNX sequences: SequenceEmpty/Construct/At/Insert/Erase/Length, SplitToSequence,
ConcatFromSequence, SequenceMap.

Representation: a sequence is a Relay tuple (an expression of TupleType), one field per
element. Relay has no list type without ADTs, and in the graphs these ops appear in a
sequence's length is known at import: its construction, inserts and erases are all static,
and a graph input's element shapes come from shape= (GraphConverter._sequence_input_type).
So positions must be static too (a constant or a value folded at import), and SequenceMap
is unrolled, its body converted once per element (each element may have its own shape). A
sequence whose length changes at run time (one carried through a Loop) is not supported.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Tuple, TupleGetItem
from compiler.ir.types import TupleType

from . import dynamic_shapes
from .common import NodeContext, as_ints, const, converter, infer_type, norm_axis, op


def elements(ctx: NodeContext, seq) -> list:
    """The element expressions of a sequence (a tuple-typed expression)."""
    if seq is None:
        raise ctx.error("the sequence input is required")
    if isinstance(seq, Tuple):
        return list(seq.fields)
    ty = infer_type(seq, ctx.graph.types)
    if not isinstance(ty, TupleType):
        raise ctx.error(f"expected a sequence input, got a value of type {ty}")
    return [TupleGetItem(seq, i) for i in range(len(ty.fields))]


def _position(ctx: NodeContext, position, length: int, inserting: bool) -> int:
    """A static position in [-length, length) (or up to length when inserting)."""
    index = int(np.asarray(ctx.value(position, "position")).reshape(-1)[0])
    top = length + 1 if inserting else length
    if not -length <= index < top:
        raise ctx.error(f"position {index} is out of range for a sequence of {length} "
                        "element(s)")
    return index + length if index < 0 else index


@converter("SequenceEmpty", 11)
def _sequence_empty(ctx, inputs):
    return Tuple([])


@converter("SequenceConstruct", 11)
def _sequence_construct(ctx, inputs):
    if any(i is None for i in inputs):
        raise ctx.error("every input of SequenceConstruct is required")
    dtypes = {ctx.dtype(i) for i in inputs}
    if len(dtypes) > 1:
        raise ctx.error(f"the elements of a sequence must share one element type, got "
                        f"{sorted(dtypes)}")
    return Tuple(list(inputs))


@converter("SequenceAt", 11)
def _sequence_at(ctx, inputs):
    items = elements(ctx, inputs[0])
    return items[_position(ctx, inputs[1], len(items), inserting=False)]


@converter("SequenceInsert", 11)
def _sequence_insert(ctx, inputs):
    items = elements(ctx, inputs[0])
    tensor = inputs[1]
    if items and ctx.dtype(tensor) != ctx.dtype(items[0]):
        raise ctx.error(f"inserting a {ctx.dtype(tensor)} tensor into a sequence of "
                        f"{ctx.dtype(items[0])}")
    at = len(items) if len(inputs) < 3 or inputs[2] is None else \
        _position(ctx, inputs[2], len(items), inserting=True)
    return Tuple(items[:at] + [tensor] + items[at:])


@converter("SequenceErase", 11)
def _sequence_erase(ctx, inputs):
    items = elements(ctx, inputs[0])
    if not items:
        raise ctx.error("cannot erase from an empty sequence")
    at = len(items) - 1 if len(inputs) < 2 or inputs[1] is None else \
        _position(ctx, inputs[1], len(items), inserting=False)
    return Tuple(items[:at] + items[at + 1:])


@converter("SequenceLength", 11)
def _sequence_length(ctx, inputs):
    return const(len(elements(ctx, inputs[0])), "int64")


@converter("ConcatFromSequence", 11)
def _concat_from_sequence(ctx, inputs):
    items = elements(ctx, inputs[0])
    if not items:
        raise ctx.error("cannot concatenate an empty sequence")
    new_axis = int(ctx.attr("new_axis", 0))
    rank = ctx.rank(items[0]) + (1 if new_axis else 0)
    axis = norm_axis(ctx, int(ctx.attr("axis")), rank)
    if new_axis:
        return op("stack", Tuple(items), axis=axis)
    return op("concatenate", Tuple(items), axis=axis)


@converter("SplitToSequence", 11)
def _split_to_sequence(ctx, inputs):
    x = inputs[0]
    shape = ctx.shape(x)
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), len(shape))
    length = int(shape[axis])
    given = inputs[1] if len(inputs) > 1 else None
    if given is not None and ctx.maybe_value(given) is None and ctx.rank(given) == 1:
        # sizes at run time: their count, the sequence's length, is static
        count = dynamic_shapes.static_length(ctx, given, "split")
        return Tuple(dynamic_shapes.split(ctx, x, given, axis, count))
    split = None if given is None else ctx.value(given, "split")
    if split is None:
        sizes = [1] * length
    elif np.ndim(split) == 0:
        chunk = int(split)
        if chunk <= 0:
            raise ctx.error(f"split {chunk} must be positive")
        sizes = [chunk] * (length // chunk) + ([length % chunk] if length % chunk else [])
    else:
        sizes = as_ints(split)
        if sum(sizes) != length or any(s < 0 for s in sizes):
            raise ctx.error(f"split sizes {sizes} do not add up to the axis length {length}")
    bounds = np.cumsum(sizes).tolist()[:-1]
    parts = op("split", x, indices_or_sections=bounds, axis=axis)
    items = [TupleGetItem(parts, i) for i in range(len(sizes))]
    if split is None and not int(ctx.attr("keepdims", 1)):
        items = [op("squeeze", item, axis=[axis]) for item in items]
    return Tuple(items)


@converter("SequenceMap", 17)
def _sequence_map(ctx, inputs):
    body = ctx.attr("body")
    if body is None:
        raise ctx.error("the body attribute is required")
    first = elements(ctx, inputs[0])
    extra = []  # per additional input: its elements (a sequence) or the tensor itself
    for value in inputs[1:]:
        is_sequence = isinstance(infer_type(value, ctx.graph.types), TupleType)
        extra.append(elements(ctx, value) if is_sequence else value)
    for items in extra:
        if isinstance(items, list) and len(items) != len(first):
            raise ctx.error(f"the input sequences have different lengths ({len(first)} and "
                            f"{len(items)})")
    results = [[] for _ in body.g.output]
    for i, item in enumerate(first):
        args = [item] + [e[i] if isinstance(e, list) else e for e in extra]
        outs = ctx.graph.subgraph(body.g, args, f"{ctx.where} element {i}")
        for k, out in enumerate(outs):
            results[k].append(out)
    return [Tuple(r) for r in results]
