"""GEMM schedules (dense, batch_matmul, matmul) against numpy, with fused epilogues."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te, get_assembly, get_llvm_ir
from codegen.lower import lower
from codegen.schedules import batch_matmul, dense, matmul

from tests.schedule_helpers import host

RNG = np.random.default_rng(7)
SIZES = [1, 3, 7, 16, 17, 33]


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("m", SIZES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("k", [1, 3, 17, 33])
def test_dense_edges(m: int, n: int, k: int, width: int) -> None:
    x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
    run = build_te([x, w], [dense(x, w, options=host())], "dense")
    a, b = _f32(m, k), _f32(n, k)
    np.testing.assert_allclose(run(a, b)[0], a @ b.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,n,k", [(150, 70, 600), (300, 33, 257), (13, 1000, 40)])
def test_dense_blocked(m: int, n: int, k: int, width: int) -> None:
    """Several K blocks (accumulation in C), M blocks and N edges."""
    x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
    run = build_te([x, w], [dense(x, w, options=host())], "dense")
    a, b = _f32(m, k), _f32(n, k)
    np.testing.assert_allclose(run(a, b)[0], a @ b.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,n,k", [(7, 17, 33), (40, 50, 600), (1, 10, 3)])
def test_dense_fused_bias_relu_residual_clip(m: int, n: int, k: int, width: int) -> None:
    x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
    bias, res = te.placeholder((n,), name="bias"), te.placeholder((m, n), name="res")
    d = dense(x, w, options=host())
    y = te.compute((m, n), lambda i, j: tir.max(d[i, j] + bias[j], tir.const(0.0)) + res[i, j],
                   name="epi")
    z = te.compute((m, n), lambda i, j: tir.min(tir.max(y[i, j], tir.const(-1.0)),
                                                tir.const(2.0)), name="clip")
    run = build_te([x, w, bias, res], [z], "dense_epi")
    text = str(run.primfunc)
    assert "T_dense[" not in text, "the epilogue was not fused into the GEMM"
    a, b, c, r = _f32(m, k), _f32(n, k), _f32(n), _f32(m, n)
    want = np.clip(np.maximum(a @ b.T + c, 0) + r, -1, 2)
    np.testing.assert_allclose(run(a, b, c, r)[0], want, rtol=1e-4, atol=1e-4)


def test_dense_nd_input() -> None:
    x, w = te.placeholder((2, 5, 9), name="x"), te.placeholder((7, 9), name="w")
    bias = te.placeholder((7,), name="bias")
    d = dense(x, w, options=host())
    y = te.compute(d.shape, lambda i, j, n: d[i, j, n] + bias[n], name="bias_add")
    run = build_te([x, w, bias], [y], "dense3")
    a, b, c = _f32(2, 5, 9), _f32(7, 9), _f32(7)
    np.testing.assert_allclose(run(a, b, c)[0], a @ b.T + c, rtol=1e-5, atol=1e-5)


def test_unfused_consumer_still_correct() -> None:
    """A consumer that reads the GEMM at other indices (transpose) is not fused."""
    x, w = te.placeholder((5, 8), name="x"), te.placeholder((6, 8), name="w")
    d = dense(x, w, options=host())
    t = te.compute((6, 5), lambda i, j: d[j, i] * 2.0, name="tr")
    run = build_te([x, w], [t], "dense_t")
    a, b = _f32(5, 8), _f32(6, 8)
    np.testing.assert_allclose(run(a, b)[0], (a @ b.T).T * 2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("bx,by", [(3, 3), (1, 2), (2, 1)])
def test_batch_matmul(ta: bool, tb: bool, bx: int, by: int, width: int) -> None:
    m, n, k = 7, 19, 13
    xs = (bx, k, m) if ta else (bx, m, k)
    ys = (by, n, k) if tb else (by, k, n)
    x, y = te.placeholder(xs, name="x"), te.placeholder(ys, name="y")
    run = build_te([x, y], [batch_matmul(x, y, ta, tb, options=host())], "bmm")
    a, b = _f32(*xs), _f32(*ys)
    want = np.matmul(a.transpose(0, 2, 1) if ta else a, b.transpose(0, 2, 1) if tb else b)
    np.testing.assert_allclose(run(a, b)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul(ta: bool, tb: bool) -> None:
    m, n, k = 17, 33, 300
    a_s, b_s = ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))
    a, b = te.placeholder(a_s, name="a"), te.placeholder(b_s, name="b")
    run = build_te([a, b], [matmul(a, b, ta, tb, options=host())], "mm")
    x, y = _f32(*a_s), _f32(*b_s)
    want = (x.T if ta else x) @ (y.T if tb else y)
    np.testing.assert_allclose(run(x, y)[0], want, rtol=1e-4, atol=1e-4)


def test_micro_kernel_is_vector_fma() -> None:
    x, w = te.placeholder((64, 64), name="x"), te.placeholder((64, 64), name="w")
    func = lower("dense_fma", [x, w], [dense(x, w, options=host(8))])
    ir_text = get_llvm_ir([func], options=host())
    assert "@llvm.fma.v8f32(<8 x float>" in ir_text
    asm = get_assembly([func], options=host())
    body = asm[asm.index("relayjit.ukr.gemm_6x16:"):]
    body = body[:body.index(".Lfunc_end")]
    assert body.count("vfmadd231ps\t%ymm") >= 12 * 4, "k loop is not unrolled <8 x float> FMA"
    stack = [ln.strip() for ln in body.splitlines() if "%rsp" in ln]
    # the one stack access allowed: loading b_next, the seventh (SysV: stack) argument
    assert len(stack) == 1 and stack[0].startswith("movq\t8(%rsp), %r"), \
        f"the micro-kernel spills: {stack}"
