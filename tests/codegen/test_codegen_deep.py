"""Deep and shared expressions: no recursion per node, keys and printing linear in the DAG."""
from __future__ import annotations

import sys

import numpy as np

from codegen.options import CodegenOptions
from codegen import jit, te, tir
from codegen.jit import build_te
from codegen.lower import lower
from tests.scaling import assert_scales_linearly
from tests.schedule_helpers import host

DEPTH = 5000
STAGES = 1100  # > the recursion limit; te inlining substitutes each stage: quadratic time


def _lcg_chain(x: tir.Expr, n: int) -> tir.Expr:
    """n wrapping int32 ops alternating multiply-add, xor and shift (exact in numpy too)."""
    for k in range(n):
        if k % 3 == 0:
            x = x * 1664525 + 1013904223
        elif k % 3 == 1:
            x = tir.bitwise_xor(x, tir.shift_right(x, tir.const(7, "int32")))
        else:
            x = x - tir.const(k, "int32")
    return x


def _lcg_numpy(x: np.ndarray, n: int) -> np.ndarray:
    for k in range(n):
        if k % 3 == 0:
            x = x * np.int32(1664525) + np.int32(1013904223)
        elif k % 3 == 1:
            x = x ^ (x >> np.int32(7))
        else:
            x = x - np.int32(k)
    return x


def test_5000_op_inlined_chain_lowers_and_runs():
    assert sys.getrecursionlimit() < DEPTH  # recursion per node would fail here
    A = te.placeholder((37,), "int32", "a")
    C = te.compute((37,), lambda i: _lcg_chain(A[i], DEPTH), name="c")
    # opt_level 0: LLVM's own O1+ pipeline takes ~20 s on this 5000-deep integer chain
    run = build_te([A], [C], name="deep_chain", opt_level=0)
    a = np.arange(-18, 19, dtype=np.int32) * 1000003
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run(a)[0], _lcg_numpy(a, DEPTH))
    text = str(run.primfunc)  # printed without recursion: shared values as `let %n`
    assert len(text) < 100 * DEPTH and "c[c_i0] = " in text


def test_long_te_stage_chain_inlines():
    """Chained te.compute stages all inline through substitute into one loop nest."""
    A = te.placeholder((8,), "float32", "a")
    t = A
    for k in range(STAGES):
        t = te.compute((8,), lambda i, t=t, k=k: t[i] + tir.const(k % 7, "float32"), name="s")
    assert not t.materialized
    run = build_te([A], [t], name="deep_stages")
    a = np.linspace(-1, 1, 8, dtype=np.float32)
    want = a.copy()
    for k in range(STAGES):
        want = want + np.float32(k % 7)
    np.testing.assert_array_equal(run(a)[0], want)


def test_relay_chain_needs_no_materialize_cut(monkeypatch):
    """lower_function's inline-depth cut is only a heuristic: without it long chains lower."""
    from compiler.op.compute import lower_function
    from compiler.ir.expr import Function, var
    from compiler.ir.types import TensorType
    from compiler.op.registry import make_call
    from compiler.ir.type_infer import InferTypeLocal

    monkeypatch.setattr(lower_function, "MAX_INLINE_DEPTH", 10 ** 9)
    x = var("x", TensorType((4,), "float32"))
    body = x
    for k in range(STAGES):
        body = make_call("negative" if k % 2 else "abs", [body])
    func = Function([x], body).with_attr("Primitive", 1)
    InferTypeLocal(func)
    prim = lower_function.lower_primitive_function(func, "deep_relay", CodegenOptions.host())
    assert "allocate" not in str(prim)  # one inlined loop nest
    lib = jit.build_library([prim], options=host())
    a, out = np.array([1.5, -2.0, 0.0, -0.0], np.float32), np.empty(4, np.float32)
    lib["deep_relay"](a, out)
    last_is_negative = (STAGES - 1) % 2 == 1
    np.testing.assert_array_equal(out, -np.abs(a) if last_is_negative else np.abs(a))


def _squares(levels: int) -> tuple[te.Tensor, te.Tensor]:
    """x -> x*x + x repeated: a DAG of 2*levels nodes with 2**levels paths."""
    A = te.placeholder((4,), "int32", "a")

    def body(i):
        x = A[i]
        for _ in range(levels):
            x = x * x + x
        return x

    return A, te.compute((4,), body, name="sq")


def test_shared_dag_key_and_text_are_linear():
    A, C = _squares(64)  # printed as a tree this would be ~2**64 characters
    func = lower("squares", [A], [C])
    key = jit.structural_key([func], host(), 3)
    text = str(func)

    def key_and_text(depth):
        a, c = _squares(depth)
        f = lower("squares", [a], [c])
        return lambda: (jit.structural_key([f], host(), 3), str(f))
    assert_scales_linearly(key_and_text, 12, 24)  # a tree walk grows 4096x here
    assert len(text) < 10_000 and "let %0 = " in text
    assert key == jit.structural_key([lower("squares", [A], [C])], host(), 3)
    run = build_te([A], [C], name="squares_run")
    a = np.array([0, 1, -1, 3], np.int32)
    want = a.copy()
    with np.errstate(over="ignore"):
        for _ in range(64):
            want = want * want + want
    np.testing.assert_array_equal(run(a)[0], want)
