"""Regression: ONNX test_col2im_strides was miscompiled at opt_level >= 1.

The fused kernel (reshape -> concatenate-with-zeros -> reshape -> strided_slice, twice, then
per-kernel-position strided_slice -> reshape -> nn.pad branches summed with add) read input
where inserted zeros belonged. Root cause: codegen/simplify.py cached interval ranges by
`id(expr)` without keeping the expression alive. `_divmod` builds temporary remainder
expressions, asks their range and often drops them; CPython then reuses the freed address for a
new node (e.g. IntImm 2 got the stale range (1, 1) of a dead temporary), so comparisons and
floordiv/floormod were simplified with wrong ranges. The cache must own its keys.
"""
from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings, strategies as st

from codegen.simplify import _Simplifier, simplify
from codegen.tir.expr import BinaryOp, IntImm, Var
from compiler.op.interpreter import evaluate
from compiler.ir.expr import Function, Tuple, const, var
from compiler.ir.types import TensorType
from compiler.op.registry import make_call
from compiler.ir.type_infer import InferTypeLocal
from tests.codegen_ops.lowering_harness import compile_function

I64 = "int64"


def _call(op, *args, **attrs):
    return make_call(op, list(args), **attrs)


def _slice(x, begin, end, axis):
    return _call("strided_slice", x, begin=[begin], end=[end], strides=[1], axes=[axis])


# ----------------------------------------------------------------- the simplifier's interval cache
def test_range_cache_is_not_fooled_by_id_reuse():
    """A range computed for a temporary that died must not be returned for a new node that
    happens to get the same address."""
    i = Var("i", I64)
    s = _Simplifier({i: (0, 3)})
    for _ in range(64):
        tmp = BinaryOp("add", i, IntImm(100, I64), I64)
        assert s.range_of(tmp) == (100, 103)
        del tmp
        fresh = BinaryOp("add", i, IntImm(1, I64), I64)
        assert s.range_of(fresh) == (1, 4)
        two = IntImm(2, I64)
        assert s.range_of(two) == (2, 2)


