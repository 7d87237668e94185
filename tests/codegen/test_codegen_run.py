"""Kernels built from tensor expressions, compiled and run, compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te, get_assembly, get_llvm_ir
from codegen.lower import lower

from tests.schedule_helpers import host

RNG = np.random.default_rng(42)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def test_elementwise_chain_is_one_vectorised_loop_nest() -> None:
    A, B = te.placeholder((32, 64), "float32", "A"), te.placeholder((32, 64), "float32", "B")
    C = te.compute(A.shape, lambda i, j: A[i, j] + B[i, j], name="add")
    D = te.compute(A.shape, lambda i, j: C[i, j] * 2.0, name="mul")
    E = te.compute(A.shape, lambda i, j: tir.max(D[i, j], tir.const(0, "float32")), name="relu")
    F = te.compute(A.shape, lambda i, j: tir.exp(E[i, j]) - 1.0, name="expm")
    G = te.compute(A.shape, lambda i, j: tir.sigmoid(F[i, j]), name="sig")
    run = build_te([A, B], [G], "fused5")
    text = str(run.primfunc)
    assert text.count("for (") == 2 and "allocate" not in text, text
    assert "vectorized" in text
    a, b = _f32(32, 64), _f32(32, 64)
    e = np.maximum((a + b) * 2, 0)
    np.testing.assert_allclose(run(a, b)[0], 1 / (1 + np.exp(-(np.exp(e) - 1))), rtol=1e-6)
    ir_text = get_llvm_ir([run.primfunc], options=host())
    assert "<8 x float>" in ir_text or "<16 x float>" in ir_text
    asm = get_assembly([run.primfunc], options=host())
    assert "ymm" in asm or "zmm" in asm


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8", "uint8", "int64"])
def test_broadcast_add(dtype: str) -> None:
    A, B = te.placeholder((3, 1, 5), dtype, "A"), te.placeholder((4, 1), dtype, "B")
    C = te.compute((3, 4, 5), lambda i, j, k: A[i, 0, k] + B[j, 0], name="badd")
    a = (RNG.standard_normal((3, 1, 5)) * 20).astype(dtype)
    b = (RNG.standard_normal((4, 1)) * 20).astype(dtype)
    np.testing.assert_array_equal(build_te([A, B], [C], "badd")(a, b)[0], a + b)


def test_reductions_fed_by_elementwise_producers() -> None:
    A = te.placeholder((7, 33), "float32", "A")
    R = te.compute(A.shape, lambda i, j: tir.fabs(A[i, j]) * 3.0, name="scaled")
    k = te.reduce_axis(33, "k")
    S = te.compute((7,), lambda i: te.sum(R[i, k], axis=k), name="s")
    M = te.compute((7,), lambda i: te.max(R[i, k], axis=k), name="m")
    N = te.compute((7,), lambda i: te.min(R[i, k], axis=k), name="n")
    P = te.compute((7,), lambda i: te.prod(R[i, k] * 0.5, axis=k), name="p")
    I = te.compute((7,), lambda i: te.argmax(R[i, k], axis=k, index_dtype="int32"), name="am")
    J = te.compute((7,), lambda i: te.argmin(A[i, k], axis=k), name="an")
    a = _f32(7, 33)
    s, m, n, p, am, an = build_te([A], [S, M, N, P, I, J], "reds")(a)
    r = np.abs(a) * 3
    np.testing.assert_allclose(s, r.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(m, r.max(1))
    np.testing.assert_array_equal(n, r.min(1))
    np.testing.assert_allclose(p, (r * 0.5).prod(1), rtol=1e-5)
    assert am.dtype == np.int32 and np.array_equal(am, r.argmax(1))
    assert an.dtype == np.int64 and np.array_equal(an, a.argmin(1))


def test_argmax_ties_nan_and_last_index() -> None:
    A = te.placeholder((4, 5), "float32", "A")
    k = te.reduce_axis(5, "k")
    F = te.compute((4,), lambda i: te.argmax(A[i, k], axis=k), name="first")
    L = te.compute((4,), lambda i: te.argmax(A[i, k], axis=k, select_last=True), name="last")
    M = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="mx")
    a = np.array([[1, 3, 3, 0, 3], [np.nan, 1, np.nan, 2, 0], [-np.inf] * 5,
                  [0, 1, 2, np.nan, 1]], "float32")
    first, last, mx = build_te([A], [F, L, M], "argtie")(a)
    np.testing.assert_array_equal(first, np.argmax(a, axis=1))
    np.testing.assert_array_equal(last, [4, 2, 4, 3])
    np.testing.assert_array_equal(mx, np.max(a, axis=1))


def test_reduction_over_outer_axis_and_multiple_axes() -> None:
    A = te.placeholder((6, 4, 5), "float32", "A")
    k0, k1 = te.reduce_axis(6, "k0"), te.reduce_axis(5, "k1")
    S = te.compute((4,), lambda j: te.sum(A[k0, j, k1], axis=[k0, k1]), name="s")
    I = te.compute((4,), lambda j: te.argmax(A[k0, j, k1], axis=[k0, k1]), name="i")
    a = _f32(6, 4, 5)
    s, idx = build_te([A], [S, I], "red2")(a)
    np.testing.assert_allclose(s, a.sum((0, 2)), rtol=1e-5)
    np.testing.assert_array_equal(idx, a.transpose(1, 0, 2).reshape(4, -1).argmax(1))


def test_softmax_two_reductions() -> None:
    n, m = 9, 100
    A = te.placeholder((n, m), "float32", "A")
    k1, k2 = te.reduce_axis(m, "k1"), te.reduce_axis(m, "k2")
    MX = te.compute((n,), lambda i: te.max(A[i, k1], axis=k1), name="mx")
    E = te.compute((n, m), lambda i, j: tir.exp(A[i, j] - MX[i]), name="e")
    S = te.compute((n,), lambda i: te.sum(E[i, k2], axis=k2), name="s")
    O = te.compute((n, m), lambda i, j: E[i, j] / S[i], name="softmax")
    run = build_te([A], [O], "softmax")
    a = _f32(n, m) * 10
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(run(a)[0], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert str(run.primfunc).count("allocate mx[") == 1


def test_materialize_keeps_value_in_scratch() -> None:
    A = te.placeholder((16,), "float32", "A")
    T = te.materialize(te.compute((16,), lambda i: tir.exp(A[i]), name="t"))
    U = te.compute((16,), lambda i: T[i] * T[15 - i], name="u")
    run = build_te([A], [U], "mat")
    assert "allocate t" in str(run.primfunc)
    a = _f32(16)
    np.testing.assert_allclose(run(a)[0], np.exp(a) * np.exp(a[::-1]), rtol=1e-6)


@pytest.mark.parametrize("pad", [1, 3, 100])
def test_padding_with_if_then_else_never_reads_out_of_bounds(pad: int) -> None:
    h, w = 5, 7
    A = te.placeholder((h, w), "float32", "A")
    H, W = h + 2 * pad, w + 2 * pad

    def body(i, j):
        inside = tir.all(i >= pad, i < h + pad, j >= pad, j < w + pad)
        return tir.if_then_else(inside, A[i - pad, j - pad], tir.const(-1.0, "float32"))

    P = te.compute((H, W), body, name="pad")
    a = _f32(h, w)
    np.testing.assert_array_equal(build_te([A], [P], "padk")(a)[0],
                                  np.pad(a, pad, constant_values=-1.0))


def test_large_if_then_else_branch_uses_control_flow() -> None:
    A = te.placeholder((64,), "float32", "A")

    def body(i):
        v = A[i - 10]
        for _ in range(60):
            v = v * 1.01 + 0.5
        return tir.if_then_else(tir.all(i >= 10, i < 74), v, tir.const(0.0, "float32"))

    P = te.compute((84,), body, name="bigpad")
    a = _f32(64)
    ref = a.astype(np.float32)
    for _ in range(60):
        ref = ref * np.float32(1.01) + np.float32(0.5)
    got = build_te([A], [P], "bigpad")(a)[0]
    np.testing.assert_allclose(got[10:74], ref, rtol=1e-5)
    assert not got[:10].any() and not got[74:].any()


def test_multiple_outputs_input_passthrough_and_duplicates() -> None:
    A = te.placeholder((4, 6), "float32", "A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="dbl")
    C = te.compute(A.shape, lambda i, j: B[i, j] + 1.0, name="inc")
    run = build_te([A], [B, C, A, B], "multi")
    a = _f32(4, 6)
    b, c, a2, b2 = run(a)
    np.testing.assert_array_equal(b, a * 2)
    np.testing.assert_array_equal(c, a * 2 + 1)
    np.testing.assert_array_equal(a2, a)
    np.testing.assert_array_equal(b2, a * 2)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_int_floordiv_floormod_truncdiv_match_numpy(dtype: str) -> None:
    a = np.array([7, -7, 7, -7, 0, 5, -128 if dtype == "int8" else -1000, 3, 9], dtype)
    b = np.array([2, 2, -2, -2, 3, 0, -1, -5, 0], dtype)
    A, B = te.placeholder(a.shape, dtype, "a"), te.placeholder(b.shape, dtype, "b")
    outs = [te.compute(a.shape, lambda i, f=f: f(A[i], B[i]), name=n) for n, f in (
        ("fd", tir.floordiv), ("fm", tir.floormod), ("td", tir.truncdiv), ("tm", tir.truncmod))]
    fd, fm, td, tm = build_te([A, B], outs, f"intdiv_{dtype}")(a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(fd, np.floor_divide(a, b))
        np.testing.assert_array_equal(fm, np.mod(a, b))
        np.testing.assert_array_equal(td, np.where(b == 0, 0, np.fix(a / np.where(b == 0, 1, b)))
                                      .astype(dtype))
        np.testing.assert_array_equal(tm, np.fmod(a, b))


def test_float_floordiv_floormod() -> None:
    a = np.array([7.5, -7.5, 7.5, -7.5, 0.0, 3.0], "float32")
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 1.5], "float32")
    A, B = te.placeholder(a.shape, "float32", "a"), te.placeholder(b.shape, "float32", "b")
    D = te.compute(a.shape, lambda i: A[i] // B[i], name="d")
    M = te.compute(a.shape, lambda i: A[i] % B[i], name="m")
    d, m = build_te([A, B], [D, M], "fdivmod")(a, b)
    np.testing.assert_array_equal(d, np.floor_divide(a, b))
    np.testing.assert_array_equal(m, np.mod(a, b))


def test_int_arithmetic_wraps_and_min_max() -> None:
    a = np.array([100, -100, 127, -128, 5], "int8")
    b = np.array([100, -100, 1, -1, -7], "int8")
    A, B = te.placeholder(a.shape, "int8", "a"), te.placeholder(b.shape, "int8", "b")
    outs = [te.compute(a.shape, lambda i: A[i] + B[i], name="s"),
            te.compute(a.shape, lambda i: A[i] * B[i], name="p"),
            te.compute(a.shape, lambda i: tir.max(A[i], B[i]), name="mx"),
            te.compute(a.shape, lambda i: tir.abs(A[i]) - tir.sign(B[i]), name="as")]
    s, p, mx, as_ = build_te([A, B], outs, "i8arith")(a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(p, a * b)
        np.testing.assert_array_equal(mx, np.maximum(a, b))
        np.testing.assert_array_equal(as_, np.abs(a) - np.sign(b))


def test_casts_and_bool() -> None:
    x = np.array([1.7, -1.7, 0.0, 2.5, -0.4, 100.9, np.nan], "float32")
    X = te.placeholder(x.shape, "float32", "x")
    I = te.compute(x.shape, lambda i: tir.cast(tir.select(tir.isnan(X[i]), 0.0, X[i]), "int32"),
                   name="f2i")
    U = te.compute(x.shape, lambda i: tir.cast(tir.fabs(tir.select(tir.isnan(X[i]), 0.0, X[i])),
                                               "uint8"), name="f2u")
    Bo = te.compute(x.shape, lambda i: tir.cast(X[i], "bool"), name="f2b")
    G = te.compute(x.shape, lambda i: tir.logical_and(X[i] > 0.0, tir.logical_not(X[i] > 2.0)),
                   name="band")
    D = te.compute(x.shape, lambda i: tir.cast(tir.cast(X[i] > 0.0, "float64"), "float64"),
                   name="b2d")
    x_clean = np.nan_to_num(x)
    i, u, bo, g, d = build_te([X], [I, U, Bo, G, D], "casts")(x)
    np.testing.assert_array_equal(i, x_clean.astype("int32"))
    np.testing.assert_array_equal(u, np.abs(x_clean).astype("uint8"))
    np.testing.assert_array_equal(bo, x.astype(bool))
    np.testing.assert_array_equal(g, (x > 0) & ~(x > 2))
    assert d.dtype == np.float64 and np.array_equal(d, (x > 0).astype("float64"))


def test_bool_inputs_and_int_to_float() -> None:
    m = np.array([True, False, True, True], bool)
    v = np.array([-3, 4, 2**31 - 1, -(2**31)], "int32")
    M, V = te.placeholder(m.shape, "bool", "m"), te.placeholder(v.shape, "int32", "v")
    O = te.compute(m.shape, lambda i: tir.select(M[i], tir.cast(V[i], "float32"),
                                                 tir.const(-0.5, "float32")), name="o")
    N = te.compute(m.shape, lambda i: tir.logical_not(M[i]), name="n")
    o, n = build_te([M, V], [O, N], "boolsel")(m, v)
    np.testing.assert_array_equal(o, np.where(m, v.astype("float32"), np.float32(-0.5)))
    np.testing.assert_array_equal(n, ~m)


def test_reshape_transpose_indexing_is_simplified() -> None:
    A = te.placeholder((4, 16), "float32", "A")
    R = te.compute((64,), lambda i: A[i // 16, i % 16], name="flat")
    B = te.compute((4, 16), lambda i, j: R[i * 16 + j] + 1.0, name="back")
    T = te.compute((16, 4), lambda i, j: B[j, i], name="tr")
    run = build_te([A], [T], "reshape")
    assert "floordiv" not in str(run.primfunc) and "floormod" not in str(run.primfunc)
    a = _f32(4, 16)
    np.testing.assert_array_equal(run(a)[0], (a + 1).T)


def test_large_scratch_does_not_overflow_the_stack() -> None:
    n = 1 << 20  # 4 MB float32 intermediate
    A = te.placeholder((n,), "float32", "A")
    T = te.materialize(te.compute((n,), lambda i: A[i] + 1.0, name="big"))
    U = te.compute((n,), lambda i: T[n - 1 - i] * 2.0, name="use")
    a = RNG.standard_normal(n).astype("float32")
    run = build_te([A], [U], "bigscratch")
    np.testing.assert_array_equal(run(a)[0], ((a + 1) * 2)[::-1])
    assert "scratch" in get_llvm_ir([run.primfunc], optimized=False, options=host())


def test_scalar_and_empty_tensors() -> None:
    A = te.placeholder((), "float32", "A")
    B = te.compute((), lambda: A[()] * 3.0, name="s3")
    E = te.placeholder((0, 3), "float32", "E")
    F = te.compute((0, 3), lambda i, j: E[i, j] + 1.0, name="e1")
    b, f = build_te([A, E], [B, F], "scalars")(np.array(2.0, "float32"), np.zeros((0, 3), "f4"))
    assert b.shape == () and float(b) == 6.0 and f.shape == (0, 3)


def test_reduce_where_and_offset_axis() -> None:
    A = te.placeholder((5, 10), "float32", "A")
    k = te.reduce_axis((2, 8), "k")
    S = te.compute((5,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] > 0.0), name="sw")
    a = _f32(5, 10)
    sub = a[:, 2:8]
    np.testing.assert_allclose(build_te([A], [S], "rwhere")(a)[0],
                               np.where(sub > 0, sub, 0).sum(1), rtol=1e-5)


def test_two_kernels_in_one_library() -> None:
    from codegen.jit import build_library

    A = te.placeholder((8,), "float32", "A")
    f1 = lower("k_one", [A], [te.compute((8,), lambda i: A[i] + 1.0, name="o")])
    f2 = lower("k_two", [A], [te.compute((8,), lambda i: A[i] * A[i], name="o")])
    lib = build_library([f1, f2], options=host())
    a, o1, o2 = _f32(8), np.empty(8, "float32"), np.empty(8, "float32")
    lib["k_one"](a, o1)
    lib["k_two"](a, o2)
    np.testing.assert_array_equal(o1, a + 1)
    np.testing.assert_array_equal(o2, a * a)
