"""An unrolled LSTM (tvm.relay.testing.lstm): `iterations` steps of one shared cell.

TVM's builder wraps the cell in a Relay function called through let bindings; relayjit's
graph executor runs first-order programs, so the cell is inlined at each step instead
(the same arithmetic: the graph has one cell's ops per step).
"""
from __future__ import annotations

import numpy as np

from compiler.analysis import free_vars
from compiler.ir.expr import Function, Tuple, const, var
from compiler.op import nn
from compiler.op.tensor import sigmoid, tanh
from compiler.op.transform import split, squeeze

from .init import create_workload

__all__ = ["get_net", "get_workload"]


def _cell_step(inputs, hidden, cell, weights, num_hidden):
    """One step: the four gates from the input and the hidden state; (next_h, next_c)."""
    units = 4 * num_hidden
    gates = (nn.bias_add(nn.dense(inputs, weights["_i2h_weight"], units),
                         weights["_i2h_bias"], axis=-1)
             + nn.bias_add(nn.dense(hidden, weights["_h2h_weight"], units),
                           weights["_h2h_bias"], axis=-1))
    in_gate, forget_gate, in_transform, out_gate = split(gates, indices_or_sections=4, axis=1)
    next_c = sigmoid(forget_gate) * cell + sigmoid(in_gate) * tanh(in_transform)
    return sigmoid(out_gate) * tanh(next_c), next_c


def _shared_weights(num_hidden, dtype, name):
    """One set of cell weights used by every step (the vars layers would make per step)."""
    shapes = {"_i2h_weight": (4 * num_hidden, num_hidden), "_i2h_bias": (4 * num_hidden,),
              "_h2h_weight": (4 * num_hidden, num_hidden), "_h2h_bias": (4 * num_hidden,)}
    return {suffix: var(name + suffix, shape=shape, dtype=dtype)
            for suffix, shape in shapes.items()}


def get_net(iterations, num_hidden, batch_size=1, dtype="float32"):
    """The LSTM over data of shape (iterations, batch_size, num_hidden); returns the last
    hidden and cell states as a tuple."""
    data = var("data", shape=(iterations, batch_size, num_hidden), dtype=dtype)
    weights = _shared_weights(num_hidden, dtype, "lstm")
    zeros = const(np.zeros((batch_size, num_hidden), dtype=dtype))
    hidden, cell = zeros, zeros
    steps = split(data, indices_or_sections=iterations, axis=0) if iterations > 1 else [data]
    for step in range(iterations):
        inputs = squeeze(steps[step], axis=[0])
        hidden, cell = _cell_step(inputs, hidden, cell, weights, num_hidden)
    out = Tuple([hidden, cell])
    return Function(free_vars(out), out)


def get_workload(iterations, num_hidden, batch_size=1, dtype="float32"):
    """(mod, params) of the unrolled LSTM with Xavier-initialised weights."""
    return create_workload(get_net(iterations, num_hidden, batch_size, dtype))
