"""Every setting that changes generated code changes the keys it is cached under, one anchor
op at a time: each strategy implementation's configuration override (relayjit.schedule_config)
changes the kernel-cache key of a program that runs that implementation, and the pass configs
that change which kernels are made (relayjit.blocked_layout_guard,
relayjit.fake_quantization_to_integer) and relay.qnn.op.requantize_config change both the
kernel key and the build key. tests/build/test_build_cache.py covers the CodegenOptions fields,
the target, opt_level and disabled passes."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import jit
from codegen.options import CodegenOptions
from compiler import relay
from compiler.driver import build as build_module, build_cache
from compiler.ir.module import IRModule
from compiler.ir.parser import parse
from compiler.op.nn_recurrent import contrib_recurrent_layer
from compiler.op.strategy import implementations
from compiler.target import Target
from compiler.transform import PassContext

RNG = np.random.default_rng(5)
NCHW = {"relayjit.blocked_layout": False}


def _const(*shape):
    return relay.const(RNG.standard_normal(shape).astype("float32") / 10)


def _conv(x, c, k, groups=1):
    return relay.nn.conv2d(x, _const(k, c // groups, 3, 3), padding=(1, 1), channels=k,
                           kernel_size=(3, 3), groups=groups)


def _blocked(x):
    """Two 3x3 convs at 14x14: ConvertBlockedLayout carries them in NCHW<x>c."""
    return relay.nn.relu(_conv(relay.nn.relu(_conv(x, 64, 64)), 64, 64))


def _program(kind: str) -> IRModule:
    x = relay.var("x", shape=(1, 64, 28, 28))
    small = relay.var("x", shape=(1, 64, 14, 14))
    if kind == "winograd":
        body = _conv(relay.var("x", shape=(1, 128, 28, 28)), 128, 128)
        x = body.args[0]
    elif kind == "depthwise":
        body = _conv(x, 64, 64, groups=64)
    elif kind == "pool":
        body = relay.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    elif kind == "blocked_pool":
        body = relay.nn.avg_pool2d(_blocked(small), pool_size=(3, 3), strides=(2, 2),
                                   padding=(1, 1))
    elif kind == "global_pool":
        body = relay.nn.global_avg_pool2d(_blocked(small))
    elif kind == "blocked_depthwise":
        body = _conv(_blocked(small), 64, 64, groups=64)
    elif kind == "transpose":
        body = relay.nn.conv2d_transpose(x, _const(64, 32, 4, 4), strides=(2, 2),
                                         padding=(1, 1), channels=32, kernel_size=(4, 4))
    elif kind == "matmul":
        x = relay.var("x", shape=(64, 256))
        body = relay.nn.matmul(x, relay.var("y", shape=(256, 96)))
    elif kind == "batch_matmul":
        x = relay.var("x", shape=(4, 64, 256))
        body = relay.nn.batch_matmul(x, relay.var("y", shape=(4, 96, 256)))
    elif kind == "softmax":
        x = relay.var("x", shape=(64, 256))
        body = relay.nn.softmax(x)
    elif kind == "layer_norm":
        x = relay.var("x", shape=(64, 256))
        # as the ONNX frontend writes it: FuseLayerNorm makes it one nn.layer_norm
        centered = relay.subtract(x, relay.mean(x, axis=-1, keepdims=True))
        variance = relay.mean(relay.multiply(centered, centered), axis=-1, keepdims=True)
        body = relay.divide(centered, relay.sqrt(relay.add(variance, relay.const(1e-5))))
    elif kind == "recurrent":  # an LSTM layer's time loop, R constant (packed for it)
        hidden = 32
        f32 = lambda *s: relay.const(RNG.standard_normal(s).astype("float32"))  # noqa: E731
        body = relay.TupleGetItem(contrib_recurrent_layer(
            relay.var("xw", shape=(4, 1, 4 * hidden)), f32(4 * hidden, hidden),
            relay.var("h0", shape=(1, hidden)), relay.var("c0", shape=(1, hidden)),
            f32(4 * hidden), f32(3 * hidden), relay.const(np.array([4], "int32")),
            mode="LSTM", hidden_size=hidden), 0)
    elif kind.startswith("int8_"):  # QNN contractions: the int8 kernels
        body = _int8(kind)
    else:
        raise AssertionError(kind)
    return IRModule.from_expr(relay.Function(relay.analysis.free_vars(body), body))


def _int8(kind: str):
    s8 = lambda *s: relay.const(RNG.integers(-128, 128, s).astype("int8"))  # noqa: E731
    zero, one = relay.const(0), relay.const(1.0)
    if kind == "int8_dense":
        return relay.qnn.op.dense(relay.var("x", shape=(64, 256), dtype="uint8"), s8(96, 256),
                                  relay.const(3), zero, one, one, units=96)
    if kind == "int8_conv":
        return relay.qnn.op.conv2d(relay.var("x", shape=(1, 64, 28, 28), dtype="uint8"),
                                   s8(64, 64, 3, 3), relay.const(3), zero, one, one,
                                   kernel_size=(3, 3), channels=64, padding=(1, 1))
    return relay.qnn.op.batch_matmul(relay.var("x", shape=(4, 64, 256), dtype="uint8"),
                                     relay.var("y", shape=(4, 96, 256), dtype="int8"),
                                     relay.const(3), zero, one, one)


def _kernel_key(mod: IRModule, options: CodegenOptions, **config) -> str:
    """The kernel-cache key of `mod`'s kernels, lowered as relay.build does."""
    with PassContext(opt_level=3, config=config), \
            build_module.build_target(Target("llvm"), options):
        _, funcs = build_module.lower_module(build_module.optimize(mod)["main"], "default",
                                             options)
    return jit.structural_key(funcs, options, 3)


