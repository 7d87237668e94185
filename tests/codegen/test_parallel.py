"""Parallel loops: outlined bodies on the runtime's pool give the 1-thread result at any thread
count, over odd sizes and extents smaller than the thread count."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_library, build_te
from codegen.parallel import ParallelPolicy, fused_parallel, stage_nest
from codegen.schedules import batch_matmul, conv2d_nchw, dense
from codegen.tir.expr import Load, Var
from codegen.tir.ops import cast
from codegen.tir.stmt import Allocate, Buffer, For, LetStmt, PrimFunc, Store, seq
from runtime import threadpool

from tests.schedule_helpers import eager, host

THREADS = (1, 2, 3, 8)
RNG = np.random.default_rng(7)


pytestmark = pytest.mark.usefixtures("keep_thread_count")


def _at_each_thread_count(run) -> list:
    outs = []
    for t in THREADS:
        threadpool.set_num_threads(t)
        outs.append(run())
    return outs


def _has_parallel_loop(func: PrimFunc) -> bool:
    return "parallel" in str(func)


@pytest.mark.parametrize("extent", [1, 2, 3, 5, 8, 9, 67])
def test_parallel_loop_extents_around_the_thread_count(extent):
    """Every iteration runs once, with per-chunk heap scratch (> the 64 KB stack limit)."""
    m = 33
    a, b = Buffer("A", (extent, m), "float32"), Buffer("B", (extent, m), "float32")
    i, j = Var("i", "int64"), Var("j", "int64")
    scratch = Buffer("scratch", (20000,), "float32")  # 80 KB: heap, one per chunk
    body = Allocate(scratch, seq(
        For(j, m, Store(scratch, (j,), Load(a, (i, j), "float32") * 3.0), "vectorized"),
        For(j, m, Store(b, (i, j), Load(scratch, (j,), "float32") + 1.0))))
    func = PrimFunc("par_extent", (a, b), For(i, extent, body, "parallel"))
    lib = build_library([func], options=host())
    x = RNG.standard_normal((extent, m)).astype("f4")

    def run():
        out = np.full_like(x, np.nan)
        lib["par_extent"](x, out)
        return out

    for out in _at_each_thread_count(run):
        np.testing.assert_array_equal(out, x * 3 + 1)


def test_nested_parallel_loops_run_every_iteration():
    """An inner parallel loop finds the pool busy and runs its range in the calling task."""
    a = Buffer("A", (6, 50), "float32")
    i, j = Var("i", "int64"), Var("j", "int64")
    inner = For(j, 50, Store(a, (i, j), cast(i * 100 + j, "float32")), "parallel")
    lib = build_library([PrimFunc("nested", (a,), For(i, 6, inner, "parallel"))], options=host())
    expected = (np.arange(6)[:, None] * 100 + np.arange(50)).astype("f4")
    for t in THREADS:
        threadpool.set_num_threads(t)
        out = np.full((6, 50), -1, "f4")
        lib["nested"](out)
        np.testing.assert_array_equal(out, expected)


def test_fused_parallel_binds_every_index():
    """fused_parallel over (3, 1, 5) visits each (i, j, k) exactly once."""
    shape = (3, 1, 5)
    out = Buffer("O", shape, "int64")
    vs = [Var(n, "int64") for n in "ijk"]
    flat = (vs[0] * 1 + vs[1]) * 5 + vs[2]
    stmt = fused_parallel(vs, list(shape), Store(out, tuple(vs), flat), "f")
    assert isinstance(stmt, For) and stmt.kind == "parallel" and stmt.extent == 15
    lib = build_library([PrimFunc("fused", (out,), stmt)], options=host())
    for t in THREADS:
        threadpool.set_num_threads(t)
        o = np.full(shape, -1, dtype=np.int64)
        lib["fused"](o)
        np.testing.assert_array_equal(o, np.arange(15).reshape(shape))


def test_stage_nest_goes_parallel_only_with_work():
    axes = tuple(Var(f"a{d}", "int64") for d in range(3))
    buf = Buffer("O", (2, 3, 4), "float32")
    policy = ParallelPolicy()
    small = stage_nest(axes, (2, 3, 4), Store(buf, axes, Load(buf, axes, "float32")), True,
                       policy)
    assert "parallel" not in str(PrimFunc("s", (buf,), small))
    big_shape = (1, 1, 1 << 16)
    big = Buffer("O", big_shape, "float32")
    nest = stage_nest(axes, big_shape, Store(big, axes, Load(big, axes, "float32")), True,
                      policy)
    text = str(PrimFunc("b", (big,), nest))
    assert "parallel" in text and "vectorized" in text  # the innermost axis split in chunks
    assert isinstance(nest, For) or isinstance(nest, LetStmt)


@pytest.mark.parametrize("shape", [(1, 64, 56, 56), (3, 7, 41, 47), (1, 1, 1 << 18), (5, 9999)])
def test_elementwise_stage_is_bitwise_equal_across_threads(shape):
    a, b = te.placeholder(shape, name="a"), te.placeholder(shape, name="b")
    c = te.compute(shape, lambda *i: a[i] * b[i] + 1.0, name="c")
    run = build_te([a, b], [c])
    x, y = (RNG.standard_normal(shape).astype("f4") for _ in range(2))
    assert _has_parallel_loop(run.primfunc)
    outs = _at_each_thread_count(lambda: run(x, y)[0])
    for out in outs:
        np.testing.assert_array_equal(out, outs[0])
    np.testing.assert_allclose(outs[0], x * y + 1, rtol=1e-6)


def test_reduction_stage_is_bitwise_equal_across_threads():
    shape = (37, 3001)
    a = te.placeholder(shape, name="a")
    k = te.reduce_axis(shape[1], "k")
    s = te.compute((shape[0],), lambda i: te.sum(a[i, k], axis=k), name="s")
    run = build_te([a], [s])
    assert _has_parallel_loop(run.primfunc)
    x = RNG.standard_normal(shape).astype("f4")
    outs = _at_each_thread_count(lambda: run(x)[0])
    for out in outs:
        np.testing.assert_array_equal(out, outs[0])
    np.testing.assert_allclose(outs[0], x.sum(axis=1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m,n,k", [(97, 131, 70), (2, 515, 33), (300, 17, 260), (1, 1000, 96)])
def test_dense_is_bitwise_equal_across_threads(m, n, k):
    x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
    run = build_te([x, w], [dense(x, w, options=eager())])
    assert _has_parallel_loop(run.primfunc)
    xa = RNG.standard_normal((m, k)).astype("f4")
    wa = RNG.standard_normal((n, k)).astype("f4")
    outs = _at_each_thread_count(lambda: run(xa, wa)[0])
    for out in outs:
        np.testing.assert_array_equal(out, outs[0])
    np.testing.assert_allclose(outs[0], xa @ wa.T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("batch", [3, 12])
def test_batch_matmul_is_bitwise_equal_across_threads(batch):
    x, y = te.placeholder((batch, 45, 64), name="x"), te.placeholder((batch, 50, 64), name="y")
    run = build_te([x, y], [batch_matmul(x, y, options=eager())])
    assert _has_parallel_loop(run.primfunc)
    xa = RNG.standard_normal((batch, 45, 64)).astype("f4")
    ya = RNG.standard_normal((batch, 50, 64)).astype("f4")
    outs = _at_each_thread_count(lambda: run(xa, ya)[0])
    for out in outs:
        np.testing.assert_array_equal(out, outs[0])
    np.testing.assert_allclose(outs[0], xa @ ya.transpose(0, 2, 1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("xs,ws,stride,pad,groups", [
    ((1, 3, 31, 29), (37, 3, 3, 3), 1, 1, 1),
    ((2, 16, 17, 17), (24, 8, 3, 3), 2, 0, 2),
    ((1, 24, 20, 20), (24, 1, 3, 3), 1, 1, 24),
    ((1, 64, 7, 7), (100, 64, 1, 1), 1, 0, 1),
])
def test_conv2d_is_bitwise_equal_across_threads(xs, ws, stride, pad, groups):
    x, w = te.placeholder(xs, name="x"), te.placeholder(ws, name="w")
    run = build_te([x, w], [conv2d_nchw(x, w, (stride, stride), (pad,) * 4, (1, 1), groups, options=eager())])
    assert _has_parallel_loop(run.primfunc)
    xa = RNG.standard_normal(xs).astype("f4")
    wa = RNG.standard_normal(ws).astype("f4")
    outs = _at_each_thread_count(lambda: run(xa, wa)[0])
    for out in outs:
        np.testing.assert_array_equal(out, outs[0])
    ref = _conv_reference(xa, wa, stride, pad, groups)
    np.testing.assert_allclose(outs[0], ref, rtol=1e-4, atol=1e-3)


def _conv_reference(x, w, stride, pad, groups):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - r) // stride + 1
    ow = (wd + 2 * pad - s) // stride + 1
    out = np.zeros((n, k, oh, ow), np.float64)
    kg = k // groups
    for g in range(groups):
        for rr in range(r):
            for ss in range(s):
                patch = xp[:, g * cg:(g + 1) * cg, rr:rr + stride * oh:stride,
                           ss:ss + stride * ow:stride]
                out[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch, w[g * kg:(g + 1) * kg, :, rr, ss])
    return out
