"""RNN/GRU/LSTM converters against onnxruntime: attributes the ONNX node tests do not cover."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import from_onnx
from compiler.frontend.onnx_ops.common import FrontendError

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(3)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(kind, attrs, seq=4, batch=3, width=5, hidden=4, num_dirs=1, layout=0,
           lens=None, with_init=False, peepholes=False):
    g = GATES[kind]
    inits = [numpy_helper.from_array(RNG.standard_normal((num_dirs, g * hidden, width))
                                     .astype(np.float32) * 0.5, "W"),
             numpy_helper.from_array(RNG.standard_normal((num_dirs, g * hidden, hidden))
                                     .astype(np.float32) * 0.5, "R"),
             numpy_helper.from_array(RNG.standard_normal((num_dirs, 2 * g * hidden))
                                     .astype(np.float32) * 0.5, "B")]
    names = ["X", "W", "R", "B", "", ""]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.asarray(lens, np.int32), "L"))
        names[4] = "L"
    state = (batch, num_dirs, hidden) if layout else (num_dirs, batch, hidden)
    if with_init:
        inits.append(numpy_helper.from_array(RNG.standard_normal(state).astype(np.float32),
                                             "H0"))
        names[5] = "H0"
        if kind == "LSTM":
            inits.append(numpy_helper.from_array(RNG.standard_normal(state)
                                                 .astype(np.float32), "C0"))
            names.append("C0")
    if peepholes:
        names += [""] * (7 - len(names)) + ["P"]
        inits.append(numpy_helper.from_array(RNG.standard_normal((num_dirs, 3 * hidden))
                                             .astype(np.float32), "P"))
    outs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, names, outs, hidden_size=hidden, layout=layout, **attrs)
    xshape = (batch, seq, width) if layout else (seq, batch, width)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, xshape)], [helper.make_tensor_value_info(o, TensorProto.FLOAT,
                                                                         None) for o in outs],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, RNG.standard_normal(xshape).astype(np.float32)


def _expected(model, x) -> list:
    """onnxruntime's outputs; ONNX's reference evaluator where ORT lacks layout=1."""
    if any(a.name == "layout" and a.i == 1 for a in model.graph.node[0].attribute):
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(model).run(None, {"X": x})
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})


def _compare(model, x):
    from compiler import relay
    from runtime import cpu, graph_executor
    want = _expected(model, x)
    mod, params = from_onnx(model)
    module = graph_executor.GraphModule(relay.build(mod, target="llvm", params=params)
                                        ["default"](cpu(0)))
    module.run(X=x)
    assert module.get_num_outputs() == len(want)
    for i, w in enumerate(want):
        got = module.get_output(i).numpy()
        assert got.shape == w.shape, (i, got.shape, w.shape)
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5, err_msg=f"output {i}")


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_initial_state_and_layout(kind, direction):
    dirs = 2 if direction == "bidirectional" else 1
    for layout in (0, 1):
        _compare(*_model(kind, {"direction": direction}, num_dirs=dirs, layout=layout,
                         with_init=True))


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_partial_sequence_lens_mask_steps(kind):
    _compare(*_model(kind, {"direction": "bidirectional"}, num_dirs=2, lens=[4, 2, 1],
                     with_init=True))


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_clip(kind):
    _compare(*_model(kind, {"clip": 0.3}))


def test_gru_linear_before_reset():
    _compare(*_model("GRU", {"linear_before_reset": 1, "direction": "bidirectional"},
                     num_dirs=2, with_init=True))


def test_lstm_peepholes_bidirectional():
    _compare(*_model("LSTM", {"direction": "bidirectional"}, num_dirs=2, peepholes=True,
                     with_init=True))


def test_lstm_input_forget():
    _compare(*_model("LSTM", {"input_forget": 1}, with_init=True))


@pytest.mark.parametrize("kind,acts,alpha,beta", [
    ("RNN", ["LeakyRelu"], [0.2], []),
    ("RNN", ["Relu"], [], []),
    ("GRU", ["HardSigmoid", "Softsign"], [0.3], [0.4]),
    ("LSTM", ["Sigmoid", "ScaledTanh", "Affine"], [0.7, 0.9], [1.1, 0.2]),
    ("LSTM", ["HardSigmoid", "Elu", "Softplus"], [0.25, 0.8], [0.45]),
])
def test_activations_consume_alpha_beta_in_order(kind, acts, alpha, beta):
    attrs = {"activations": acts}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    _compare(*_model(kind, attrs))


def test_bad_activation_and_direction_are_clear_errors():
    model, _ = _model("RNN", {"activations": ["Gelu"]})
    with pytest.raises(FrontendError, match="activation 'Gelu' is not supported"):
        from_onnx(model)
    model, _ = _model("GRU", {"direction": "sideways"})
    with pytest.raises(FrontendError, match="direction must be"):
        from_onnx(model)


def _build(model, opt_level):
    from compiler import relay
    from compiler.transform import PassContext
    mod, params = from_onnx(model)
    with PassContext(opt_level=opt_level):
        return relay.build(mod, target="llvm", params=params)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
@pytest.mark.parametrize("opt_level", [0, 3])
def test_opt_levels_plain_and_packed_weights(kind, opt_level):
    """O0 runs the layer on R as given (packed in the kernel each call), O3 on R packed once
    at compile time; both against onnxruntime, with sequence lengths."""
    from runtime import cpu, graph_executor
    model, x = _model(kind, {"direction": "bidirectional", "linear_before_reset": 1}
                      if kind == "GRU" else {"direction": "bidirectional"}, num_dirs=2,
                      lens=[4, 3, 1], with_init=True, hidden=20, width=7)
    want = _expected(model, x)
    module = graph_executor.GraphModule(_build(model, opt_level)["default"](cpu(0)))
    module.run(X=x)
    for i, w in enumerate(want):
        np.testing.assert_allclose(module.get_output(i).numpy(), w, rtol=1e-4, atol=1e-5)


def test_sequence_lens_as_a_graph_input():
    """Lengths known only at run time: the kernel reads them every step."""
    from runtime import cpu, graph_executor
    model, x = _model("LSTM", {"direction": "bidirectional"}, num_dirs=2, lens=[4, 2, 3],
                      with_init=True)
    init = {i.name: i for i in model.graph.initializer}
    model.graph.initializer.remove(init["L"])
    model.graph.input.append(helper.make_tensor_value_info("L", TensorProto.INT32, [3]))
    module = graph_executor.GraphModule(_build(model, 3)["default"](cpu(0)))
    for lens in ([4, 2, 3], [1, 4, 0]):
        feeds = {"X": x, "L": np.asarray(lens, np.int32)}
        want = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
        module.run(**feeds)
        for i, w in enumerate(want):
            np.testing.assert_allclose(module.get_output(i).numpy(), w, rtol=1e-4, atol=1e-5,
                                       err_msg=f"lens {lens} output {i}")


@pytest.mark.parametrize("seq", [4, 40])
def test_one_kernel_per_direction_whatever_the_length(seq):
    """The time loop runs inside one kernel a direction (no node per step), reading R packed
    at compile time."""
    import json
    lib = _build(_model("GRU", {"direction": "bidirectional"}, num_dirs=2, seq=seq)[0], 3)
    funcs = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
             if n["op"] == "tvm_op"]
    assert sum("recurrent_layer" in f for f in funcs) == 2, funcs
    assert len(funcs) <= 10, funcs
    assert any(p.numpy().ndim == 3 for p in lib.get_params().values())  # packed panels
