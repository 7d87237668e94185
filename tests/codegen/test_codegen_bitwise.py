"""Native bit ops in TIR (and/or/xor/not/shifts) against numpy, in kernels and when folded."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te
from codegen.simplify import simplify

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
OPS = {"bitand": (tir.bitwise_and, np.bitwise_and), "bitor": (tir.bitwise_or, np.bitwise_or),
       "bitxor": (tir.bitwise_xor, np.bitwise_xor), "shl": (tir.shift_left, np.left_shift),
       "shr": (tir.shift_right, np.right_shift)}


def _operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Random values plus the extremes, against shift amounts in and out of [0, width)."""
    info, rng = np.iinfo(dtype), np.random.default_rng(7)
    width = info.bits
    values = [info.min, info.max, 0, 1, -1 if info.min < 0 else info.max - 1, 5]
    amounts = [0, 1, width - 1, width, width + 1, 2 * width, info.max]
    amounts += [-1, -width, info.min] if info.min < 0 else []
    a = np.array([v for v in values for _ in amounts], dtype)
    b = np.array([s for _ in values for s in amounts], dtype)
    ra = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
    rb = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
    return np.concatenate([a, ra]), np.concatenate([b, rb])


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", sorted(OPS))
def test_bit_op_kernel_matches_numpy(dtype, op):
    a, b = _operands(dtype)
    make, ref = OPS[op]
    A, B = te.placeholder(a.shape, dtype, "a"), te.placeholder(b.shape, dtype, "b")
    C = te.compute(a.shape, lambda i: make(A[i], B[i]), name="c")
    run = build_te([A, B], [C], name=f"bits_{op}_{dtype}")
    np.testing.assert_array_equal(run(a, b)[0], ref(a, b))


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise_not_kernel_matches_numpy(dtype):
    a, _ = _operands(dtype)
    A = te.placeholder(a.shape, dtype, "a")
    C = te.compute(a.shape, lambda i: tir.bitwise_not(A[i]), name="c")
    np.testing.assert_array_equal(build_te([A], [C], name=f"bitnot_{dtype}")(a)[0], np.invert(a))


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "uint64"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_bit_op_constants_fold_like_numpy(dtype, op):
    a, b = _operands(dtype)
    make, ref = OPS[op]
    want = ref(a, b)
    for x, y, w in zip(a[:40], b[:40], want[:40]):
        folded = simplify(make(tir.const(int(x), dtype), tir.const(int(y), dtype)))
        assert type(folded) is tir.IntImm and folded.value == int(w), (op, x, y, folded)


def test_bit_ops_are_not_folded_as_logic():
    six, three = tir.const(6, "int32"), tir.const(3, "int32")
    assert simplify(tir.bitwise_and(six, three)).value == 2  # logical `and` would give 1
    assert simplify(tir.bitwise_or(six, three)).value == 7
    assert simplify(tir.bitwise_xor(six, three)).value == 5
    assert simplify(tir.bitwise_not(six)).value == -7


def test_bool_bit_ops_and_type_checks():
    t, f = tir.const(True, "bool"), tir.const(False, "bool")
    assert simplify(tir.bitwise_xor(t, t)).value == 0 and simplify(tir.bitwise_or(t, f)).value
    with pytest.raises(Exception, match="shl: expected integer"):
        tir.shift_left(t, f)
    with pytest.raises(Exception, match="bitand: expected integer"):
        tir.bitwise_and(tir.const(1.0, "float32"), tir.const(2.0, "float32"))


def test_printer_shows_bit_operators():
    i = tir.Var("i", "int64")
    text = str(tir.shift_right(tir.bitwise_and(i, 12), tir.bitwise_xor(i, 1)))
    assert text == "((i & 12i64) >> (i ^ 1i64))"
