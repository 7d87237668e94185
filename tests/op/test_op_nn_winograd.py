"""Winograd conv2d ops: weight transform, type relations, references, compiled kernels, and
the AlterOpLayout choice between Winograd and direct convolution."""
from __future__ import annotations

import json

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.ir.module import IRModule
from compiler.op import nn_winograd
from compiler.op.registry import get_def
from compiler.transform import PassContext
from compiler.errors import TypeInferenceError
from runtime import graph_executor

from tests.codegen.test_schedule_conv2d import ref_conv
from tests.op._opcheck import infer

OPS_TESTED = {"nn.contrib_conv2d_winograd_weight_transform",
              "nn.contrib_conv2d_winograd_without_weight_transform"}

RNG = np.random.default_rng(13)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("m", [2, 4])
def test_weight_transform_reference_roundtrip(m):
    w = _f32(5, 3, 3, 3)
    call = nn_winograd.contrib_conv2d_winograd_weight_transform(relay.const(w), tile_size=m)
    assert infer(call).shape == (m + 2, m + 2, 5, 3)
    u = get_def(call.op.name).reference([w], call.attrs)
    np.testing.assert_allclose(nn_winograd.untransform_weight(u, m), w, rtol=1e-5, atol=1e-6)


def test_type_relations_refuse_what_they_cannot_do():
    w = relay.const(_f32(4, 2, 5, 5))
    with pytest.raises(TypeInferenceError, match="3x3"):
        infer(nn_winograd.contrib_conv2d_winograd_weight_transform(w, tile_size=4))
    with pytest.raises(TypeInferenceError, match="tile_size"):
        infer(nn_winograd.contrib_conv2d_winograd_weight_transform(
            relay.const(_f32(4, 2, 3, 3)), tile_size=3))
    x = relay.var("x", shape=(1, 2, 8, 8))
    u = relay.const(_f32(6, 6, 4, 2))
    with pytest.raises(TypeInferenceError, match="channels"):
        infer(nn_winograd.contrib_conv2d_winograd_without_weight_transform(
            x, u, tile_size=4, channels=5))


@pytest.mark.parametrize("xs,k,pad,m", [
    ((1, 8, 10, 9), 5, (1, 1, 1, 1), 4),     # partial tiles in both directions
    ((2, 3, 7, 6), 4, (0, 0, 0, 0), 2),      # batch 2, no padding
    ((1, 16, 13, 13), 20, (1, 0, 2, 1), 4),  # asymmetric padding
    ((1, 64, 16, 16), 64, (1, 1, 1, 1), 2),
])
def test_compiled_winograd_matches_convolution(xs, k, pad, m):
    w = (_f32(k, xs[1], 3, 3) / np.sqrt(9 * xs[1])).astype("f4")
    b = _f32(k)
    x = relay.var("x", shape=xs)
    u = nn_winograd.contrib_conv2d_winograd_weight_transform(relay.const(w), tile_size=m)
    y = nn_winograd.contrib_conv2d_winograd_without_weight_transform(
        x, u, tile_size=m, channels=k, padding=pad)
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))  # a fused epilogue
    lib = relay.build(IRModule.from_expr(relay.Function([x], y)), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    xa = _f32(*xs)
    gm.run(x=xa)
    ref = np.maximum(ref_conv(xa, w, (1, 1), pad, (1, 1), 1) + b[:, None, None], 0)
    np.testing.assert_allclose(gm.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)
    # the op's numpy reference agrees too
    ua = get_def(u.op.name).reference([w], u.attrs)
    conv = y.args[0].args[0]
    got = get_def(conv.op.name).reference([xa, ua], conv.attrs)
    np.testing.assert_allclose(got, ref_conv(xa, w, (1, 1), pad, (1, 1), 1), rtol=1e-4,
                               atol=1e-4)


def _kernels(xs, k, strides=(1, 1), ks=3):
    x = relay.var("x", shape=xs)
    w = relay.const(_f32(k, xs[1], ks, ks))
    y = relay.nn.conv2d(x, w, strides=strides, padding=(ks // 2, ks // 2))
    with PassContext(opt_level=3):
        lib = relay.build(IRModule.from_expr(relay.Function([x], y)), target="llvm")
    return [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
            if n["op"] == "tvm_op"]


@pytest.mark.parametrize("xs,k,strides,ks,winograd", [
    ((1, 64, 56, 56), 64, (1, 1), 3, True),
    ((1, 128, 14, 14), 128, (1, 1), 3, True),    # F(2x2) for 14x14
    ((1, 32, 56, 56), 32, (1, 1), 3, False),     # too few channels
    ((1, 64, 56, 56), 64, (2, 2), 3, False),     # stride 2
    ((1, 512, 7, 7), 512, (1, 1), 3, False),     # too few tiles
    ((1, 64, 56, 56), 64, (1, 1), 5, False),     # not 3x3
])
def test_alter_op_layout_picks_winograd_where_it_pays(xs, k, strides, ks, winograd):
    names = _kernels(xs, k, strides, ks)
    assert any("winograd" in n for n in names) == winograd, names


def test_winograd_tile_size_rule():
    assert nn_winograd.winograd_tile_size(64, 64, 56, 56) == 4
    assert nn_winograd.winograd_tile_size(256, 256, 14, 14) == 2
    assert nn_winograd.winograd_tile_size(64, 64, 112, 112) is None  # tiles spill the cache
    assert nn_winograd.winograd_tile_size(128, 128, 112, 112) == 4
