"""GEMM blocking (codegen.schedules.gemm): K and M block choices at both vector widths, and
products deep enough to take several K blocks (accumulation into C, fused epilogue on the last
block), plain and on pre-packed weights, against numpy."""
from __future__ import annotations

import re

import numpy as np
import pytest

import runtime
from codegen import te, tir
from codegen.jit import build_te
from codegen.schedules import dense, dense_pack_geometry
from codegen.llvm.microkernels import Gemm, GemmRows
from codegen.schedules.gemm_config import (
    A_BLOCK_BYTES, K_BLOCK, M_BLOCK_ROWS, block_rows, k_blocks, rows_per_tile,
)
from compiler import relay
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime import graph_executor

from tests.schedule_helpers import gemm_config, host

RNG = np.random.default_rng(11)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("k", [1, 2, 255, 256, 257, 768, 1023, 1024, 1025, 3072, 5000])
def test_k_blocks_cover_k_with_little_padding(vw: int, k: int) -> None:
    nb, kc = k_blocks(k, K_BLOCK[vw])
    assert nb * kc >= k and nb * kc - k < nb
    assert (nb - 1) * kc < k  # no block is all padding
    assert dense_pack_geometry(100, k, gemm_config(4, 100, k, vw))[1] == nb * kc


@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("kc", [1, 64, 256, 700, 1024, 4096])
def test_block_rows_whole_tiles_within_budget(vw: int, kc: int) -> None:
    for mr in {6, 8, 12}:
        rows = block_rows(kc, mr, gemm_config(100, 100, kc, vw))
        assert rows % mr == 0 and mr <= rows <= max(mr, M_BLOCK_ROWS[vw])
        assert rows == mr or rows * kc * 4 <= A_BLOCK_BYTES


@pytest.mark.parametrize("m,n,k", [(13, 33, 1100), (129, 70, 2100), (1, 40, 1500), (8, 32, 2048),
                                   (24, 50, 2050)])
