"""A chain of diamonds (each step's value read by several ops of the next step, as in a tree
descent) must lower to a kernel of linear size, not one that doubles per step."""
from __future__ import annotations

import numpy as np

from compiler import relay
from compiler.op.interpreter import evaluate
from tests.codegen_ops.lowering_harness import compile_function


def test_chain_of_shared_values_stays_linear():
    steps = 16
    x = relay.var("x", shape=(8,), dtype="float32")
    table = relay.var("table", shape=(8,), dtype="int32")
    idx = relay.var("idx", shape=(8,), dtype="int32")
    value = idx
    for _ in range(steps):  # each step reads `value` three times
        picked = relay.take(x, value, axis=0, mode="clip")
        value = relay.where(relay.less(picked, relay.const(0.0)),
                            relay.take(table, value, axis=0, mode="clip"),
                            relay.take(idx, value, axis=0, mode="clip"))
    params = [x, table, idx]
    run = compile_function(params, value)
    assert len(str(run.primfunc)) < 100_000  # exponential growth would be ~3**16 nodes
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, 8).astype("float32"), rng.integers(0, 8, 8).astype("int32"),
              rng.integers(0, 8, 8).astype("int32")]
    want = evaluate(relay.Function(params, value), inputs)
    np.testing.assert_array_equal(run(*inputs)[0], want)
