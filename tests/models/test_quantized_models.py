"""The int8 benchmark models (benchmarks/generated_models.py QUANTIZED_MODELS, quantized by
onnxruntime's quantize_static / quantize_dynamic inside the builder) against onnxruntime:
reduced sizes in the default run, benchmark sizes with -m slow. The QDQ model must run as
integer ops (FakeQuantizationToInteger), and every model's outputs must be within one
quantization step of onnxruntime's (they are bit for bit equal on these inputs). Their
contractions must run the int8 kernels (compiler.op.strategy.int8), none the generic int32
reduction."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import runtime
from benchmarks import generated_models as gm
from compiler import relay, transform
from compiler.driver.build import optimize
from compiler.ir.traversal import post_order
from runtime import graph_executor

pytest.importorskip("onnxruntime.quantization")
SMALL_RESNET = {"size": 32, "widths": (8, 16, 16, 32), "classes": 10}
REDUCED = {
    "gen_resnet18_qdq": lambda: gm.resnet_int8("qdq", **SMALL_RESNET),
    "gen_resnet18_qoperator": lambda: gm.resnet_int8("qoperator", **SMALL_RESNET),
    "gen_bert_encoder_int8": lambda: gm.bert_encoder_int8(seq=16, hidden=64, heads=4, ffn=128),
}
FLOAT_OPS = {"nn.conv2d", "nn.dense", "nn.contrib_conv2d_NCHWc", "nn.contrib_dense_pack",
             "nn.contrib_conv2d_packed"}
# the int8 kernels the QNN contractions with constant weights become; none left generic
INT8_KERNELS = {"nn.contrib_dense_int8", "nn.contrib_conv2d_int8"}
GENERIC_CONTRACTIONS = {"qnn.conv2d", "qnn.dense"}


@pytest.fixture(autouse=True)
def _quiet_quantizer():
    logging.disable(logging.WARNING)  # onnxruntime's advice to pre-process the model
    yield
    logging.disable(logging.NOTSET)


def _check(model, feeds):
    from benchmarks.models import _output_steps
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    mod, params = relay.frontend.from_onnx(model)
    with transform.PassContext(opt_level=3):
        factory = relay.build(mod, target="llvm", params=params)
        mod["main"] = relay.build_module.bind_params_by_name(mod["main"], params)
        fused = optimize(mod)
    ops = {n.op.name for f in post_order(fused["main"]) if isinstance(f, relay.Function)
           for n in post_order(f.body) if isinstance(n, relay.Call)
           and isinstance(n.op, relay.Op)}
    assert not ops & FLOAT_OPS, f"float contractions left: {ops & FLOAT_OPS}"
    assert ops & INT8_KERNELS and not ops & GENERIC_CONTRACTIONS, ops
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.run(**feeds)
    for i, (w, step) in enumerate(zip(want, _output_steps(model))):
        got = gmod.get_output(i).numpy()
        assert got.dtype == w.dtype and got.shape == w.shape
        np.testing.assert_allclose(got, w, rtol=0 if step else 1e-5,
                                   atol=1.0001 * step if step else 1e-5, err_msg=f"output {i}")


@pytest.mark.parametrize("name", list(REDUCED))
def test_reduced_quantized_model_matches_onnxruntime(name):
    assert set(REDUCED) == set(gm.QUANTIZED_MODELS)
    _check(*REDUCED[name]())


@pytest.mark.slow
@pytest.mark.parametrize("name", list(gm.QUANTIZED_MODELS))
def test_quantized_model_matches_onnxruntime(name):
    _check(*gm.build(name))
