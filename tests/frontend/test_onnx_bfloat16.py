"""bfloat16 in ONNX models: casts and data movement convert (checked against onnxruntime);
arithmetic on bfloat16 is refused by name (compiler/frontend/onnx_ops/bfloat16.py says why)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.frontend import from_onnx
from compiler.frontend.onnx_ops.common import FrontendError
from tests.frontend.test_onnx_control_flow import _assert_same, _graph, _model, _ort

ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
BF = TensorProto.BFLOAT16


def test_casts_and_data_movement_match_onnxruntime():
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=BF),
             helper.make_node("Transpose", ["b"], ["t"], perm=[1, 0]),
             helper.make_node("Concat", ["t", "t"], ["c"], axis=0),
             helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT)]
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    x[0, 0], x[0, 1] = 1.01171875, 1.00390625  # bfloat16 ties, both ways
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])]
    model = _model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    _assert_same(_graph(model, {"x": x}), _ort(model, {"x": x}))
    # a bfloat16 graph output (onnxruntime returns none to numpy): ml_dtypes' rounding
    model = _model(nodes[:1], inputs, [helper.make_tensor_value_info("b", BF, None)])
    got = _graph(model, {"x": x})[0]
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), x.astype(got.dtype).view(np.uint16))


def test_arithmetic_on_bfloat16_is_refused_by_name():
    model = _model([helper.make_node("Exp", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", BF, [3])],
                   [helper.make_tensor_value_info("y", BF, None)])
    with pytest.raises(FrontendError, match="Exp on bfloat16 tensors is not supported"):
        from_onnx(model)
