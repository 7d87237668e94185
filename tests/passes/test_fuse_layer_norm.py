"""FuseLayerNorm: decomposed layer norms (rsqrt or sqrt/divide form, c*c or c**2, eps on
either side) become one nn.layer_norm with the scale and shift folded in where that is exact;
other shapes of the graph stay. Each case is run through relay.build against numpy, and the
ONNX forms (LayerNormalization, and the opset < 17 decomposition) against onnxruntime."""
from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import IRModule, relay
from compiler.ir.expr import Call
from compiler.ir.traversal import post_order
from compiler.passes.fuse_layer_norm import FuseLayerNorm
from compiler.transform import PassContext
from runtime import cpu, graph_executor

RNG = np.random.default_rng(8)


def decomposed(x, form="rsqrt", square="multiply", eps=1e-5, eps_first=False, axis=-1):
    mean = relay.mean(x, axis=[axis], keepdims=True)
    c = relay.subtract(x, mean)
    sq = relay.multiply(c, c) if square == "multiply" else relay.power(c, relay.const(2.0))
    v = relay.mean(sq, axis=[axis], keepdims=True)
    e = relay.const(np.float32(eps))
    plus = relay.add(e, v) if eps_first else relay.add(v, e)
    if form == "rsqrt":
        return relay.multiply(relay.rsqrt(plus), c)
    return relay.divide(c, relay.sqrt(plus))


