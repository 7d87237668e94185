"""The GEMM schedule's prefetch of the next row tile of A read in place (`gemm_*_rows_pf`'s
a_next), which Winograd's GEMMs use for U.

The TIR of each case is walked iteration by iteration (loops, lets, selects and guards
evaluated) to collect every micro-kernel call. Prefetched addresses must stay inside the
buffer they point into (past the end would be harmless on x86, but the schedule keeps them
in), and must name what the schedule reads next; the results must still equal numpy's.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.llvm.microkernels import by_symbol
from codegen.lower import lower
from codegen.schedules import winograd
from codegen.schedules.gemm import dense
from codegen.tir.expr import Call, Load
from codegen.tir.stmt import Allocate, Evaluate, For, IfThenElse, LetStmt, SeqStmt

from ._tir_eval import flat_index, index_value
from .test_schedule_conv2d import _f32, ref_conv

from tests.schedule_helpers import host

def _calls(stmt, env: dict, prefix: str, out: list) -> None:
    """(kernel name, args evaluated: (buffer, flat offset) for addresses, ints else) per
    micro-kernel call whose name starts with prefix, in execution order."""
    if prefix not in str(stmt):
        return
    if isinstance(stmt, SeqStmt):
        for s in stmt.stmts:
            _calls(s, env, prefix, out)
    elif isinstance(stmt, For):
        for i in range(stmt.extent):
            _calls(stmt.body, {**env, stmt.var: i}, prefix, out)
    elif isinstance(stmt, LetStmt):
        _calls(stmt.body, {**env, stmt.var: index_value(stmt.value, env)}
               if stmt.value.dtype == "int64" else env, prefix, out)
    elif isinstance(stmt, Allocate):
        _calls(stmt.body, env, prefix, out)
    elif isinstance(stmt, IfThenElse):
        branch = stmt.then_body if index_value(stmt.cond, env) else stmt.else_body
        if branch is not None:
            _calls(branch, env, prefix, out)
    elif isinstance(stmt, Evaluate) and isinstance(stmt.value, Call) \
            and stmt.value.name.startswith(prefix):
        args = tuple((a.buffer, flat_index(a, env)) if isinstance(a, Load) else index_value(a, env)
                     for a in stmt.value.args)
        out.append((stmt.value.name, args))


def _row_tile_calls(func) -> list:
    calls: list = []
    _calls(func.body, {}, "relayjit.ukr.gemm_", calls)
    return [(name, args) for name, args in calls if name.endswith("_rows_pf")]


def _check_row_tiles(calls: list, ahead: int) -> None:
    """a_next's mr rows of `depth` floats lie inside U [a, a, K, C], and name the whole row
    tile `ahead` tiles later: counted on into the next batches (xi) when C is one K block,
    within the batch when it is several; the last whole tile at the end. Some call reads it."""
    assert calls, "no call reads A in place with the prefetch"
    read = {args[1][1] for _, args in calls}
    one_block = all(args[0] == args[1][0].shape[3] for _, args in calls)
    for i, (name, (depth, (abuf, a), lda, *_rest, (nbuf, a_next))) in enumerate(calls):
        mr = by_symbol(name).mr
        total = math.prod(abuf.shape)
        assert nbuf is abuf, "a_next points into another buffer than A"
        assert 0 <= a_next and a_next + (mr - 1) * lda + depth <= total, \
            f"a_next rows [{a_next}, {a_next + (mr - 1) * lda + depth}) outside A [0, {total})"
        k, c = abuf.shape[2:]
        assert lda == c
        per, tiles, batches = k * c, k // mr, abuf.shape[0] * abuf.shape[1]
        xi, row, col = a // per, a % per // c, a % c
        if one_block:
            t = min(xi * tiles + row // mr + ahead, batches * tiles - 1)
            want = t // tiles * per + t % tiles * mr * c
        else:
            want = xi * per + min(row // mr + ahead, tiles - 1) * mr * c + col
        assert a_next == want, f"call {i} at {a} prefetches {a_next}, not {want}"
        assert a_next in read, f"call {i} prefetches {a_next}, a tile no call reads"


WINOGRAD_CASES = [  # (x shape, K, tile m): 8- or 6-row tiles with a tail, one and several
    ((1, 16, 6, 6), 40, 2),  # tiles, two images, two K blocks of 150 channels with AVX2
    ((1, 24, 14, 14), 32, 4),
    ((2, 8, 5, 7), 16, 2),
    ((1, 300, 4, 4), 20, 2),
]


def _winograd(xs, k, m, prefetch=None):
    a = m + 2
    x, u = te.placeholder(xs, name="x"), te.placeholder((a, a, k, xs[1]), name="u")
    return [x, u], winograd.conv2d_winograd(
        x, u, (xs[0], k, xs[2], xs[3]), (1, 1, 1, 1), options=host(),
        config=winograd.WinogradConfig(prefetch_u=prefetch))


@pytest.mark.parametrize("xs,k,m", WINOGRAD_CASES)
@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_winograd_prefetches_a_later_row_tile_of_u_inside_u(xs, k, m, ahead, width) -> None:
    inputs, conv = _winograd(xs, k, m, ahead)
    _check_row_tiles(_row_tile_calls(lower("wino_pf", inputs, [conv])), ahead)


def test_prefetch_off_or_dense_calls_the_plain_rows_kernel(width) -> None:
    """Dense's A (activations, in cache) is read in place without the prefetch."""
    x, w = te.placeholder((16, 70), name="x"), te.placeholder((45, 70), name="w")
    for inputs, out in ((x, w), dense(x, w, options=host())), _winograd(*WINOGRAD_CASES[0],
                                                                          prefetch=0):
        calls: list = []
        _calls(lower("rows_nopf", list(inputs), [out]).body, {}, "relayjit.ukr.gemm_", calls)
        assert calls and all(not name.endswith("_pf") for name, _ in calls)
        assert any(name.endswith("_rows") for name, _ in calls)


