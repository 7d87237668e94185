"""Tensor-manipulation converters (onnx_ops/tensor.py) end to end against onnxruntime and ONNX's
reference evaluator: cases the ONNX node tests do not cover."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler import relay
from compiler.frontend import from_onnx
from compiler.op.interpreter import evaluate
from runtime import cpu, graph_executor

ort = pytest.importorskip("onnxruntime")

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _slice_model(x_shape, cases, opset=13):
    """One Slice node per (starts, ends, axes, steps) case, all reading input x."""
    nodes, inits, outputs = [], [], []
    for k, (starts, ends, axes, steps) in enumerate(cases):
        names = []
        for what, values in (("s", starts), ("e", ends), ("a", axes), ("t", steps)):
            names.append(f"{what}{k}")
            inits.append(helper.make_tensor(names[-1], TensorProto.INT64, [len(values)], values))
        nodes.append(helper.make_node("Slice", ["x"] + names, [f"y{k}"]))
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def _built(model, x):
    mod, params = from_onnx(model)
    module = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](cpu()))
    module.run(x=x)
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


# starts/ends beyond the bounds in both directions, negative steps, steps > 1, several axes
SLICE_CASES = [
    ([-10], [-20], [0], [-1]),       # start below -dim, negative step: starts from element 0
    ([-10], [INT64_MIN], [0], [-1]),
    ([-100], [0], [0], [-2]),
    ([10], [-10], [0], [-1]),        # start past the end, negative step: from the last element
    ([INT64_MAX], [INT64_MIN], [0], [-3]),
    ([-1], [-7], [0], [-1]),
    ([3], [1], [0], [-1]),
    ([-100], [100], [0], [2]),
    ([100], [-100], [0], [1]),       # empty
    ([-3], [INT64_MAX], [0], [4]),
    ([-9, 7], [-20, -9], [0, 1], [-1, -2]),
    ([1, -1, -100], [3, 0, 100], [0, 1, 2], [1, -1, 3]),
    ([2, -8], [-8, INT64_MIN], [2, 0], [-2, -1]),
]


def test_slice_clamps_as_the_spec_and_onnxruntime():
    """Negative steps clamp start to [0, dim-1] and end to [-1, dim-1] (after adding dim)."""
    x = np.arange(5 * 6 * 4, dtype=np.float32).reshape(5, 6, 4)
    model = _slice_model(x.shape, SLICE_CASES)
    for case, got, want in zip(SLICE_CASES, _built(model, x), _ort(model, x)):
        assert got.shape == want.shape, case
        np.testing.assert_array_equal(got, want, err_msg=str(case))


def test_slice_one_axis_sweep():
    """Every start/end/step combination on one axis against onnxruntime (interpreter path).

    Two known deviations are not compared: ONNX's reference evaluator slices with numpy, so a
    negative-step start below -dim gives an empty result there (the spec and onnxruntime start
    from element 0); onnxruntime reads an end of INT64_MAX with a negative step as "to the
    beginning" (the spec clamps it to dim-1, and the reference evaluator agrees).
    """
    values = [INT64_MIN, -100, -6, -5, -4, -1, 0, 1, 4, 5, 6, INT64_MAX]
    for dim in (1, 5):
        x = np.arange(dim, dtype=np.float32)
        cases = [([s], [e], [0], [t]) for s, e, t in
                 itertools.product(values, values, [-3, -1, 1, 2])]
        model = _slice_model(x.shape, cases)
        mod, _ = from_onnx(model)
        got_all = evaluate(mod, [x])
        want_ort, want_ref = _ort(model, x), ReferenceEvaluator(model).run(None, {"x": x})
        for case, got, ort_out, ref_out in zip(cases, got_all, want_ort, want_ref):
            (start,), (end,), _, (step,) = case
            want = ort_out if not (step < 0 and end == INT64_MAX) else ref_out
            assert got.shape == want.shape, (dim, case)
            np.testing.assert_array_equal(got, want, err_msg=str((dim, case)))
            if not (step < 0 and start < -dim):
                np.testing.assert_array_equal(got, ref_out, err_msg=str((dim, case)))

