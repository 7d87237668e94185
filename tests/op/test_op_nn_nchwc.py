"""nn.contrib_conv2d_NCHWc and the blocked (NCHW<x>c) forms of pools and Winograd convs: type
relations, numpy references against the NCHW ops', compiled kernels through relay.build, and
the errors bad input gets."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.errors import TypeInferenceError
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.op import nn_nchwc, nn_packed, nn_winograd
from compiler.op.blocked_layout import block_ref, channel_block_of, unblock_ref
from compiler.op.registry import get_def
from runtime import graph_executor

from tests.op._opcheck import infer
from compiler.driver.build import current_options

# compiled through relay.build and compared with the numpy references below
OPS_TESTED = {"nn.contrib_conv2d_NCHWc"}

RNG = np.random.default_rng(17)
X = 16  # the block of the layouts here (the compiled kernels use the host's: see _run)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _packed(w, block):
    call = nn_packed.contrib_conv2d_weight_pack(relay.const(w), block=block)
    return get_def("nn.contrib_conv2d_weight_pack").reference([w], call.attrs)


def _conv_call(data_shape, wp, k, x=X, **kw):
    data = relay.var("x", shape=data_shape)
    return nn_nchwc.contrib_conv2d_NCHWc(data, relay.const(wp), channels=k,
                                         kernel_block=wp.shape[-1], data_layout=f"NCHW{x}c", **kw)


def test_channel_block_of_layout_strings():
    assert channel_block_of("NCHW16c") == 16 and channel_block_of("NCHW8c") == 8
    assert channel_block_of("NCHW") is None and channel_block_of("NHWC") is None
    assert channel_block_of("NHWC8c") is None and channel_block_of("not a layout") is None
    a = _f32(2, 32, 3, 5)
    np.testing.assert_array_equal(unblock_ref(block_ref(a, 16)), a)
    np.testing.assert_array_equal(block_ref(a, 16)[1, 1, 2, 4, 3], a[1, 19, 2, 4])


@pytest.mark.parametrize("n,c,h,w,k,r,stride,pad", [
    (1, 32, 9, 9, 48, 3, 1, 1), (2, 16, 8, 7, 32, 1, 2, 0), (1, 16, 1, 1, 16, 1, 1, 0)])
def test_conv_type_and_reference_match_the_nchw_conv(n, c, h, w, k, r, stride, pad):
    wt = _f32(k, c, r, r)
    wp = _packed(wt, 32 if k % 32 == 0 else 16)
    call = _conv_call((n, c // X, h, w, X), wp, k, strides=stride, padding=pad)
    oh = (h + 2 * pad - r) // stride + 1
    ow = (w + 2 * pad - r) // stride + 1
    assert infer(call) == TensorType((n, k // X, oh, ow, X))
    data = _f32(n, c, h, w)
    got = get_def(nn_nchwc.OP).reference([block_ref(data, X), wp], call.attrs)
    nchw = nn_packed.contrib_conv2d_packed(relay.var("d", shape=data.shape), relay.const(wp),
                                           channels=k, strides=stride, padding=pad)
    want = get_def("nn.contrib_conv2d_packed").reference([data, wp], nchw.attrs)
    np.testing.assert_allclose(unblock_ref(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("data_shape,k,layout,match", [
    ((1, 2, 5, 5, 8), 32, "NCHW16c", "data must be"),          # lanes are not the block
    ((1, 2, 5, 5, 16), 24, "NCHW16c", "do not fit"),           # K not whole blocks
    ((1, 3, 5, 5, 16), 32, "NCHW16c", "do not fit"),           # C differs from the weight's
    ((1, 32, 5, 5), 32, "NCHW", "expected data_layout"),       # not a blocked layout
])
def test_conv_rejects_what_does_not_fit(data_shape, k, layout, match):
    wp = _packed(_f32(k, 32, 1, 1), 16)
    data = relay.var("x", shape=data_shape)
    call = nn_nchwc.contrib_conv2d_NCHWc(data, relay.const(wp), channels=k, kernel_block=16,
                                         data_layout=layout)
    with pytest.raises(TypeInferenceError, match=match):
        infer(call)


def _run(func, **inputs):
    lib = relay.build(IRModule.from_expr(func), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.run(**inputs)
    return gm.get_output(0).numpy()


def test_conv_compiled_matches_reference_with_bias_relu_epilogue():
    x = current_options().vector_width
    n, c, h, w, k = 2, 2 * x, 6, 5, 3 * x
    wt = _f32(k, c, 3, 3) / np.sqrt(9 * c)
    wp = _packed(wt, 2 * x)
    call = _conv_call((n, c // x, h, w, x), wp, k, x=x, padding=1)
    bias = _f32(1, k // x, 1, 1, x)
    y = relay.nn.relu(relay.add(call, relay.const(bias)))
    data = _f32(n, c // x, h, w, x)
    got = _run(relay.Function([call.args[0]], y), x=data)
    want = np.maximum(get_def(nn_nchwc.OP).reference([data, wp], call.attrs) + bias, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,kw", [
    ("max_pool2d", dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1))),
    ("avg_pool2d", dict(pool_size=(2, 3), strides=(1, 2), padding=(0, 1), count_include_pad=True)),
    ("global_avg_pool2d", {}), ("global_max_pool2d", {}),
    ("adaptive_avg_pool2d", dict(output_size=(2, 3))),
])
def test_blocked_pools_compute_the_nchw_pool(op, kw):
    data = _f32(2, 32, 7, 6)
    make = getattr(relay.nn, op)
    nchw = make(relay.var("x", shape=data.shape), **kw)
    blocked = make(relay.var("x", shape=(2, 2, 7, 6, 16)), layout="NCHW16c", **kw)
    want = get_def(f"nn.{op}").reference([data], nchw.attrs)
    assert infer(blocked).shape == block_ref(want, 16).shape
    np.testing.assert_allclose(get_def(f"nn.{op}").reference([block_ref(data, 16)],
                                                              blocked.attrs),
                               block_ref(want, 16), rtol=1e-6)
    got = _run(relay.Function([blocked.args[0]], blocked), x=block_ref(data, 16))
    np.testing.assert_allclose(got, block_ref(want, 16), rtol=1e-5, atol=1e-6)


def test_blocked_pool_rejects_unblocked_data():
    with pytest.raises(TypeInferenceError, match="layout='NCHW16c' needs data"):
        infer(relay.nn.max_pool2d(relay.var("x", shape=(1, 32, 5, 5)), layout="NCHW16c"))


def test_blocked_winograd_matches_the_nchw_one(width):
    x = current_options().vector_width
    c = k = 4 * x
    w = _f32(k, c, 3, 3) / np.sqrt(9 * c)
    u = nn_winograd.contrib_conv2d_winograd_weight_transform(relay.const(w), tile_size=4)
    uc = get_def(u.op.name).reference([w], u.attrs)
    data = _f32(1, c, 10, 9)
    call = nn_winograd.contrib_conv2d_winograd_without_weight_transform(
        relay.var("x", shape=(1, c // x, 10, 9, x)), relay.const(uc), tile_size=4, channels=k,
        padding=(1, 1), data_layout=f"NCHW{x}c")
    assert infer(call) == TensorType((1, k // x, 10, 9, x))
    nchw = nn_winograd.contrib_conv2d_winograd_without_weight_transform(
        relay.var("x", shape=data.shape), relay.const(uc), tile_size=4, channels=k,
        padding=(1, 1))
    want = get_def(call.op.name).reference([data, uc], nchw.attrs)
    np.testing.assert_allclose(get_def(call.op.name).reference([block_ref(data, x), uc],
                                                               call.attrs),
                               block_ref(want, x), rtol=1e-5, atol=1e-5)
    got = _run(relay.Function([call.args[0]], call), x=block_ref(data, x))
    np.testing.assert_allclose(got, block_ref(want, x), rtol=1e-4, atol=1e-4)
