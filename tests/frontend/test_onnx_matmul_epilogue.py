"""ONNX MatMul with a 2-D right operand lowers to one nn.dense on the left operand as it is (no
reshape around it), so a following bias Add and GELU (the Erf chain BERT exports, or Gelu)
fuse into the dense's epilogue: one kernel, checked against onnxruntime over ranks 1-4, odd
sizes, batch > 1, at opt_level 3 (packed weights) and the default opt_level."""
from __future__ import annotations

import json
import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import relay
from compiler.transform import PassContext
from runtime import cpu, graph_executor

RNG = np.random.default_rng(11)


def matmul_bias_gelu(a_shape, n, gelu):
    """MatMul(a, W[K, N]) + b, then GELU as BERT's exporter writes it (or none)."""
    k = a_shape[-1]
    w = (RNG.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    b = RNG.uniform(-0.5, 0.5, n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["y" if gelu == "none" else "h"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    if gelu == "erf":
        inits += [numpy_helper.from_array(np.array(v, np.float32), name) for name, v in
                  (("sqrt2", math.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
        nodes += [helper.make_node("Div", ["h", "sqrt2"], ["d"]),
                  helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["e1"]),
                  helper.make_node("Mul", ["h", "e1"], ["he"]),
                  helper.make_node("Mul", ["he", "half"], ["y"])]
    elif gelu == "tanh":
        nodes.append(helper.make_node("Tanh", ["h"], ["y"]))
    out_shape = [*a_shape[:-1], n]
    graph = helper.make_graph(
        nodes, "mm", [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_both(model, a, opt_level):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"a": a})[0]
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=opt_level):
        lib = relay.build(mod, params=params)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(a=a)
    kernels = [node["attrs"]["func_name"] for node in json.loads(lib.get_graph_json())["nodes"]
               if node["op"] == "tvm_op"]
    return gm.get_output(0).numpy(), want, kernels


@pytest.mark.parametrize("a_shape,n", [
    ((1, 128, 96), 200), ((2, 7, 33), 50), ((3, 2, 5, 17), 9), ((1, 5, 64), 48), ((37,), 19),
    ((13, 40), 31)], ids=str)
@pytest.mark.parametrize("gelu", ["erf", "tanh", "none"])
@pytest.mark.parametrize("opt_level", [2, 3])
def test_matmul_bias_activation_is_one_kernel(a_shape, n, gelu, opt_level):
    model = matmul_bias_gelu(a_shape, n, gelu)
    a = RNG.standard_normal(a_shape).astype(np.float32)
    got, want, kernels = run_both(model, a, opt_level)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if len(a_shape) == 1:  # [K] @ [K, N] -> [N]: the one reshape left is the output's
        return
    assert len(kernels) == 1, kernels
    assert "dense" in kernels[0] and "add" in kernels[0], kernels
    if gelu == "erf":
        assert "erf" in kernels[0], kernels


def test_matmul_batched_right_operand_still_reshapes():
    """A 3-D right operand takes the batch_matmul path with its reshapes, as before."""
    a_v = RNG.standard_normal((2, 4, 6)).astype(np.float32)
    w = RNG.standard_normal((2, 6, 5)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])], "bmm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 5])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    got, want, kernels = run_both(model, a_v, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert any("batch_matmul" in name for name in kernels), kernels
