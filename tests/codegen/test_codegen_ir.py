"""TIR construction, printer, simplifier, TE contract and lowering errors."""
from __future__ import annotations


import numpy as np
import pytest

from codegen import CodegenError, LoweringError, te, tir
from codegen.jit import build_library, clear_cache, compile_primfuncs
from codegen.lower import lower
from codegen.simplify import simplify
from tests.scaling import assert_scales_linearly
from tests.schedule_helpers import host


def test_operators_promote_python_constants_and_keep_identity_eq() -> None:
    x = tir.Var("x", "float32")
    e = x * 2 + 1.5
    assert isinstance(e, tir.BinaryOp) and e.dtype == "float32" and e.b.dtype == "float32"
    assert (x < 3).dtype == "bool"
    assert x == x and not (x == tir.Var("x", "float32"))  # identity, not a node
    assert len({x, tir.Var("x", "float32")}) == 2
    assert tir.eq(x, 1.0).kind == "eq"


def test_dtype_mismatch_and_truthiness_are_clear_errors() -> None:
    x, i = tir.Var("x", "float32"), tir.Var("i", "int32")
    with pytest.raises(CodegenError, match="float32 vs int32"):
        _ = x + i
    with pytest.raises(CodegenError, match="float constant"):
        _ = i + 1.5
    with pytest.raises(CodegenError, match="truth value"):
        bool(x < 1.0)
    with pytest.raises(CodegenError, match="expected a float"):
        tir.exp(i)
    with pytest.raises(CodegenError, match="unsupported dtype"):
        tir.const(1, "complex64")


def test_printer_shows_loop_nest() -> None:
    A = te.placeholder((16,), "float32", "A")
    B = te.placeholder((16,), "float32", "B")
    C = te.compute((16,), lambda i: tir.max(A[i] + B[i], tir.const(0, "float32")), name="C")
    text = str(lower("relu_add", [A, B], [C]))
    assert "for (C_i0, 0, 16) vectorized {" in text
    assert "C[C_i0] = max(A[C_i0] + B[C_i0], 0f)" in text or \
        "C[C_i0] = max((A[C_i0] + B[C_i0]), 0f)" in text
    assert text.startswith("primfn relu_add(")


def test_simplify_index_patterns() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    b = {i: (0, 3), j: (0, 15)}
    assert simplify((i * 16 + j) // 16, b) is i
    assert simplify((i * 16 + j) % 16, b) is j
    assert str(simplify(i * 1 + j * 0 + (2 + 3), {})) == "(i + 5i64)"
    assert simplify(tir.lt(j, 16), b).value == 1
    folded = simplify(tir.const(7, "int32") // tir.const(-2, "int32"))
    assert folded.value == -4
    assert simplify(tir.const(1.5, "float32") * tir.const(2.0, "float32")).value == 3.0
    x = tir.Var("x", "float32")
    assert simplify(x + 0.0) is not x  # -0.0 + 0.0 is +0.0: not an identity for floats


def test_te_contract_basics() -> None:
    A = te.placeholder((3, 4), "int32", "A")
    assert isinstance(A, te.Tensor) and A.shape == (3, 4) and A.ndim == 2 and A.dtype == "int32"
    B = te.compute((3, 4), lambda i, j: tir.cast(A[i, j], "float32") * 0.5, name="B")
    assert B.dtype == "float32" and not B.materialized
    inlined = B[1, 2]
    assert "A[1, 2]" in str(inlined)
    k = te.reduce_axis(4, "k")
    S = te.compute((3,), lambda i: te.sum(B[i, k], axis=[k]), name="S")
    assert S.materialized and isinstance(S[0], tir.Load)
    with pytest.raises(CodegenError, match="expected 2 indices"):
        _ = A[0]
    with pytest.raises(CodegenError, match="reduce_axis"):
        te.sum(A[0, 0], axis=[tir.Var("z")])


def test_lowering_errors_name_the_kernel() -> None:
    A = te.placeholder((4,), "float32", "A")
    other = te.placeholder((4,), "float32", "other")
    C = te.compute((4,), lambda i: A[i] + other[i], name="C")
    with pytest.raises(LoweringError, match="lowering kern.*other"):
        lower("kern", [A], [C])
    with pytest.raises(LoweringError, match="placeholder"):
        lower("kern", [C], [C])
    with pytest.raises(LoweringError, match="twice"):
        lower("kern", [A, A], [C])


def test_lowering_five_op_chain_is_fast() -> None:
    def chain(stages):
        A = te.placeholder((8, 128), "float32", "A")
        t = A
        for n in range(stages):
            t = te.compute(A.shape, lambda i, j, t=t: tir.tanh(t[i, j] * 1.5 + 0.25),
                           name=f"s{n}")
        return A, t

    A, t = chain(5)
    assert str(lower("chain5", [A], [t])).count("for (") == 2  # inlined: one loop nest

    def lowering(stages):
        a, out = chain(stages)
        return lambda: lower(f"chain{stages}", [a], [out])
    assert_scales_linearly(lowering, 5, 20)


def test_compile_cache_returns_identical_object_code() -> None:
    A = te.placeholder((8,), "float32", "A")
    f = lower("cached", [A], [te.compute((8,), lambda i: A[i] + 1.0, name="o")])
    clear_cache()
    first = compile_primfuncs([f], options=host())
    second = compile_primfuncs([f], options=host())
    assert first is second


def test_duplicate_kernel_names_rejected() -> None:
    A = te.placeholder((8,), "float32", "A")
    f = lower("same", [A], [te.compute((8,), lambda i: A[i] + 1.0, name="o")])
    with pytest.raises(CodegenError, match="named 'same'"):
        compile_primfuncs([f, f], options=host())


def test_fifty_small_kernels_compile_in_one_module() -> None:
    funcs = []
    for n in range(50):
        A = te.placeholder((16, 32 + n), "float32", "A")
        B = te.placeholder((32 + n,), "float32", "B")
        C = te.compute(A.shape, lambda i, j: tir.max(A[i, j] * B[j] + float(n), tir.const(
            0, "float32")), name="C")
        funcs.append(lower(f"kernel_{n}", [A, B], [C]))
    clear_cache()
    lib = build_library(funcs, options=host())
    a = np.ones((16, 40), "float32")
    b = np.full(40, -2.0, "float32")
    out = np.empty((16, 40), "float32")
    lib["kernel_8"](a, b, out)
    assert np.all(out == 6.0)
