"""Epilogues that change the dtype: an elementwise consumer of another dtype than its anchor
(a cast to float16, a comparison) fuses into the anchor's schedule where that stores each
output element once through the epilogue (mark_epilogue's casts), and computes what numpy
does; elsewhere it stays a stage of its own."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te
from codegen.schedules import (Conv2dConfig, GemmConfig, conv2d_nchw_packed, dense_gemv,
                               dense_pack_geometry, dense_packed)
from codegen.schedules.gemm_config import resolve_gemm
from compiler import relay
from compiler.driver.build import build_target, lower_module, optimize
from compiler.ir.module import IRModule
from compiler.target import Target
from compiler.transform import PassContext
from runtime import cpu
from runtime.graph_executor import GraphModule

from tests.schedule_helpers import conv_pack, dense_pack, host

RNG = np.random.default_rng(25)


def _f32(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _half(t: te.Tensor) -> te.Tensor:
    return te.compute(t.shape, lambda *i: tir.cast(t[i], "float16"), name="half")


def _positive(t: te.Tensor) -> te.Tensor:
    return te.compute(t.shape, lambda *i: t[i] > tir.const(0.0, "float32"), name="positive")


def _fused(run, anchor: str) -> bool:
    """Whether the anchor's result is no buffer of its own (its consumer is its epilogue)."""
    return f"allocate {anchor}[" not in str(run.primfunc)


def _packed_conv(xs, ws, config=None):
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(*ws), name="wp")
    y = conv2d_nchw_packed(x, wp, (1, 1), (1, 1, 1, 1), channels=ws[0], options=host(),
                           config=config, name="anchor")
    return x, wp, y


def _pack_conv_weight(w: np.ndarray, shape: tuple) -> np.ndarray:
    """w [K, C, R, S] in the packed layout [1, K/KB, C, R, S, KB] (zero-padded channels)."""
    _, nkb, c, r, s, kb = shape
    padded = np.zeros((nkb * kb, c, r, s), "float32")
    padded[:w.shape[0]] = w
    return np.ascontiguousarray(padded.reshape(nkb, kb, c, r, s).transpose(0, 2, 3, 4, 1)
                                )[None]


def _ref_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype("float64")
    windows = np.lib.stride_tricks.sliding_window_view(pad, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwrs,kcrs->nkhw", windows, w.astype("float64"))


@pytest.mark.parametrize("algorithm", [None, "rows"], ids=["default", "rows"])
@pytest.mark.parametrize("consumer", ["half", "positive"])
def test_conv_with_a_dtype_changing_epilogue(algorithm, consumer, width):
    xs, ws = (1, 16, 12, 12), (32, 16, 3, 3)
    config = Conv2dConfig(algorithm=algorithm) if algorithm else None
    x, wp, y = _packed_conv(xs, ws, config)
    out = (_half if consumer == "half" else _positive)(y)
    run = build_te([x, wp], [out], f"conv_{consumer}")
    assert _fused(run, "anchor")
    a, w = _f32(*xs), _f32(*ws)
    got = run(a, _pack_conv_weight(w, wp.shape))[0]
    want = _ref_conv(a, w)
    if consumer == "half":
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype("float32"), want, rtol=2e-3, atol=2e-3)
    else:
        assert got.dtype == np.bool_
        sure = np.abs(want) > 1e-3  # float32 rounding may flip a sum within it of 0
        np.testing.assert_array_equal(got[sure], want[sure] > 0)


def _dense_weight(w: np.ndarray, shape: tuple) -> np.ndarray:
    """w [N, K] as packed panels [N/NR, Kp, NR] (zero padding)."""
    nt, kp, nr = shape
    padded = np.zeros((nt * nr, kp), "float32")
    padded[:w.shape[0], :w.shape[1]] = w
    return np.ascontiguousarray(padded.reshape(nt, nr, kp).transpose(0, 2, 1))


@pytest.mark.parametrize("m", [1, 13])  # GEMV, GEMM
@pytest.mark.parametrize("consumer", ["half", "positive"])
def test_dense_with_a_dtype_changing_epilogue(m, consumer, width):
    n, k = 100, 64
    x = te.placeholder((m, k), name="x")
    wp = te.placeholder(dense_pack(m, n, k), name="wp")
    y = (dense_gemv if m == 1 else dense_packed)(x, wp, n, options=host(), name="anchor")
    out = (_half if consumer == "half" else _positive)(y)
    run = build_te([x, wp], [out], f"dense_{consumer}_{m}")
    assert _fused(run, "anchor")
    a, w = _f32(m, k), _f32(n, k)
    got = run(a, _dense_weight(w, wp.shape))[0]
    want = a.astype("float64") @ w.T.astype("float64")
    if consumer == "half":
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype("float32"), want, rtol=2e-3, atol=2e-3)
    else:
        sure = np.abs(want) > 1e-3
        np.testing.assert_array_equal(got[sure], want[sure] > 0)


def test_a_gemm_of_several_k_blocks_keeps_a_cast_apart(width):
    """Several K blocks accumulate in the output: a cast cannot be its epilogue."""
    m, n, k = 13, 40, 96
    config = GemmConfig(k_block=32)
    x = te.placeholder((m, k), name="x")
    geometry = dense_pack_geometry(n, k, resolve_gemm(m, n, k, True, host(), config, wide=True))
    wp = te.placeholder(geometry, name="wp")
    y = dense_packed(x, wp, n, options=host(), config=config, name="anchor")
    run = build_te([x, wp], [_half(y)], "dense_blocks_half")
    assert not _fused(run, "anchor")
    a, w = _f32(m, k), _f32(n, k)
    got = run(a, _dense_weight(w, wp.shape))[0]
    np.testing.assert_allclose(got.astype("float32"), a @ w.T, rtol=2e-3, atol=2e-3)


def test_relay_conv_then_cast_is_one_kernel():
    """relay.build fuses the float16 cast after a conv into the conv's kernel, as the conv
    schedule's epilogue (no float32 copy of the conv's output)."""
    xs, ws = (1, 16, 14, 14), (32, 16, 3, 3)
    w = _f32(*ws)
    x = relay.var("x", shape=xs, dtype="float32")
    y = relay.cast(relay.nn.conv2d(x, relay.const(w), padding=(1, 1), channels=32,
                                   kernel_size=(3, 3)), "float16")
    func = relay.Function([x], y)
    with PassContext(opt_level=3), build_target(Target("llvm")) as options:
        _, (kernel,) = lower_module(optimize(IRModule.from_expr(func))["main"],
                                    options=options)
    assert kernel.params[-1].dtype == "float16" and "allocate T_conv2d[" not in str(kernel)
    with PassContext(opt_level=3):
        factory = relay.build(func, target="llvm")
    kernels = factory.get_lib().function_names
    assert len(kernels) == 1, kernels
    m = GraphModule(factory["default"](cpu()))
    a = _f32(*xs)
    m.set_input("x", a)
    m.run()
    got = m.get_output(0).numpy()
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype("float32"), _ref_conv(a, w), rtol=2e-3, atol=2e-3)
