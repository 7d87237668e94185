"""The compile cache: structural, name-free keys; identical kernels share optimised code."""
from __future__ import annotations

import numpy as np

from codegen import jit, te, tir
from codegen.lower import lower

from tests.schedule_helpers import host


def _exp_kernel(name: str, n: int = 16, c: float = 1.0):
    A = te.placeholder((n,), "float32", "a")
    C = te.compute((n,), lambda i: tir.exp(A[i]) + tir.const(c, "float32"), name="c")
    return lower(name, [A], [C])


def test_key_ignores_names_but_not_structure():
    key = jit.structural_key([_exp_kernel("k1")], host(), 3)
    assert key == jit.structural_key([_exp_kernel("other_name")], host(), 3)
    assert key != jit.structural_key([_exp_kernel("k1", n=17)], host(), 3)
    assert key != jit.structural_key([_exp_kernel("k1", c=2.0)], host(), 3)
    assert key != jit.structural_key([_exp_kernel("k1")], host(), 2)


def test_key_distinguishes_signed_zero_and_variables():
    A = te.placeholder((4,), "float32", "a")
    pos = lower("z", [A], [te.compute((4,), lambda i: A[i] + tir.const(0.0, "float32"))])
    neg = lower("z", [A], [te.compute((4,), lambda i: A[i] + tir.const(-0.0, "float32"))])
    assert jit.structural_key([pos], host(), 3) != jit.structural_key([neg], host(), 3)
    B = te.placeholder((4, 4), "float32", "b")
    t1 = lower("t", [B], [te.compute((4, 4), lambda i, j: B[i, j])])
    t2 = lower("t", [B], [te.compute((4, 4), lambda i, j: B[j, i])])
    assert jit.structural_key([t1], host(), 3) != jit.structural_key([t2], host(), 3)


def test_shared_and_repeated_subtrees_give_one_key():
    A = te.placeholder((4,), "int32", "a")

    def shared(i):
        x = A[i] * 3
        return x + x

    def repeated(i):
        return A[i] * 3 + A[i] * 3

    f1 = lower("s", [A], [te.compute((4,), shared)])
    f2 = lower("s", [A], [te.compute((4,), repeated)])
    assert jit.structural_key([f1], host(), 3) == jit.structural_key([f2], host(), 3)


def test_renamed_kernel_reuses_optimised_module():
    jit.clear_cache()
    before = jit.cache_stats()
    lib1 = jit.build_library([_exp_kernel("first_copy")], options=host())
    lib2 = jit.build_library([_exp_kernel("second_copy")], options=host())
    lib3 = jit.build_library([_exp_kernel("second_copy")], options=host())
    stats = jit.cache_stats()
    assert stats["misses"] - before["misses"] == 1
    assert stats["renamed"] - before["renamed"] == 1
    assert stats["hits"] - before["hits"] == 1
    a = np.linspace(-2, 2, 16, dtype=np.float32)
    for lib, name in ((lib1, "first_copy"), (lib2, "second_copy"), (lib3, "second_copy")):
        out = np.empty(16, np.float32)
        lib[name](a, out)
        np.testing.assert_allclose(out, np.exp(a) + 1, rtol=1e-6)
    assert "first_copy" not in lib2


def test_swapped_names_in_a_two_kernel_module():
    jit.clear_cache()
    f_a, f_b = _exp_kernel("ka", c=1.0), _exp_kernel("kb", c=5.0)
    jit.build_library([f_a, f_b], options=host())
    lib = jit.build_library([_exp_kernel("kb", c=1.0), _exp_kernel("ka", c=5.0)], options=host())
    a, out = np.zeros(16, np.float32), np.empty(16, np.float32)
    lib["kb"](a, out)
    np.testing.assert_array_equal(out, 2.0)
    lib["ka"](a, out)
    np.testing.assert_array_equal(out, 6.0)