def test_simplify_many_divmods_matches_evaluation():
    """Many floordiv/floormod rewrites in one run (each builds and drops temporaries)."""
    i, j = Var("i", I64), Var("j", I64)
    bounds = {i: (0, 4), j: (0, 5)}
    exprs = []
    for c in (2, 3, 4, 6):
        for k in (0, 1, 2, 5):
            lin = BinaryOp("add", BinaryOp("add", BinaryOp("mul", i, IntImm(c, I64), I64), j, I64),
                           IntImm(k, I64), I64)
            exprs.append((BinaryOp("floordiv", lin, IntImm(c, I64), I64),
                          lambda a, b, c=c, k=k: (a * c + b + k) // c))
            exprs.append((BinaryOp("floormod", lin, IntImm(c, I64), I64),
                          lambda a, b, c=c, k=k: (a * c + b + k) % c))
            lt = BinaryOp("lt", BinaryOp("floormod", lin, IntImm(c, I64), I64),
                          IntImm(c - 1, I64), "bool")
            exprs.append((lt, lambda a, b, c=c, k=k: int((a * c + b + k) % c < c - 1)))
    body = exprs[0][0]
    for e, _ in exprs[1:]:  # one simplify run over a tree holding all of them
        body = BinaryOp("add", body, e if e.dtype == I64 else _as_int(e), I64)
    got = simplify(body, bounds)

    for a in range(5):
        for b in range(6):
            want = sum(f(a, b) for _, f in exprs)
            assert _eval(got, {i: a, j: b}) == want, (a, b)


def _as_int(e):
    from codegen.tir.expr import Select
    return Select(e, IntImm(1, I64), IntImm(0, I64), I64)


def _eval(e, env):
    from codegen.tir.expr import Select
    t = type(e)
    if t is IntImm:
        return e.value
    if t is Var:
        return env[e]
    if t is Select:
        return _eval(e.a, env) if _eval(e.cond, env) else _eval(e.b, env)
    a, b = _eval(e.a, env), _eval(e.b, env)
    return {"add": a + b, "sub": a - b, "mul": a * b, "floordiv": a // b if b else 0,
            "floormod": a % b if b else 0, "min": min(a, b), "max": max(a, b),
            "lt": int(a < b), "le": int(a <= b), "gt": int(a > b), "ge": int(a >= b),
            "eq": int(a == b), "ne": int(a != b)}[e.kind]


# ----------------------------------------------------------------- the fused col2im function
def _col2im_fused():
    """The fused primitive function of test_col2im_strides (zeros as parameters)."""
    x = var("input", TensorType((1, 9, 4), "float32"))
    z0 = var("z0", TensorType((1, 1, 3, 3, 2, 1, 2), "float32"))
    z1 = var("z1", TensorType((1, 1, 3, 3, 3, 2, 1), "float32"))
    t = _call("reshape", _call("reshape", x, newshape=[1, 1, 3, 3, 2, 2]),
              newshape=[1, 1, 3, 3, 2, 1, 2])
    t = _call("reshape", _call("concatenate", Tuple([t, z0]), axis=5),
              newshape=[1, 1, 3, 3, 4, 2])
    t = _call("reshape", _slice(t, 0, 3, 4), newshape=[1, 1, 3, 3, 3, 2, 1])
    t = _call("reshape", _call("concatenate", Tuple([t, z1]), axis=6),
              newshape=[1, 1, 3, 3, 3, 4])
    t10 = _slice(t, 0, 3, 5)

    def branch(j, pad_w):
        piece = _call("reshape", _slice(_slice(t10, 0, 1, 2), j, j + 1, 3), newshape=[1, 1, 3, 3])
        return _call("nn.pad", piece, const(np.float32(0)),
                     pad_width=[[0, 0], [0, 0], [0, 2], pad_w])

    body = _call("add", _call("add", branch(0, [0, 2]), branch(1, [1, 1])), branch(2, [2, 0]))
    return [x, z0, z1], body


def test_col2im_strides_fused_kernel():
    params, body = _col2im_fused()
    xs = np.arange(36, dtype="float32").reshape(1, 9, 4) + 1
    zs = [np.zeros(p.type_annotation.shape, "float32") for p in params[1:]]
    got = compile_function(params, body)(xs, *zs)[0]
    f = Function(params, body)
    InferTypeLocal(f)
    want = np.asarray(evaluate(f, [xs, *zs]))
    np.testing.assert_array_equal(got, want)
    # independent numpy: blocks [kh, kw, oh, ow] dilated by stride 2, kernel row 0 summed
    # at column offsets kw (what this fused part of col2im computes)
    dil = np.zeros((3, 3, 3, 3), "float32")
    dil[:, :, ::2, ::2] = xs.reshape(3, 3, 2, 2)
    ref = np.zeros((5, 5), "float32")
    for kw in range(3):
        ref[0:3, kw:kw + 3] += dil[0, kw]
    np.testing.assert_array_equal(got[0, 0], ref)


# ----------------------------------------------------------------- the general pattern
def _np_chain(xs, n, m, sh, sw, branches, out_hw):
    """numpy reference of the chain built by _relay_chain."""
    a = xs.reshape(1, n, m, 1)
    if sw > 1:
        a = np.concatenate([a, np.zeros((1, n, m, sw - 1), xs.dtype)], axis=3)
    a = a.reshape(1, n, m * sw)[:, :, : (m - 1) * sw + 1]
    w = a.shape[2]
    b = a.reshape(1, n, 1, w)
    if sh > 1:
        b = np.concatenate([b, np.zeros((1, n, sh - 1, w), xs.dtype)], axis=2)
    b = b.reshape(1, n * sh, w)[:, : (n - 1) * sh + 1, :]
    H, W = out_hw
    acc = np.zeros((1, H, W), xs.dtype)
    for (r0, r1, c0, c1, top, left) in branches:
        piece = b[:, r0:r1, c0:c1]
        h, wd = piece.shape[1:]
        acc = acc + np.pad(piece, [(0, 0), (top, H - h - top), (left, W - wd - left)])
    return acc


def _relay_chain(n, m, sh, sw, branches, out_hw):
    x = var("x", TensorType((n * m,), "float32"))
    params = [x]
    a = _call("reshape", x, newshape=[1, n, m, 1])
    if sw > 1:
        z = var("zw", TensorType((1, n, m, sw - 1), "float32"))
        params.append(z)
        a = _call("concatenate", Tuple([a, z]), axis=3)
    a = _slice(_call("reshape", a, newshape=[1, n, m * sw]), 0, (m - 1) * sw + 1, 2)
    w = (m - 1) * sw + 1
    b = _call("reshape", a, newshape=[1, n, 1, w])
    if sh > 1:
        z = var("zh", TensorType((1, n, sh - 1, w), "float32"))
        params.append(z)
        b = _call("concatenate", Tuple([b, z]), axis=2)
    b = _slice(_call("reshape", b, newshape=[1, n * sh, w]), 0, (n - 1) * sh + 1, 1)
    H, W = out_hw
    acc = None
    for (r0, r1, c0, c1, top, left) in branches:
        piece = _slice(_slice(b, r0, r1, 1), c0, c1, 2)
        h, wd = r1 - r0, c1 - c0
        piece = _call("reshape", piece, newshape=[1, h, wd])
        padded = _call("nn.pad", piece, const(np.float32(0)),
                       pad_width=[[0, 0], [top, H - h - top], [left, W - wd - left]])
        acc = padded if acc is None else _call("add", acc, padded)
    return params, acc


@st.composite
def _chains(draw):
    n, m = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rows, cols = (n - 1) * sh + 1, (m - 1) * sw + 1
    H, W = rows + draw(st.integers(0, 2)), cols + draw(st.integers(0, 2))
    branches = []
    for _ in range(draw(st.integers(1, 3))):
        r0 = draw(st.integers(0, rows - 1))
        r1 = draw(st.integers(r0 + 1, rows))
        c0 = draw(st.integers(0, cols - 1))
        c1 = draw(st.integers(c0 + 1, cols))
        top = draw(st.integers(0, H - (r1 - r0)))
        left = draw(st.integers(0, W - (c1 - c0)))
        branches.append((r0, r1, c0, c1, top, left))
    return n, m, sh, sw, branches, (H, W)


def _check_chain(case):
    n, m, sh, sw, branches, out_hw = case
    params, body = _relay_chain(n, m, sh, sw, branches, out_hw)
    xs = np.arange(1, n * m + 1, dtype="float32")
    zs = [np.zeros(p.type_annotation.shape, "float32") for p in params[1:]]
    got = compile_function(params, body)(xs, *zs)[0]
    want = _np_chain(xs, n, m, sh, sw, branches, out_hw)
    np.testing.assert_array_equal(got, want, err_msg=str(case))


# Minimal chain that miscompiled: x(4) -> reshape(1,2,2,1) -> reshape(1,2,1,2) -> concatenate
# with zeros (1,2,2,2) on axis 2 -> reshape(1,6,2) -> strided_slice rows [0:4] -> two branches
# strided_slice -> reshape -> nn.pad to (1,4,2) -> add. The stale range made the simplifier
# turn floormod(floormod(i1, 3) + 1, 3) into floormod(i1, 3) + 1 (its range is [1, 3], not
# [0, 2]), so concatenate's `< 1` guard picked the zeros for row 2: got 0, 0 instead of 3, 4.
MINIMAL = (2, 2, 3, 1, [(0, 2, 0, 1, 0, 0), (1, 4, 0, 2, 0, 0)], (4, 2))


def test_minimal_concat_slice_pad_add_chain():
    _check_chain(MINIMAL)


@settings(max_examples=30, deadline=None)
@given(_chains())
@example(MINIMAL)
def test_reshape_concat_slice_pad_add_chains(case):
    _check_chain(case)
