"""The real model graphs shipped inside the onnx package: import, build, run, match the reference.

The default run takes the cheap ones; `pytest -m slow tests/models` (or
`python tests/models/run_all.py`) runs all nine.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import runtime
from compiler import relay, transform
from compiler.tools.model_zoo import LIGHT_MODELS, dummy_inputs, light_model_path, reference_outputs
from runtime import graph_executor

CHEAP = ("squeezenet", "shufflenet", "bvlc_alexnet")


def _params(models):
    return [pytest.param(m, marks=() if m in CHEAP else pytest.mark.slow) for m in models]


def build_and_run(name: str):
    path = light_model_path(name)
    model = onnx.load(path)
    mod, params = relay.frontend.from_onnx(model)
    factory = relay.build(mod, target="llvm", params=params)
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.run(**dummy_inputs(model))
    return factory, gmod.get_output(0).numpy(), reference_outputs(path)[0]


@pytest.mark.parametrize("name", _params(LIGHT_MODELS))
def test_light_model_matches_reference(name):
    factory, out, expected = build_and_run(name)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    # ONNX's own model runner compares with rtol 1e-3, atol 1e-7
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-7)
    # ConstantOfShape weights are folded at compile time: no fill kernel runs, weights are params
    graph = json.loads(factory.get_graph_json())
    kernels = {n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"}
    assert not any("full" in k or "zeros" in k or "ones" in k for k in kernels), kernels
    assert factory.get_params(), "weights should be lifted into the params blob"


@pytest.mark.parametrize("name", _params(LIGHT_MODELS))
def test_light_model_with_random_weights_matches_onnxruntime(name):
    """The shipped weights are constant fills; random ones check the network really computes."""
    import onnxruntime as ort

    from compiler.tools.model_zoo import with_random_weights
    model = with_random_weights(onnx.load(light_model_path(name)), seed=1)
    feeds = dummy_inputs(model)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    mod, params = relay.frontend.from_onnx(model)
    # opt_level 3, as the CLI and benchmarks build: FoldScaleAxis and AlterOpLayout take part
    with transform.PassContext(opt_level=3):
        factory = relay.build(mod, target="llvm", params=params)
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.run(**feeds)
    out = gmod.get_output(0).numpy()
    assert np.argmax(out) == np.argmax(expected)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6 * np.abs(expected).max())
