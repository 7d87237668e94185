"""End to end: small networks built with relay.build at opt_level 0..3 against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.op.nn_norm import batch_norm, layer_norm
from compiler.op.nn_pool import global_avg_pool2d, max_pool2d
from runtime import cpu, graph_executor

RNG = np.random.default_rng(42)
OPT_LEVELS = [0, 1, 2, 3]


def rand(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype("float32")


def build_and_run(func, params, inputs, opt_level):
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(func, target="llvm", params=params)
    gmod = graph_executor.GraphModule(lib["default"](cpu(0)))
    gmod.run(**inputs)
    return gmod.get_output(0).numpy()


def np_conv2d(x, w, pad):
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, k, oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out


@pytest.mark.parametrize("opt_level", OPT_LEVELS)
def test_mlp(opt_level):
    x = relay.var("x", shape=(4, 16))
    w1, b1 = relay.var("w1", shape=(32, 16)), relay.var("b1", shape=(32,))
    w2, b2 = relay.var("w2", shape=(10, 32)), relay.var("b2", shape=(10,))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    out = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, w2), b2))
    func = relay.Function([x, w1, b1, w2, b2], out)
    p = {"w1": rand(32, 16), "b1": rand(32), "w2": rand(10, 32), "b2": rand(10)}
    xv = rand(4, 16)
    got = build_and_run(func, p, {"x": xv}, opt_level)
    hv = np.maximum(xv @ p["w1"].T + p["b1"], 0)
    logits = hv @ p["w2"].T + p["b2"]
    ref = np.exp(logits - logits.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt_level", OPT_LEVELS)
def test_conv_bn_relu_pool(opt_level):
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(8, 3, 3, 3))
    g, b, m, v = (relay.var(n, shape=(8,)) for n in ("gamma", "beta", "mean", "var"))
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=8, kernel_size=(3, 3))
    y = batch_norm(y, g, b, m, v)[0]
    y = max_pool2d(relay.nn.relu(y), pool_size=(2, 2), strides=(2, 2))
    func = relay.Function([x, w, g, b, m, v], y)
    p = {"w": rand(8, 3, 3, 3), "gamma": rand(8) + 1, "beta": rand(8), "mean": rand(8),
         "var": np.abs(rand(8)) + 0.5}
    xv = rand(1, 3, 8, 8)
    got = build_and_run(func, p, {"x": xv}, opt_level)
    c = np_conv2d(xv, p["w"], 1)
    sh = (1, 8, 1, 1)
    c = (c - p["mean"].reshape(sh)) / np.sqrt(p["var"].reshape(sh) + 1e-5)
    c = c * p["gamma"].reshape(sh) + p["beta"].reshape(sh)
    c = np.maximum(c, 0)
    ref = c.reshape(1, 8, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opt_level", OPT_LEVELS)
def test_residual_block(opt_level):
    x = relay.var("x", shape=(1, 4, 6, 6))
    w1, w2 = relay.var("w1", shape=(4, 4, 3, 3)), relay.var("w2", shape=(4, 4, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1)))
    y = relay.nn.conv2d(y, w2, padding=(1, 1))
    out = global_avg_pool2d(relay.nn.relu(relay.add(y, x)))
    func = relay.Function([x, w1, w2], out)
    p = {"w1": rand(4, 4, 3, 3), "w2": rand(4, 4, 3, 3)}
    xv = rand(1, 4, 6, 6)
    got = build_and_run(func, p, {"x": xv}, opt_level)
    h = np.maximum(np_conv2d(xv, p["w1"], 1), 0)
    ref = np.maximum(np_conv2d(h, p["w2"], 1) + xv, 0).mean(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt_level", OPT_LEVELS)
def test_attention_block(opt_level):
    seq, dim = 6, 8
    x = relay.var("x", shape=(1, seq, dim))
    wq, wk, wv = (relay.var(n, shape=(1, dim, dim)) for n in ("wq", "wk", "wv"))
    gamma, beta = relay.var("gamma", shape=(dim,)), relay.var("beta", shape=(dim,))
    q = relay.nn.batch_matmul(x, wq)
    k = relay.nn.batch_matmul(x, wk)
    v = relay.nn.batch_matmul(x, wv)
    scores = relay.multiply(relay.nn.batch_matmul(q, k), relay.const(1 / np.sqrt(dim), "float32"))
    attn = relay.nn.softmax(scores, axis=-1)
    ctx = relay.nn.batch_matmul(attn, relay.transpose(v, axes=(0, 2, 1)))
    out = layer_norm(relay.add(ctx, x), gamma, beta, axis=-1)
    func = relay.Function([x, wq, wk, wv, gamma, beta], out)
    p = {"wq": rand(1, dim, dim), "wk": rand(1, dim, dim), "wv": rand(1, dim, dim),
         "gamma": rand(dim) + 1, "beta": rand(dim)}
    xv = rand(1, seq, dim)
    got = build_and_run(func, p, {"x": xv}, opt_level)
    # batch_matmul(a, b) is a @ b^T (transpose_b=True)
    qv, kv, vv = (xv @ p[n].transpose(0, 2, 1) for n in ("wq", "wk", "wv"))
    s = qv @ kv.transpose(0, 2, 1) / np.sqrt(dim)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    h = s @ vv + xv
    mu, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    ref = (h - mu) / np.sqrt(var + 1e-5) * p["gamma"] + p["beta"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