def reference(x, eps, gamma=None, beta=None):
    x = x.astype(np.float64)
    c = x - x.mean(-1, keepdims=True)
    y = c / np.sqrt((c * c).mean(-1, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def folded(func):
    mod = relay.transform.InferType()(IRModule.from_expr(func))
    return relay.transform.InferType()(FuseLayerNorm()(mod))["main"]


def layer_norms(func) -> list:
    return [n for n in post_order(func) if isinstance(n, Call) and hasattr(n.op, "name")
            and n.op.name == "nn.layer_norm"]


def run(func, xv):
    with PassContext(opt_level=3):
        lib = relay.build(func)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(x=xv)
    return [gm.get_output(i).numpy() for i in range(gm.get_num_outputs())]


@pytest.mark.parametrize("form,square,eps_first", [("rsqrt", "multiply", False),
                                                   ("sqrt", "power", True),
                                                   ("rsqrt", "power", True)])
@pytest.mark.parametrize("shape", [(1, 128, 768), (3, 5, 37), (7, 16), (2, 1)], ids=str)
@pytest.mark.parametrize("affine", ["none", "scale", "shift", "both", "both_nd"])
def test_decomposed_forms_fold_into_one_layer_norm(form, square, eps_first, shape, affine):
    c = shape[-1]
    x = relay.var("x", shape=shape)
    gamma = RNG.uniform(0.5, 1.5, c).astype(np.float32)
    beta = RNG.uniform(-0.5, 0.5, c).astype(np.float32)
    y = decomposed(x, form, square, 1e-5, eps_first)
    lead = (1,) * (len(shape) - 1)  # [1, ..., 1, C]: broadcasts to x's shape, no further
    g = gamma.reshape(*lead, c) if affine == "both_nd" else gamma
    b = beta.reshape(*lead, c) if affine == "both_nd" else beta
    if affine in ("scale", "both", "both_nd"):
        y = relay.multiply(y, relay.const(g))
    if affine in ("shift", "both", "both_nd"):
        y = relay.add(relay.const(b), y)
    func = relay.Function([x], y)
    norms = layer_norms(folded(func))
    assert len(norms) == 1
    attrs = norms[0].attrs
    assert (attrs.scale, attrs.center) == (affine in ("scale", "both", "both_nd"),
                                           affine in ("shift", "both", "both_nd"))
    assert not [n for n in post_order(folded(func)) if isinstance(n, Call)
                and getattr(n.op, "name", "") in ("mean", "multiply", "add")]
    xv = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    want = reference(xv, 1e-5, gamma if attrs.scale else None, beta if attrs.center else None)
    np.testing.assert_allclose(run(func, xv)[0], want, rtol=1e-4, atol=1e-5)


def test_shift_then_scale_keeps_the_scale_outside():
    """(n + b) * g: the scale would scale the shift too, so it stays a multiply."""
    x = relay.var("x", shape=(4, 24))
    b = RNG.standard_normal(24).astype(np.float32)
    g = RNG.standard_normal(24).astype(np.float32)
    func = relay.Function([x], relay.multiply(relay.add(decomposed(x), relay.const(b)),
                                              relay.const(g)))
    out = folded(func)
    (norm,) = layer_norms(out)
    assert norm.attrs.center and not norm.attrs.scale
    assert out.body.op.name == "multiply"
    xv = RNG.standard_normal((4, 24)).astype(np.float32)
    np.testing.assert_allclose(run(func, xv)[0], (reference(xv, 1e-5) + b) * g, rtol=1e-4,
                               atol=1e-5)


def test_normalised_value_with_a_second_reader_keeps_its_affine_outside():
    x = relay.var("x", shape=(3, 40))
    n = decomposed(x)
    g = RNG.standard_normal(40).astype(np.float32)
    func = relay.Function([x], relay.Tuple([relay.multiply(n, relay.const(g)), n]))
    (norm,) = layer_norms(folded(func))
    assert not norm.attrs.scale and not norm.attrs.center
    xv = RNG.standard_normal((3, 40)).astype(np.float32)
    scaled, plain = run(func, xv)
    np.testing.assert_allclose(plain, reference(xv, 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(scaled, reference(xv, 1e-5) * g, rtol=1e-4, atol=1e-5)


def test_other_axes_and_mismatched_means_stay():
    """A mean over another axis, and a centring with a different tensor's mean, are not layer
    norms over the last axis."""
    x = relay.var("x", shape=(6, 10))
    z = relay.var("z", shape=(6, 10))
    assert not layer_norms(folded(relay.Function([x], decomposed(x, axis=0))))
    c = relay.subtract(x, relay.mean(z, axis=[-1], keepdims=True))
    v = relay.mean(relay.multiply(c, c), axis=[-1], keepdims=True)
    wrong = relay.multiply(c, relay.rsqrt(relay.add(v, relay.const(1e-5))))
    assert not layer_norms(folded(relay.Function([x, z], wrong)))


def test_relay_layer_norm_comes_back_after_simplify_inference():
    """relay.build's SimplifyInference writes nn.layer_norm as variance(x, mean(x)) arithmetic;
    FuseLayerNorm makes it one nn.layer_norm again (the row kernel), scale and shift folded;
    an unbiased variance is not a layer norm."""
    x = relay.var("x", shape=(4, 96))
    gamma = RNG.uniform(0.5, 1.5, 96).astype(np.float32)
    beta = RNG.uniform(-0.5, 0.5, 96).astype(np.float32)
    func = relay.Function([x], relay.nn.layer_norm(x, relay.const(gamma), relay.const(beta),
                                                   epsilon=1e-3))
    mod = relay.transform.InferType()(IRModule.from_expr(func))
    simplified = relay.transform.SimplifyInference()(mod)
    assert not layer_norms(simplified["main"])
    (norm,) = layer_norms(relay.transform.InferType()(FuseLayerNorm()(simplified))["main"])
    assert norm.attrs.scale and norm.attrs.center and norm.attrs.epsilon == pytest.approx(1e-3)
    xv = (RNG.standard_normal((4, 96)) * 3 + 1).astype(np.float32)
    np.testing.assert_allclose(run(func, xv)[0], reference(xv, 1e-3, gamma, beta), rtol=1e-4,
                               atol=1e-5)
    mean = relay.mean(x, axis=[-1], keepdims=True)
    unbiased = relay.variance(x, axis=[-1], keepdims=True, unbiased=True, with_mean=mean)
    normalised = relay.divide(relay.subtract(x, mean),
                              relay.sqrt(relay.add(unbiased, relay.const(np.float32(1e-5)))))
    assert not layer_norms(folded(relay.Function([x], normalised)))


def _onnx_model(nodes, inits, shape):
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, list(shape))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("decomposed_form", [False, True])
def test_onnx_layer_norms_match_onnxruntime(decomposed_form):
    shape, c = (2, 33, 48), 48
    gamma = RNG.uniform(0.8, 1.2, c).astype(np.float32)
    beta = RNG.uniform(-0.1, 0.1, c).astype(np.float32)
    inits = [numpy_helper.from_array(gamma, "g"), numpy_helper.from_array(beta, "b")]
    if decomposed_form:  # as torch.onnx writes it below opset 17
        inits += [numpy_helper.from_array(np.array(v, np.float32), n)
                  for n, v in (("two", 2.0), ("eps", 1e-5))]
        nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], keepdims=1),
                 helper.make_node("Sub", ["x", "m"], ["c"]),
                 helper.make_node("Pow", ["c", "two"], ["sq"]),
                 helper.make_node("ReduceMean", ["sq"], ["v"], axes=[-1], keepdims=1),
                 helper.make_node("Add", ["v", "eps"], ["ve"]),
                 helper.make_node("Sqrt", ["ve"], ["s"]),
                 helper.make_node("Div", ["c", "s"], ["n"]),
                 helper.make_node("Mul", ["n", "g"], ["ng"]),
                 helper.make_node("Add", ["ng", "b"], ["y"])]
        model = _onnx_model(nodes, inits, shape)
        model.opset_import[0].version = 13
    else:
        model = _onnx_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"],
                                              axis=-1, epsilon=1e-5)], inits, shape)
    xv = (RNG.standard_normal(shape) * 2).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": xv})[0]
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=3):
        lib = relay.build(mod, params=params)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(x=xv)
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-5, atol=1e-5)
    kernels = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
               if n["op"] == "tvm_op"]
    assert len(kernels) == 1 and "layer_norm" in kernels[0], kernels


def test_scale_that_broadcasts_the_result_wider_stays_outside():
    """[7, 16] * [1, 1, 16] is [1, 7, 16]: not the layer norm's shape, so not its gamma."""
    x = relay.var("x", shape=(7, 16))
    g = RNG.standard_normal((1, 1, 16)).astype(np.float32)
    func = relay.Function([x], relay.multiply(decomposed(x), relay.const(g)))
    (norm,) = layer_norms(folded(func))
    assert not norm.attrs.scale
    xv = RNG.standard_normal((7, 16)).astype(np.float32)
    np.testing.assert_allclose(run(func, xv)[0], reference(xv, 1e-5) * g, rtol=1e-4, atol=1e-5)
