"""Softplus and Mish stay finite where exp(x) overflows (the fuzzer's bug17)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler import relay
from compiler.frontend import from_onnx
from runtime import cpu, graph_executor


def _run(op: str, x: np.ndarray) -> np.ndarray:
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem, list(x.shape))],
                              [helper.make_tensor_value_info("y", elem, None)])
    mod, params = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    gm = graph_executor.GraphModule(relay.build(mod, params=params)["default"](cpu()))
    gm.run(x=x)
    return gm.get_output(0).numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softplus_and_mish_of_large_and_small_inputs(dtype):
    x = np.array([-100, -30, -8, -1, 0, 1, 8, 12, 19.5, 30, 100], dtype=dtype)
    wide = x.astype(np.float64)
    softplus = np.logaddexp(0, wide)
    got = _run("Softplus", x)
    assert np.isfinite(got).all(), got
    np.testing.assert_allclose(got.astype(np.float64), softplus, rtol=2e-3 if dtype == np.float16
                               else 1e-6, atol=1e-3 if dtype == np.float16 else 1e-7)
    mish = _run("Mish", x)
    np.testing.assert_allclose(mish.astype(np.float64), wide * np.tanh(softplus),
                               rtol=2e-3 if dtype == np.float16 else 1e-6,
                               atol=1e-3 if dtype == np.float16 else 1e-7)
