"""Run-time index checks: Gather/GatherElements/GatherND/ScatterElements/ScatterND with indices
fed at run time give onnxruntime's answer for valid (also negative) indices and fail with an
error naming the graph node for an index outside [-n, n), instead of clamping."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import runtime
from compiler import relay
from runtime import KernelError, graph_executor

RNG = np.random.default_rng(9)


def _model(op, data_shape, idx_shape, out_shape, upd_shape=None, **attrs):
    inputs = [helper.make_tensor_value_info("data", TensorProto.FLOAT, data_shape),
              helper.make_tensor_value_info("idx", TensorProto.INT64, idx_shape)]
    names = ["data", "idx"]
    if upd_shape is not None:
        inputs.append(helper.make_tensor_value_info("upd", TensorProto.FLOAT, upd_shape))
        names.append("upd")
    node = helper.make_node(op, names, ["out"], name=f"the_{op.lower()}", **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    return model


def _compile(model):
    mod, params = relay.frontend.from_onnx(model)
    lib = relay.build(mod, target="llvm", params=params)
    return graph_executor.GraphModule(lib["default"](runtime.cpu()))


CASES = [  # op, data shape, indices (valid), indices (one bad), out shape, updates shape, attrs
    ("Gather", [5, 4], np.array([[0, -1], [4, -5]]), np.array([[0, 5], [1, 2]]), [2, 2, 4],
     None, {"axis": 0}),
    ("Gather", [64, 1024], RNG.integers(-64, 64, 4096), np.r_[RNG.integers(0, 64, 4095), -65],
     [4096, 1024], None, {"axis": 0}),  # parallel kernel: the bad index is in the last chunk
    ("GatherElements", [3, 4], np.array([[0, -1, 2, 1], [3, 0, -4, 1]]),
     np.array([[0, 1, 2, 4], [0, 0, 0, 0]]), [2, 4], None, {"axis": 1}),
    ("GatherND", [4, 3], np.array([[0, 2], [-1, -3]]), np.array([[0, 2], [4, 0]]), [2], None,
     {}),
    ("ScatterElements", [4, 3], np.array([[1, -1, 0]]), np.array([[1, 3, 0]]), [4, 3], [1, 3],
     {"axis": 1}),
    ("ScatterND", [5, 2], np.array([[0], [-2]]), np.array([[0], [-6]]), [5, 2], [2, 2], {}),
]


@pytest.mark.parametrize("op,dshape,good,bad,oshape,ushape,attrs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_runtime_indices_are_checked(op, dshape, good, bad, oshape, ushape, attrs):
    model = _model(op, dshape, list(good.shape), oshape, ushape, **attrs)
    m = _compile(model)
    feeds = {"data": RNG.standard_normal(dshape).astype("f4"), "idx": good.astype("int64")}
    if ushape is not None:
        feeds["upd"] = RNG.standard_normal(ushape).astype("f4")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    m.run(**feeds)
    np.testing.assert_array_equal(m.get_output(0).numpy(), sess.run(None, feeds)[0])
    feeds["idx"] = bad.astype("int64")
    with pytest.raises(KernelError, match=r"graph node '.*'.*index is out of range"):
        m.run(**feeds)
    feeds["idx"] = good.astype("int64")  # the module keeps working
    m.run(**feeds)
    np.testing.assert_array_equal(m.get_output(0).numpy(), sess.run(None, feeds)[0])
