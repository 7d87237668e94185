"""ONNX GlobalAveragePool / GlobalMaxPool (onnx_ops/nn.py _global_pool): 4-D inputs import as
nn.global_avg_pool2d / nn.global_max_pool2d (as TVM's frontend), other ranks as mean / max
over the spatial axes; float16/32/64 against numpy through relay.build."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler import relay
from compiler.frontend import from_onnx
from compiler.ir.expr import Call
from compiler.ir.traversal import post_order
from runtime import cpu, graph_executor

RNG = np.random.default_rng(43)
ONNX_TYPES = {"float16": TensorProto.FLOAT16, "float32": TensorProto.FLOAT,
              "float64": TensorProto.DOUBLE}


def _model(op_type: str, shape: tuple, dtype: str):
    node = helper.make_node(op_type, ["x"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", ONNX_TYPES[dtype], list(shape))],
        [helper.make_tensor_value_info("y", ONNX_TYPES[dtype], None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("dtype", sorted(ONNX_TYPES))
@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7, 5), (1, 4, 13, 13), (2, 3, 9), (1, 2, 3, 4, 5)])
def test_global_pool_imports_and_matches_numpy(shape, op_type, dtype):
    mod, params = from_onnx(_model(op_type, shape, dtype))
    ops = {n.op.name for n in post_order(mod["main"].body) if isinstance(n, Call)}
    kind = "avg" if op_type == "GlobalAveragePool" else "max"
    if len(shape) == 4:
        assert ops == {f"nn.global_{kind}_pool2d"}
    else:
        assert ops == {"mean" if kind == "avg" else "max"}
    x = RNG.standard_normal(shape).astype(dtype)
    module = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](cpu()))
    module.run(x=x)
    got = module.get_output(0).numpy()
    axes = tuple(range(2, len(shape)))
    assert got.dtype == x.dtype
    if kind == "max":
        np.testing.assert_array_equal(got, x.max(axis=axes, keepdims=True))
    else:
        want = x.astype(np.float64).mean(axis=axes, keepdims=True)
        tol = 1e-3 if dtype == "float16" else 1e-6
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
