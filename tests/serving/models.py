"""The small CNN the serving tests deploy, exported, and its reference outputs."""
from __future__ import annotations

import functools

import numpy as np

import runtime
from compiler import relay
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime import graph_executor

INPUT = "data"
SHAPE = (3, 16, 16)  # one sample


def export_cnn(path: str, batch: int = 1, target: str = "llvm") -> str:
    """conv -> relu -> max_pool -> dense for `batch` samples, exported to `path`."""
    rng = np.random.default_rng(7)
    x = relay.var(INPUT, shape=(batch, *SHAPE))
    w = relay.const(rng.standard_normal((8, 3, 3, 3)).astype("f4"))
    d = relay.const(rng.standard_normal((10, 8 * 8 * 8)).astype("f4"))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    out = relay.nn.dense(relay.reshape(y, (batch, -1)), d)
    with PassContext(opt_level=3):
        relay.build(IRModule.from_expr(relay.Function([x], out)), target=target) \
            .export_library(path)
    return path


@functools.lru_cache(maxsize=None)
def _loaded(path: str) -> graph_executor.GraphModule:
    return graph_executor.GraphModule(runtime.load_module(path)["default"](runtime.cpu()))


def reference(path: str, batch: np.ndarray) -> np.ndarray:
    """The module's outputs for a full batch, run in this process."""
    m = _loaded(path)
    m.run(**{INPUT: batch})
    return m.get_output(0).numpy()
