"""Op templates: control flow, If and Loop, whose bodies read outer-scope values.

If: the condition is computed at run time from an exact graph value (ReduceMax(e) > 0, so
a last-ulp difference upstream cannot flip it); each branch applies a unary op (or a scale by
a constant of its own) to the same float value, so both give its shape and dtype.
Loop: a trip count from an initializer or a graph input (a data-dependent trip count), the
condition carried through unchanged, one carried float tensor updated as
v = tanh(v) * 0.5 + x (x from the outer scope), and for a 1-D v mostly a scan output
stacking every iteration's v (onnx.reference concatenates them with np.vstack, which is
stacking only for 1-D values). relay.build refuses control flow at run time (unsupported for the
graph executor); the VM runs it (oracle.py's "vm" engines).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from .graph import FLOATS, INTS, MAX_INPUTS, GraphBuilder, rounding, spec, tensor_proto_dtype
from .ops_math import fresh

MAX_TRIPS = 4
_BRANCH_OPS = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Identity", "Scale")


def _cond(b: GraphBuilder):
    """A bool scalar computed at run time from an exact, non-empty graph value."""
    e = b.pick(lambda v: v.exact and v.dtype in FLOATS + INTS and v.size > 0 and
               not v.nonfinite and v.size <= 4096, fresh(b, INTS + FLOATS))
    if e is None or not b.room(3):
        return None
    (peak,) = b.node("ReduceMax", [e], [spec((), e.dtype, e.mag)], keepdims=0)
    zero = b.constant(np.array(0, dtype=e.dtype))
    (cond,) = b.node("Greater", [peak, zero], [spec((), "bool")])
    return cond


def _branch(b: GraphBuilder, x, name: str):
    """(graph, its output's magnitude) of one If branch: op(x) read from the outer scope."""
    op = b.choice(_BRANCH_OPS)
    out = b.name(f"{name}_out")
    nodes = []
    if op == "Scale":
        scale = float(b.choice([0.5, -2.0, 0.25]))
        const = b.name(f"{name}_c")
        nodes.append(helper.make_node("Constant", [], [const], value=numpy_helper.from_array(
            np.array(scale, dtype=x.dtype), const)))
        nodes.append(helper.make_node("Mul", [x.name, const], [out]))
        mag = x.mag * abs(scale)
    else:
        nodes.append(helper.make_node(op, [x.name], [out]))
        mag = 1.0 if op in ("Sigmoid", "Tanh") else x.mag
    graph = helper.make_graph(nodes, b.name(name), [], [
        helper.make_tensor_value_info(out, tensor_proto_dtype(x.dtype), x.shape)])
    return graph, mag


def t_if(b: GraphBuilder) -> bool:
    x = b.pick(lambda v: v.is_float and v.size <= 4096 and not v.nonfinite, fresh(b, FLOATS))
    if x is None or not b.room(4):
        return False
    cond = _cond(b)
    if cond is None:
        return False
    then, mag_then = _branch(b, x, "then")
    other, mag_else = _branch(b, x, "else")
    mag = max(mag_then, mag_else)
    x.uses += 1  # read inside the branches
    b.node("If", [cond], [spec(x.shape, x.dtype, mag, x.err + 2 * rounding(x.dtype, mag))],
           then_branch=then, else_branch=other)
    return True


def t_loop(b: GraphBuilder) -> bool:
    x = b.pick(lambda v: v.is_float and 0 < v.size <= 1024 and not v.nonfinite and
               v.mag <= 4, fresh(b, FLOATS))
    if x is None or not b.room(1):
        return False
    v0 = b.pick(lambda v: v.dtype == x.dtype and v.shape == x.shape and not v.nonfinite and
                v.mag <= 4, lambda: b.operand(x.shape, x.dtype))
    if v0 is None:
        return False
    if b.chance(0.5) and len(b.inputs) < MAX_INPUTS:
        trips = b.fresh_input((), "int64", "positive")  # 1..5, known only at run time
        bound = 5
    else:
        bound = int(b.rng.integers(1, MAX_TRIPS + 1))
        trips = b.constant(np.array(bound, dtype="int64"))
    keep = b.constant(np.array(True))
    scan = len(x.shape) == 1 and b.chance(0.7)  # onnx.reference vstacks other ranks
    names = {k: b.name(f"loop_{k}") for k in ("i", "c_in", "v_in", "c_out", "t", "h",
                                              "half", "v_out", "scan")}
    dt = tensor_proto_dtype(x.dtype)
    body_nodes = [
        helper.make_node("Identity", [names["c_in"]], [names["c_out"]]),
        helper.make_node("Tanh", [names["v_in"]], [names["t"]]),
        helper.make_node("Constant", [], [names["half"]], value=numpy_helper.from_array(
            np.array(0.5, dtype=x.dtype), names["half"])),
        helper.make_node("Mul", [names["t"], names["half"]], [names["h"]]),
        helper.make_node("Add", [names["h"], x.name], [names["v_out"]]),
    ]
    outputs = [helper.make_tensor_value_info(names["c_out"], TensorProto.BOOL, []),
               helper.make_tensor_value_info(names["v_out"], dt, x.shape)]
    if scan:
        body_nodes.append(helper.make_node("Identity", [names["v_out"]], [names["scan"]]))
        outputs.append(helper.make_tensor_value_info(names["scan"], dt, x.shape))
    body = helper.make_graph(body_nodes, b.name("loop_body"), [
        helper.make_tensor_value_info(names["i"], TensorProto.INT64, []),
        helper.make_tensor_value_info(names["c_in"], TensorProto.BOOL, []),
        helper.make_tensor_value_info(names["v_in"], dt, x.shape)], outputs)
    mag = 0.5 + x.mag + v0.mag
    err = bound * (x.err + 4 * rounding(x.dtype, mag)) + v0.err
    x.uses += 1  # read inside the body
    specs = [spec(x.shape, x.dtype, mag, err)]
    if scan:
        length = bound if trips.const else int(b.feeds[trips.name])  # as fed at run time
        specs.append(spec((length, *x.shape), x.dtype, mag, err))
    b.node("Loop", [trips, keep, v0], specs, body=body)
    return True


TEMPLATES = {t_if: 1.0, t_loop: 0.7}