@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("xs,k,m", WINOGRAD_CASES[::3])
def test_prefetching_winograd_equals_convolution(xs, k, m, prefetch, width) -> None:
    w = (_f32(k, xs[1], 3, 3) / np.sqrt(9 * xs[1])).astype("f4")
    inputs, conv = _winograd(xs, k, m, prefetch)
    run = build_te(inputs, [conv], f"winograd_pf{int(prefetch)}")
    xa = _f32(*xs)
    want = ref_conv(xa, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    np.testing.assert_allclose(run(xa, winograd.transform_weight(w, m))[0], want,
                               rtol=1e-4, atol=1e-4)


def test_row_tile_prefetching_kernel_keeps_its_accumulators_in_registers(width) -> None:
    """`gemm_*_rows_pf` prefetches the next B panel's lines (as the plain kernel does) plus,
    every fourth turn of its k loop, one line of each of the next tile's mr rows; no vector
    register touches the stack (its general registers run out: the next tile's row addresses
    are reloaded from the stack in that one-in-four block, not in the FMA loop's)."""
    from codegen.jit import get_assembly

    inputs, conv = _winograd((1, 64, 14, 14), 64, 4)
    asm = get_assembly([lower("wino_asm", inputs, [conv])], options=host())
    start = asm.index("_rows_pf:")
    name = asm[asm.rindex("relayjit.ukr.", 0, start):start]
    mr = by_symbol(name).mr
    body = asm[start:]
    body = body[:body.index(".Lfunc_end")]
    assert body.count("prefetcht1") == 4 * 2 * width * 4 // 64 + mr
    vector_stack = [ln.strip() for ln in body.splitlines()
                    if "%rsp" in ln and ("mm" in ln or "vmov" in ln)]
    assert not vector_stack, f"the micro-kernel spills vectors: {vector_stack}"
