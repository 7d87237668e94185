"""ONNX LRN: odd sizes become nn.lrn (same window as ONNX), even sizes keep the composed form
(nn.lrn's window is [c - size//2, c - size//2 + size), ONNX's [c - (size-1)//2, ...]);
both built and run against a numpy transcription of the ONNX definition."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import runtime
from compiler import relay
from compiler.frontend import from_onnx
from compiler.ir.expr import Call
from compiler.ir.traversal import post_order
from runtime import graph_executor


def _onnx_lrn(x, size, alpha, beta, bias):
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = x.astype(np.float64) ** 2
    total = np.zeros_like(sq)
    for ch in range(c):
        total[:, ch] = sq[:, max(0, ch - lo):min(c - 1, ch + hi) + 1].sum(axis=1)
    return (x / (bias + alpha / size * total) ** beta).astype(x.dtype)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("shape", [(1, 6, 5, 7), (2, 3, 4)])
def test_lrn_matches_onnx(size, shape):
    alpha, beta, bias = 0.3, 0.75, 1.5
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    mod, params = from_onnx(model)
    ops = [n.op.name for n in post_order(mod["main"].body) if isinstance(n, Call)]
    assert ("nn.lrn" in ops) == bool(size % 2)
    x = np.random.default_rng(size).standard_normal(shape).astype(np.float32) * 2
    factory = relay.build(mod, target="llvm", params=params)
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.set_input(x=x)
    gmod.run()
    np.testing.assert_allclose(gmod.get_output(0).numpy(), _onnx_lrn(x, size, alpha, beta, bias),
                               rtol=1e-5, atol=1e-6)
