"""Packed-weight conv2d / dense ops: type relations, numpy references, compiled kernels."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.ir.module import IRModule
from compiler.op import nn_packed
from compiler.op.registry import get_def
from runtime import graph_executor

from tests.op._opcheck import infer

from tests.schedule_helpers import dense_pack, host

# compiled through relay.build and compared with the numpy references below
OPS_TESTED = {"nn.contrib_conv2d_weight_pack", "nn.contrib_dense_weight_pack",
              "nn.contrib_conv2d_packed", "nn.contrib_dense_pack"}

RNG = np.random.default_rng(5)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _run(func, **inputs):
    lib = relay.build(IRModule.from_expr(func), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.run(**inputs)
    return gm.get_output(0).numpy()


@pytest.mark.parametrize("k,cg,groups,block", [(5, 3, 1, 16), (40, 8, 1, 32), (36, 4, 4, 16)])
def test_conv2d_weight_pack_reference_roundtrip(k, cg, groups, block):
    w = _f32(k, cg, 3, 2)
    call = nn_packed.contrib_conv2d_weight_pack(relay.const(w), groups=groups, block=block)
    kg = k // groups
    assert infer(call).shape == (groups, -(-kg // block), cg, 3, 2, block)
    wp = get_def("nn.contrib_conv2d_weight_pack").reference([w], call.attrs)
    assert wp.shape == infer(call).shape
    np.testing.assert_array_equal(nn_packed.unpack_conv2d_weight(wp, k), w)
    g, kb, v = groups - 1, (kg - 1) // block, (kg - 1) % block
    np.testing.assert_array_equal(wp[g, kb, :, :, :, v], w[g * kg + kb * block + v])
    if kg % block:  # the padding lanes are zero
        assert not wp[:, -1, ..., kg % block:].any()


@pytest.mark.parametrize("n,k,block,kp", [(10, 33, 32, 33), (64, 300, 16, 300), (70, 5, 32, 8)])
def test_dense_weight_pack_reference_roundtrip(n, k, block, kp):
    w = _f32(n, k)
    call = nn_packed.contrib_dense_weight_pack(relay.const(w), block=block, k_padded=kp)
    assert infer(call).shape == (-(-n // block), kp, block)
    wp = get_def("nn.contrib_dense_weight_pack").reference([w], call.attrs)
    np.testing.assert_array_equal(wp[1 if n > block else 0, 2, 3],
                                  w[(block if n > block else 0) + 3, 2])
    np.testing.assert_array_equal(nn_packed.unpack_dense_weight(wp, n, k), w)
    assert not wp[:, k:].any()


def test_pack_ops_compile_like_their_reference():
    """The compute rules (what FoldConstant runs) produce the reference's bytes."""
    for op, w, attrs in [("nn.contrib_conv2d_weight_pack", _f32(36, 4, 3, 3),
                          dict(groups=4, block=16)),
                         ("nn.contrib_dense_weight_pack", _f32(70, 300),
                          dict(block=32, k_padded=304))]:
        x = relay.var("w", shape=w.shape)
        maker = nn_packed.contrib_conv2d_weight_pack if "conv" in op else \
            nn_packed.contrib_dense_weight_pack
        call = maker(x, **attrs)
        out = _run(relay.Function([x], call), w=w)
        np.testing.assert_array_equal(out, get_def(op).reference([w], call.attrs))


def test_type_relation_errors():
    x = relay.var("x", shape=(1, 8, 6, 6))
    wp = relay.var("wp", shape=(1, 2, 8, 3, 3, 16))
    with pytest.raises(Exception, match="does not fit"):
        infer(nn_packed.contrib_conv2d_packed(x, wp, channels=40))  # needs 3 blocks of 16
    d = relay.var("d", shape=(2, 30))
    with pytest.raises(Exception, match="does not fit"):
        infer(nn_packed.contrib_dense_pack(d, relay.var("b", shape=(2, 20, 32)), units=40))


CONV_CASES = [
    ((1, 3, 9, 9), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 8, 10, 7), (40, 8, 3, 3), (2, 2), (1, 0, 2, 1), (1, 1), 1),
    ((1, 16, 12, 12), (36, 4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 4),
    ((1, 1, 12, 12), (20, 1, 5, 5), (1, 1), (0, 0, 0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("xs,ws,st,pad,dil,groups", CONV_CASES)
@pytest.mark.parametrize("block", [16, 32])
def test_conv2d_packed_matches_reference(xs, ws, st, pad, dil, groups, block, monkeypatch):
    monkeypatch.setenv("RELAYJIT_VECTOR_WIDTH", str(block // 2))
    x, w, b = _f32(*xs), _f32(*ws), _f32(ws[0])
    xv, wv = relay.var("x", shape=xs), relay.var("w", shape=ws)
    packed = nn_packed.contrib_conv2d_weight_pack(wv, groups=groups, block=block)
    conv = nn_packed.contrib_conv2d_packed(xv, packed, channels=ws[0], strides=st, padding=pad,
                                           dilation=dil, groups=groups)
    out = _run(relay.Function([xv, wv], relay.nn.relu(relay.nn.bias_add(conv, relay.const(b)))),
               x=x, w=w)
    wp = get_def("nn.contrib_conv2d_weight_pack").reference([w], packed.attrs)
    ref = get_def("nn.contrib_conv2d_packed").reference([x, wp], conv.attrs)
    assert infer(conv).shape == ref.shape
    np.testing.assert_allclose(out, np.maximum(ref + b[None, :, None, None], 0), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("shape,n", [((1, 4096), 100), ((1, 33), 10), ((3, 300), 64),
                                     ((2, 8, 513), 100), ((64, 256), 128), ((2, 5), 3)])
@pytest.mark.parametrize("vw", [8, 16])
def test_dense_pack_matches_reference(shape, n, vw, monkeypatch):
    monkeypatch.setenv("RELAYJIT_VECTOR_WIDTH", str(vw))
    k = shape[-1]
    x, w, b = _f32(*shape), _f32(n, k), _f32(n)
    _, kp, nr = dense_pack(int(np.prod(shape[:-1])), n, k, host(vw))
    xv, wv = relay.var("x", shape=shape), relay.var("w", shape=(n, k))
    packed = nn_packed.contrib_dense_weight_pack(wv, block=nr, k_padded=kp)
    dense = nn_packed.contrib_dense_pack(xv, packed, units=n)
    out = _run(relay.Function([xv, wv], relay.nn.relu(relay.nn.bias_add(dense, relay.const(b),
                                                                        axis=-1))), x=x, w=w)
    wp = get_def("nn.contrib_dense_weight_pack").reference([w], packed.attrs)
    ref = get_def("nn.contrib_dense_pack").reference([x, wp], dense.attrs)
    np.testing.assert_allclose(ref, x.astype("f8") @ w.T.astype("f8"), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out, np.maximum(ref + b, 0), rtol=1e-4, atol=1e-4)
