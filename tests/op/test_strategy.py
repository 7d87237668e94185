"""The strategy layer (compiler.op.strategy): which implementation an anchor op gets and with
what configuration, the weight layout that configuration implies (the pass that packs and the
schedule that reads agree by construction, overrides included), configurations as hashable
JSON, and overrides refused with a clear message when they name no field."""
from __future__ import annotations

import json

import numpy as np
import pytest

import compiler as tvm
import runtime
from codegen.options import CodegenOptions
from codegen.schedules import Conv2dConfig, GemmConfig
from codegen.schedules.winograd import WinogradConfig
from compiler import relay
from compiler.driver.build import optimize
from compiler.op.interpreter import evaluate
from compiler.op.nn_winograd import contrib_conv2d_winograd_without_weight_transform
from compiler.ir.expr import Call, Op
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType
from compiler.op.strategy import (CallInfo, PackedConvWeight, PackedDenseWeight, WinogradWeight,
                                  implementations, select)
from compiler.transform import PassContext
from runtime import graph_executor

RNG = np.random.default_rng(3)
HOST = CodegenOptions.host()


def _conv_call(c, k, size, r=3, stride=1, groups=1, constant=True):
    pad = (r // 2,) * 4
    oh = (size + 2 * (r // 2) - r) // stride + 1
    attrs = relay.nn.conv2d(relay.var("x", shape=(1, c, size, size)),
                            relay.var("w", shape=(k, c // groups, r, r)), strides=stride,
                            padding=pad[:2], groups=groups).attrs
    return CallInfo("nn.conv2d", attrs, (TensorType((1, c, size, size), "float32"),
                                         TensorType((k, c // groups, r, r), "float32")),
                    TensorType((1, k, oh, oh), "float32"),
                    frozenset({1}) if constant else frozenset())


def test_conv2d_choices_follow_the_default_heuristics():
    winograd = select(_conv_call(128, 128, 28), HOST)
    assert winograd.implementation.name == "conv2d_nchw.winograd"
    assert winograd.weight_layout() == WinogradWeight(4)
    direct = select(_conv_call(32, 32, 28), HOST)  # too few channels for Winograd
    assert direct.implementation.name == "conv2d_nchw.direct"
    assert direct.weight_layout() == PackedConvWeight(1, direct.config.channel_block)
    plain = select(_conv_call(128, 128, 28, constant=False), HOST)  # no constant weight
    assert plain.implementation.name == "conv2d_nchw.direct" and plain.weight_layout() is None
    depthwise = select(_conv_call(32, 32, 28, groups=32), HOST)
    assert depthwise.implementation.name == "conv2d_nchw.depthwise"
    assert depthwise.weight_layout() is None
    assert select(CallInfo("nn.conv2d", _conv_call(8, 8, 8).attrs,
                           (TensorType((1, 8, 8, 8), "float16"),
                            TensorType((8, 8, 3, 3), "float16")),
                           TensorType((1, 8, 8, 8), "float16")), HOST) is None  # generic rule


def test_configurations_are_hashable_json_and_resolved():
    choice = select(_conv_call(48, 96, 28), HOST)
    config = choice.config
    assert hash(config) == hash(Conv2dConfig.from_json(json.loads(json.dumps(config.to_json()))))
    assert Conv2dConfig.from_json(config.to_json()) == config
    assert config.algorithm == "direct" and config.tile_pixels and config.channel_block
    key = json.loads(choice.key())
    assert key[0] == "conv2d_nchw.direct" and key[1][0] == "conv2d_nchw"
    assert key[2]["channel_block"] == config.channel_block
    gemm = GemmConfig(tile_rows=8, tile_columns=32)
    assert WinogradConfig.from_json({"gemm": gemm.to_json()}).gemm == gemm
    assert set(implementations()) >= {"conv2d_nchw.direct", "conv2d_nchw.winograd", "dense.gemm",
                                      "dense.gemv", "batch_matmul.gemm", "pool2d_nchw.window",
                                      "conv2d_nchwc.direct", "softmax.rows"}


def test_overrides_are_given_fields_and_checked():
    options = CodegenOptions.host(schedule_config={"conv2d_nchw.direct": {"tile_pixels": 4,
                                                                          "row_tile": False}})
    config = select(_conv_call(48, 96, 28), options).config
    assert (config.tile_pixels, config.row_tile) == (4, False)
    bad = CodegenOptions.host(schedule_config={"conv2d_nchw.direct": {"tile_pixel": 4}})
    with pytest.raises(ValueError, match=r"conv2d_nchw.direct.*unknown field 'tile_pixel'"):
        select(_conv_call(48, 96, 28), bad)
    wrong = CodegenOptions.host(schedule_config={"conv2d_nchw.direct": {"algorithm": "fft"}})
    with pytest.raises(ValueError, match="algorithm 'fft'"):
        select(_conv_call(48, 96, 28), wrong)


def test_dense_packs_for_the_implementation_it_will_run():
    def dense(m):
        return CallInfo("nn.dense", relay.nn.dense(relay.var("x", shape=(m, 256)),
                                                   relay.var("w", shape=(100, 256))).attrs,
                        (TensorType((m, 256), "float32"), TensorType((100, 256), "float32")),
                        TensorType((m, 100), "float32"), frozenset({1}))
    gemv, gemm = select(dense(1), HOST), select(dense(64), HOST)
    assert gemv.implementation.name == "dense.gemv" and gemm.implementation.name == "dense.gemm"
    for choice in (gemv, gemm):
        assert isinstance(choice.weight_layout(), PackedDenseWeight)


def _ops(func) -> list:
    return [n for n in post_order(func.body) if type(n) is Call and isinstance(n.op, Op)]


@pytest.mark.parametrize("c,overrides,op", [
    (48, {"conv2d_nchw.direct": {"channel_block": 16}}, "nn.contrib_conv2d_packed"),
    (128, {"conv2d_nchw.winograd": {"tile_size": 2}},
     "nn.contrib_conv2d_winograd_without_weight_transform"),
])
def test_pass_and_schedule_agree_under_overrides(c, overrides, op):
    """An override of a layout field changes what AlterOpLayout packs and what the schedule
    reads alike: the build runs and matches the reference."""
    x = relay.var("x", shape=(1, c, 28, 28))
    w = RNG.standard_normal((128, c, 3, 3)).astype("float32") / 30
    func = relay.Function([x], relay.nn.relu(relay.nn.conv2d(x, relay.const(w),
                                                             padding=(1, 1))))
    config = {"relayjit.schedule_config": overrides, "relayjit.blocked_layout": False}
    with PassContext(opt_level=3, config=config):
        calls = _ops(optimize(tvm.IRModule.from_expr(func))["main"])
        lib = relay.build(func)
    rewritten = [c for c in calls if c.op.name == op]
    assert rewritten
    if "channel_block" in str(overrides):
        assert rewritten[0].args[1].checked_type.shape[-1] == 16
    else:
        assert rewritten[0].attrs.tile_size == 2
    data = RNG.standard_normal((1, c, 28, 28)).astype("float32")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    gm.run(x=data)
    want = evaluate(func, [data])
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def _info(call) -> CallInfo:
    """The CallInfo of a relay call on typed vars (as the lowering asks: no constants)."""
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(call), call))
    typed = relay.transform.InferType()(mod)["main"].body
    return CallInfo(typed.op.name, typed.attrs, tuple(a.checked_type for a in typed.args),
                    typed.checked_type)


@pytest.mark.parametrize("make, expected", [
    (lambda: relay.nn.dense(relay.var("a", shape=(64, 256)), relay.var("b", shape=(96, 256))),
     "dense.gemm"),
    (lambda: relay.nn.matmul(relay.var("a", shape=(64, 256)), relay.var("b", shape=(256, 96))),
     "matmul.gemm"),
    (lambda: relay.nn.batch_matmul(relay.var("a", shape=(4, 64, 256)),
                                   relay.var("b", shape=(4, 96, 256))), "batch_matmul.gemm"),
    (lambda: relay.nn.conv2d(relay.var("x", shape=(1, 32, 28, 28)),
                             relay.var("w", shape=(32, 1, 3, 3)), padding=(1, 1), groups=32),
     "conv2d_nchw.depthwise"),
    (lambda: contrib_conv2d_winograd_without_weight_transform(
        relay.var("x", shape=(1, 128, 28, 28)), relay.var("u", shape=(6, 6, 128, 128)),
        tile_size=4, padding=(1, 1), channels=128, kernel_size=(3, 3)),
     "conv2d_nchw.winograd"),
    (lambda: relay.nn.max_pool2d(relay.var("x", shape=(1, 16, 28, 28)), pool_size=(3, 3)),
     "pool2d_nchw.window"),
    (lambda: relay.nn.avg_pool2d(relay.var("x", shape=(1, 2, 28, 28, 8)), pool_size=(3, 3),
                                 layout="NCHW8c"), "pool2d_nchwc.window"),
    (lambda: relay.nn.global_max_pool2d(relay.var("x", shape=(1, 2, 7, 7, 8)),
                                        layout="NCHW8c"), "global_pool2d_nchwc"),
])
def test_the_strategy_answers_for_each_anchor_op(make, expected):
    """conv2d (above), dense/matmul, batch_matmul, depthwise, pooling and Winograd each
    select a schedule with a resolved configuration."""
    choice = select(_info(make()), HOST)
    assert choice is not None and choice.implementation.name == expected
    assert not choice.config.unresolved()