# (implementation, program, pass config, an override that differs from its default there)
OVERRIDES = [
    ("conv2d_nchw.winograd", "winograd", NCHW, {"tile_size": 2}),
    ("conv2d_nchw.depthwise", "depthwise", NCHW, {"row_block": 2}),
    ("pool2d_nchw.window", "pool", NCHW, {"row_block": 2}),
    ("pool2d_nchwc.window", "blocked_pool", {}, {"tile_pixels": 2}),
    ("global_pool2d_nchwc", "global_pool", {}, {"global_chunk": 2}),
    ("depthwise_conv2d_nchwc.window", "blocked_depthwise", {}, {"tile_pixels": 2}),
    ("conv2d_transpose_nchw.gemm", "transpose", NCHW, {"k_block": 16}),
    ("matmul.gemm", "matmul", {}, {"k_block": 32}),
    ("batch_matmul.gemm", "batch_matmul", {}, {"k_block": 32}),
    ("softmax.rows", "softmax", {}, {"row_group": 2}),
    ("layer_norm.rows", "layer_norm", {}, {"row_group": 2}),
    ("recurrent.gemv", "recurrent", {}, {"panels": 3}),
    ("dense_int8.gemm", "int8_dense", {}, {"tile_rows": 4}),
    ("conv2d_int8.direct", "int8_conv", {}, {"tile_rows": 4}),
    ("batch_matmul_int8.gemm", "int8_batch_matmul", {}, {"tile_rows": 4}),
]


@pytest.mark.parametrize("name, kind, config, override", OVERRIDES, ids=[o[0] for o in OVERRIDES])
def test_each_implementations_configuration_is_in_the_kernel_key(name, kind, config, override):
    assert name in implementations()
    base = build_module.codegen_options_for(Target("llvm"))
    mod = _program(kind)
    changed = CodegenOptions.for_cpu(base.cpu, base.vector_width,
                                     schedule_config={name: override})
    assert _kernel_key(mod, changed, **config) != _kernel_key(mod, base, **config)


def _qdq_program() -> IRModule:
    """dequantize -> conv -> relu -> quantize: FakeQuantizationToInteger makes it integer."""
    x = relay.var("x", shape=(1, 8, 8, 8), dtype="int8")
    w = relay.const(RNG.integers(-20, 20, (8, 8, 3, 3)).astype("int8"))
    scale, zero = relay.const(np.float32(0.05)), relay.const(np.int32(0))
    y = relay.nn.conv2d(relay.qnn.op.dequantize(x, scale, zero),
                        relay.qnn.op.dequantize(w, scale, zero), padding=(1, 1), channels=8,
                        kernel_size=(3, 3))
    y = relay.qnn.op.quantize(relay.nn.relu(y), relay.const(np.float32(0.1)), zero)
    return IRModule.from_expr(relay.Function([x], y))


def _requantize_program() -> IRModule:
    """A requantize whose rounding is left to requantize_config (as text can say)."""
    return parse("""
        def @main(%x: Tensor[(64), int32]) {
          qnn.requantize(%x, 0.3f, 0, 0.7f, 0, rounding="None", compute_dtype="None")
        }""")


def _build_key(mod: IRModule, **config) -> str:
    with PassContext(opt_level=3, config=config):
        return build_cache.build_key(mod, build_module.codegen_options_for(Target("llvm")),
                                     "default")


def test_pass_configs_and_requantize_config_are_in_both_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAYJIT_BUILD_CACHE", "1")
    options = build_module.codegen_options_for(Target("llvm"))
    x = relay.var("x", shape=(1, 64, 14, 14))
    two_convs = IRModule.from_expr(relay.Function([x], _blocked(x)))
    never_blocked = {"relayjit.blocked_layout_guard": {"max_transform_elements_per_flop": 0.0}}
    float_qdq = {"relayjit.fake_quantization_to_integer": False}
    for mod, config in [(two_convs, never_blocked), (_qdq_program(), float_qdq)]:
        assert _kernel_key(mod, options, **config) != _kernel_key(mod, options)
        assert _build_key(mod, **config) != _build_key(mod)
    requantize = _requantize_program()
    kernel, build = _kernel_key(requantize, options), _build_key(requantize)
    with relay.qnn.op.requantize_config(rounding="TONEAREST"):
        assert _kernel_key(requantize, options) != kernel
        assert _build_key(requantize) != build
    assert _build_key(requantize) == build  # and the key is stable
