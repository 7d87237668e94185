"""The dense family's micro tile width (codegen.schedules.gemm_config.tile_columns): rows of three
vectors (8 x 48) on AVX-512 where they pad N no more than two do, through every path that
reaches them (dense, matmul; batch_matmul and pre-packed dense in test_schedule_gemm_blocks),
against numpy over edge shapes: m, n, k not multiples of the tile, k = 1, several K blocks,
batches, transposed operands and an epilogue reading C back (bias + residual)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te, get_assembly
from codegen.llvm.microkernels import Gemm, GemmRows, Gemv
from codegen.lower import lower
from codegen.schedules import dense, dense_gemv, matmul
from codegen.schedules.gemm_config import dense_pack_geometry, tile_columns

from tests.schedule_helpers import dense_pack, gemm_config, host, microkernels_in

RNG = np.random.default_rng(23)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("n", [1, 16, 32, 40, 48, 64, 96, 100, 128, 512, 768, 1024, 3072])
def test_tile_columns_pad_least(n: int) -> None:
    pad = lambda nr: -(-n // nr) * nr  # noqa: E731
    assert tile_columns(n, 8) == 16
    nr = tile_columns(n, 16)
    assert nr in (32, 48) and pad(nr) <= pad(32) and (nr == 48) == (pad(48) <= pad(32))
    assert dense_pack_geometry(n, 64, gemm_config(13, n, 64, 16))[2] == nr
    assert gemm_config(13, n, 64, 16).tile() == ((8, 48) if nr == 48 else (8, 32))


@pytest.mark.parametrize("m,n,k", [(8, 48, 64), (9, 50, 1), (17, 96, 70), (3, 100, 33),
                                   (40, 145, 1025), (128, 144, 2050)])
def test_dense_wide_tile_residual_epilogue(m: int, n: int, k: int, width: int) -> None:
    """dense + bias + a residual input, fused into the tile's store (the epilogue reads C)."""
    x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
    bias, res = te.placeholder((n,), name="bias"), te.placeholder((m, n), name="res")
    d = dense(x, w, options=host())
    y = te.compute((m, n), lambda i, j: d[i, j] + bias[j] + res[i, j], name="epi")
    run = build_te([x, w, bias, res], [y], "dense_wide")
    mr, nr = gemm_config(m, n, k, width).tile()
    assert Gemm(mr, nr, width).symbol in str(run.primfunc)
    a, b, c, r = _f32(m, k), _f32(n, k), _f32(n), _f32(m, n)
    want = a.astype("f8") @ b.T.astype("f8") + c + r
    np.testing.assert_allclose(run(a, b, c, r)[0], want, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_matmul_wide_tile(ta: bool, tb: bool, width: int) -> None:
    m, n, k = 19, 97, 45
    x = te.placeholder((k, m) if ta else (m, k), name="a")
    y = te.placeholder((n, k) if tb else (k, n), name="b")
    run = build_te([x, y], [matmul(x, y, ta, tb, options=host())], "matmul_wide")
    a, b = _f32(*x.shape), _f32(*y.shape)
    want = (a.T if ta else a).astype("f8") @ (b.T if tb else b).astype("f8")
    np.testing.assert_allclose(run(a, b)[0], want, rtol=1e-4, atol=2e-4)


def test_wide_kernels_do_not_spill() -> None:
    """8 x 48 (24 zmm accumulators + 3 B vectors + a broadcast of 32) packed and in place, and
    the 48-wide matrix-vector kernel: no vector register goes to the stack; the only stack
    accesses load the arguments SysV passes there."""
    from runtime.target import host_info

    if "+avx512f" not in host_info().features.split(","):
        pytest.skip("host has no AVX-512")
    x, w = te.placeholder((13, 64), name="x"), te.placeholder((96, 64), name="w")
    v, wp = te.placeholder((1, 64), name="v"), te.placeholder((2, 64, 48), name="wp")
    asm = get_assembly([lower("dense_wide_asm", [x, w], [dense(x, w, options=host(16))]),
                        lower("gemv_wide_asm", [v, wp],
                              [dense_gemv(v, wp, 96, options=host(16))])],
                       options=host(16))
    for name in (Gemm(8, 48, 16).symbol, GemmRows(8, 48, 16).symbol, Gemv(48, 16, 2).symbol):
        body = asm[asm.index(f"{name}:"):]
        body = body[:body.index(".Lfunc_end")]
        assert "zmm" in body
        stack = [ln.strip() for ln in body.splitlines() if "%rsp" in ln]
        assert all(re.fullmatch(r"movq\s+\d+\(%rsp\), %r\w+", ln) for ln in stack), \
            f"{name} spills: {stack}"


@pytest.mark.parametrize("lead", [(1, 13), (3, 1, 5), (2, 3, 4), (1, 1, 9), (17, 1)])
def test_dense_leading_dims_epilogue(lead: tuple, width: int) -> None:
    """x[..., K] with leading dims of 1 and several non-1 dims: the fused epilogue indexes
    the output and a residual input by the unflattened row (dims of 1 at index 0)."""
    k, n = 37, 100
    x, w = te.placeholder((*lead, k), name="x"), te.placeholder((n, k), name="w")
    res = te.placeholder((*lead, n), name="res")
    d = dense(x, w, options=host())
    y = te.compute(d.shape, lambda *i: d[i] * 2.0 + res[i], name="epi")
    run = build_te([x, w, res], [y], "dense_lead")
    a, b, r = _f32(*lead, k), _f32(n, k), _f32(*lead, n)
    want = np.matmul(a.astype("f8"), b.T.astype("f8")) * 2 + r
    np.testing.assert_allclose(run(a, b, r)[0], want, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("n", [20, 96, 100])
def test_gemv_panels_a_call_by_width(n: int, width: int) -> None:
    """AVX-512 computes two panels a GEMV call (an odd last one alone); AVX2 one, its 16 ymm
    registers holding one panel's accumulators only."""
    k = 64
    nt, kp, nr = dense_pack(1, n, k)
    x, wp = te.placeholder((1, k), name="x"), te.placeholder((nt, kp, nr), name="wp")
    text = str(lower("gemv_calls", [x, wp], [dense_gemv(x, wp, n, options=host())]).body)
    called = set(microkernels_in(text, Gemv))
    pairs = {Gemv(nr, width, 2)} if width == 16 and nt > 1 else set()
    single = {Gemv(nr, width)} if width == 8 or nt % 2 else set()
    assert called == pairs | single, called
