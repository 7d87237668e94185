"""bfloat16 kernels: 16-bit storage, float32 arithmetic rounded per op (ties to even, NaN kept
quiet; float64 through float32, as ml_dtypes), checked bit for bit against ml_dtypes'
bfloat16 (numpy's, through onnx)."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(17)
N = 257


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    nan = np.isnan(want.astype(np.float32))
    assert (np.isnan(got.astype(np.float32)) == nan).all()
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


def _specials() -> np.ndarray:
    """float32 values around every rounding case: ties to even both ways, overflow to inf,
    subnormals, signed zeros, NaN and infinities."""
    base = np.array([1.0, 1.00390625, 1.01171875, -1.00390625, 3.389e38, 3.4e38, -3.4e38,
                     1e-39, -1e-40, 0.0, -0.0, np.inf, -np.inf, np.nan, 0.1, 65504.0],
                    np.float32)
    bits = RNG.integers(0, 2 ** 32, N, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([base, bits.view(np.float32)])


@pytest.mark.parametrize("src", ["float32", "float64", "int32", "float16"])
def test_cast_to_bfloat16_rounds_to_nearest_even(src):
    x = _specials()
    if src == "int32":
        x = RNG.integers(-2 ** 30, 2 ** 30, N).astype(np.int32)
    elif src == "float16":
        with np.errstate(all="ignore"):
            x = x.astype(np.float16)
    elif src == "float64":
        x = x.astype(np.float64) * (1 + RNG.uniform(-1e-9, 1e-9, x.shape))
    A = te.placeholder(x.shape, src, "A")
    out = te.compute(x.shape, lambda i: tir.cast(A[i], "bfloat16"), name="to_bf16")
    with np.errstate(all="ignore"):
        _same(build_te([A], [out])(x)[0], x.astype(BF16))


@pytest.mark.parametrize("dst", ["float32", "float64", "int32", "bool"])
def test_cast_from_bfloat16(dst):
    with np.errstate(all="ignore"):
        x = _specials()[np.isfinite(_specials())].astype(BF16)
    if dst == "int32":
        x = np.clip(x.astype(np.float32), -1e9, 1e9).astype(BF16)
    A = te.placeholder(x.shape, "bfloat16", "A")
    out = te.compute(x.shape, lambda i: tir.cast(A[i], dst), name="from_bf16")
    got = build_te([A], [out])(x)[0]
    np.testing.assert_array_equal(got, x.astype(np.float32).astype(dst))


def test_chain_rounds_after_every_op():
    """A fused chain rounds each stage to bfloat16, as ml_dtypes' per-op numpy."""
    A = te.placeholder((N,), "bfloat16", "A")
    B = te.placeholder((N,), "bfloat16", "B")
    mul = te.compute((N,), lambda i: A[i] * B[i], name="mul")
    add = te.compute((N,), lambda i: mul[i] + A[i], name="add")
    sub = te.compute((N,), lambda i: add[i] - tir.const(0.1, "bfloat16"), name="sub")
    ex = te.compute((N,), lambda i: tir.call("exp", sub[i] / B[i]), name="ex")
    a = (RNG.standard_normal(N) * 2).astype(BF16)
    b = (RNG.standard_normal(N) + 4).astype(BF16)
    with np.errstate(all="ignore"):  # the last stage divides and exponentiates, rounds once
        left = (a * b + a - BF16.type(0.1)).astype(np.float32)
        want = np.exp(left / b.astype(np.float32)).astype(BF16)
    _same(build_te([A, B], [ex])(a, b)[0], want)


def test_reduction_accumulates_in_float32_and_rounds_once():
    A = te.placeholder((8, 33), "bfloat16", "A")

    def total(i):
        k = te.reduce_axis(33, "k")
        return te.sum(A[i, k], k)
    a = RNG.standard_normal((8, 33)).astype(BF16)
    got = build_te([A], [te.compute((8,), total, name="sum")])(a)[0]
    _same(got, a.astype(np.float32).sum(axis=1).astype(BF16))


def test_relay_program_through_the_graph_executor():
    """bfloat16 inputs, parameters and outputs through relay.build and the runtime."""
    from compiler import relay
    from runtime import cpu, graph_executor
    x = relay.var("x", shape=(4, 5), dtype="bfloat16")
    w = relay.var("w", shape=(4, 5), dtype="bfloat16")
    body = relay.cast(relay.maximum(relay.multiply(x, w), relay.const(0.5, "bfloat16")),
                      "float32")
    mod = relay.IRModule.from_expr(relay.Function([x, w], relay.Tuple([body, relay.abs(x)])))
    wv = RNG.standard_normal((4, 5)).astype(BF16)
    lib = relay.build(mod, target="llvm", params={"w": wv})
    module = graph_executor.GraphModule(lib["default"](cpu(0)))
    xv = RNG.standard_normal((4, 5)).astype(BF16)
    module.run(x=xv)
    want = np.maximum(xv * wv, BF16.type(0.5)).astype(np.float32)
    np.testing.assert_array_equal(module.get_output(0).numpy(), want)
    _same(module.get_output(1).numpy(), np.abs(xv))
