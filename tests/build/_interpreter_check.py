"""Build a Relay function at opt_level 3, run it on a random input and check it against the
interpreter (the shared step of the memory-plan tests)."""
from __future__ import annotations

import numpy as np

from compiler import relay
from compiler.op import interpreter
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime import cpu
from runtime.graph_executor import GraphModule


def build_and_check(func, shape, rng: np.random.Generator, atol: float = 1e-4,
                    config: dict | None = None):
    """(factory, GraphModule after one run, the input, the interpreter's result); config: the
    PassContext's (e.g. the blocked layout on or off)."""
    mod = IRModule.from_expr(func)
    with PassContext(opt_level=3, config=config):
        factory = relay.build(mod, target="llvm")
    x = rng.standard_normal(shape).astype("float32")
    m = GraphModule(factory["default"](cpu()))
    m.set_input("x", x)
    m.run()
    want = interpreter.evaluate(mod, [x])
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=atol)
    return factory, m, x, want