def test_dense_several_k_blocks_with_epilogue(m: int, n: int, k: int, width: int) -> None:
    """K past one block at either width: the blocks accumulate in C, bias + relu fused into
    the last block's store, edge rows and columns through the scratch tile."""
    x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
    bias = te.placeholder((n,), name="bias")
    d = dense(x, w, options=host())
    y = te.compute((m, n), lambda i, j: tir.max(d[i, j] + bias[j], tir.const(0.0)), name="epi")
    run = build_te([x, w, bias], [y], "dense_deep")
    assert "T_dense[" not in str(run.primfunc), "the epilogue was not fused into the GEMM"
    a, b, c = _f32(m, k), _f32(n, k), _f32(n)
    want = np.maximum(a.astype("f8") @ b.T.astype("f8") + c, 0)
    np.testing.assert_allclose(run(a, b, c)[0], want, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("m", [1, 4, 5, 13, 40])
@pytest.mark.parametrize("n,k", [(45, 1), (45, 777), (45, 2050), (100, 1), (96, 777),
                                 (150, 2050), (20, 5)])
def test_packed_dense_k_blocks(m: int, n: int, k: int, width: int) -> None:
    """Constant-weight dense through the packed panels (AlterOpLayout + FoldConstant), K in
    one block and in several with zero padding (2050 = 3 x 684 - 2), rows 1..40: the GEMM
    tile (m > 4) and the matrix-vector kernel (m <= 4: two panels a call, an odd last panel
    or a single one alone) over 32- and 48-wide panels."""
    x, w, b = _f32(m, k), _f32(n, k), _f32(n)
    xv = relay.var("x", shape=(m, k))
    y = relay.nn.bias_add(relay.nn.dense(xv, relay.const(w)), relay.const(b), axis=-1)
    with PassContext(opt_level=3):
        lib = relay.build(IRModule.from_expr(relay.Function([xv], y)), target="llvm")
    assert "nn.contrib_dense_pack" in lib.get_graph_json(), "the weight was not pre-packed"
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.run(x=x)
    want = x.astype("f8") @ w.T.astype("f8") + b
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("m", [1, 7, 8, 12, 13, 24, 25, 128])
def test_rows_per_tile_pads_least(m: int, width: int) -> None:
    pad = lambda mr: -(-m // mr) * mr  # noqa: E731
    others = (6,) if width == 8 else (8, 12)
    for in_place in (False, True):
        mr = rows_per_tile(m, in_place, width)
        assert all(pad(mr) <= pad(other) for other in others)
    if width == 16:  # ties: 12 rows packed, 8 rows when A can be read in place
        assert rows_per_tile(m, True, width) == (8 if pad(8) <= pad(12) else 12)


@pytest.mark.parametrize("m", [25, 37])
@pytest.mark.parametrize("n", [40, 64])
def test_micro_kernels_prefetch_next_panel_without_spilling(m: int, n: int, width: int) -> None:
    """Both GEMM micro-kernels (packed A; A rows in place) prefetch the next B panel into L2
    (prefetcht1), one per cache line of B the k loop reads, and spill nothing: their only
    stack accesses load the arguments SysV passes on the stack (b_next; lda's kernel: two)."""
    from codegen.jit import get_assembly
    from codegen.lower import lower

    x, w = te.placeholder((m, 64), name="x"), te.placeholder((n, 64), name="w")
    asm = get_assembly([lower("dense_prefetch", [x, w], [dense(x, w, options=host())])],
                       options=host())
    mr, nr = gemm_config(m, n, 64, width).tile()
    for kernel, stack_args in ((Gemm(mr, nr, width), 1), (GemmRows(mr, nr, width), 2)):
        body = asm[asm.index(f"{kernel.symbol}:"):]
        body = body[:body.index(".Lfunc_end")]
        assert body.count("prefetcht1") == 4 * nr * 4 // 64  # 4 unrolled k steps
        stack = [ln.strip() for ln in body.splitlines() if "%rsp" in ln]
        assert all(re.fullmatch(r"movq\s+\d+\(%rsp\), %r\w+", ln) for ln in stack), \
            f"the micro-kernel spills: {stack}"
        assert len({ln.split("(")[0] for ln in stack}) <= stack_args, stack


@pytest.mark.parametrize("m", list(range(1, 14)) + [24, 40])
@pytest.mark.parametrize("k", [1, 70])
def test_dense_rows_in_place_and_partial_tile(m: int, k: int, width: int) -> None:
    """M = 1..13, 24, 40 over whole row tiles (A read in place), a partial one (packed once
    per K block) and column edges (n = 45), bias + relu fused, against numpy."""
    n = 45
    x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
    bias = te.placeholder((n,), name="bias")
    d = dense(x, w, options=host())
    y = te.compute((m, n), lambda i, j: tir.max(d[i, j] + bias[j], tir.const(0.0)), name="epi")
    run = build_te([x, w, bias], [y], "dense_rows")
    a, b, c = _f32(m, k), _f32(n, k), _f32(n)
    want = np.maximum(a.astype("f8") @ b.T.astype("f8") + c, 0)
    np.testing.assert_allclose(run(a, b, c)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta,tb", [(False, True), (False, False), (True, True), (True, False)])
@pytest.mark.parametrize("bx,by", [(3, 3), (1, 4), (4, 1), (5, 1)])
@pytest.mark.parametrize("m,n,k", [(13, 19, 64), (24, 64, 2050), (13, 96, 1), (24, 100, 70)])
def test_batch_matmul_rows_in_place(ta: bool, tb: bool, bx: int, by: int, m: int, n: int,
                                    k: int, width: int) -> None:
    """batch_matmul with A read in place (not transposed) or packed (transposed), batches
    broadcast either way (>= 4 batches: one product per task), several padded K blocks at
    k = 2050, k = 1, and a fused relu, at the tile width tile_columns picks (three vectors
    where they pad N no more than two)."""
    from codegen.schedules import batch_matmul
    from codegen.schedules.gemm_config import tile_columns

    xs = (bx, k, m) if ta else (bx, m, k)
    ys = (by, n, k) if tb else (by, k, n)
    x, y = te.placeholder(xs, name="x"), te.placeholder(ys, name="y")
    mm = batch_matmul(x, y, ta, tb, options=host())
    out = te.compute(mm.shape, lambda b, i, j: tir.max(mm[b, i, j], tir.const(0.0)),
                     name="relu")
    run = build_te([x, y], [out], "bmm_rows")
    assert f"x{tile_columns(n, width)}" in str(run.primfunc)
    a, b = _f32(*xs), _f32(*ys)
    want = np.matmul(a.transpose(0, 2, 1) if ta else a, b.transpose(0, 2, 1) if tb else b,
                     dtype="f8")
    np.testing.assert_allclose(run(a, b)[0], np.maximum(want, 0), rtol=1e-4, atol=2e-4)
