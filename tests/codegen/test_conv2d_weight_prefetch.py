"""The direct conv schedule's weight prefetch (conv micro-kernel's w_next argument).

Every call prefetches `PF` lines a channel over its `C` channels from w_next on. Those
addresses must stay inside the packed weights (past the end would be harmless on x86, but
the schedule keeps them in anyway), and the calls of one weight block together must cover
the weights that follow it, the ones the schedule reads next. The TIR of each case is walked
iteration by iteration (loops, lets and guards evaluated) to collect every call's arguments.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.lower import lower
from codegen.schedules import Conv2dConfig, conv2d_nchw_packed
from codegen.tir.expr import Call
from codegen.tir.stmt import Allocate, Evaluate, For, IfThenElse, LetStmt, SeqStmt

from ._tir_eval import flat_index, index_value
from .test_schedule_conv2d import _f32, _pack, ref_conv

from tests.schedule_helpers import conv_pack, host

def _conv_calls(stmt, env: dict, out: list, loops: tuple = ()) -> None:
    """(w offset, channels, w_next offset, prefetch lines, loop indices but the pixel
    tile's) per call."""
    if isinstance(stmt, SeqStmt):
        for s in stmt.stmts:
            _conv_calls(s, env, out, loops)
    elif isinstance(stmt, For):
        if "relayjit.ukr.conv_" in str(stmt.body):
            for i in range(stmt.extent):
                tile = "_tl" in stmt.var.name
                _conv_calls(stmt.body, {**env, stmt.var: i}, out,
                            loops if tile else loops + ((stmt.var.name, i),))
    elif isinstance(stmt, LetStmt):
        _conv_calls(stmt.body, {**env, stmt.var: index_value(stmt.value, env)}
                    if stmt.value.dtype == "int64" else env, out, loops)
    elif isinstance(stmt, Allocate):
        _conv_calls(stmt.body, env, out, loops)
    elif isinstance(stmt, IfThenElse):
        if "relayjit.ukr.conv_" in str(stmt):
            branch = stmt.then_body if index_value(stmt.cond, env) else stmt.else_body
            if branch is not None:
                _conv_calls(branch, env, out, loops)
    elif isinstance(stmt, Evaluate) and isinstance(stmt.value, Call) \
            and stmt.value.name.startswith("relayjit.ukr.conv_"):
        w, _, _, c, w_next = stmt.value.args[:5]
        out.append((flat_index(w, env), index_value(c, env), flat_index(w_next, env),
                    int(stmt.value.name.rsplit("_", 1)[1]), loops))


CASES = [
    # x shape, OIHW weight shape, strides, padding, groups: channel blocks with a tail
    # (47 channels: 24 + 23), several whole blocks, groups, pixel blocks over 48 tiles
    ((1, 47, 6, 6), (40, 47, 3, 3), (1, 1), (1, 1, 1, 1), 1),
    ((1, 96, 7, 7), (64, 96, 3, 3), (1, 1), (1, 1, 1, 1), 1),
    ((1, 16, 12, 12), (32, 4, 3, 3), (1, 1), (1, 1, 1, 1), 4),
    ((1, 128, 30, 30), (64, 128, 1, 1), (1, 1), (0, 0, 0, 0), 1),
    ((1, 200, 7, 7), (96, 200, 1, 1), (2, 2), (0, 0, 0, 0), 1),
]


def _direct(xs, ws, st, pad, groups, config=None):
    geo = conv_pack(ws[0], ws[1], ws[2], ws[3], groups)
    x, wp = te.placeholder(xs, name="x"), te.placeholder(geo, name="wp")
    return [x, wp], conv2d_nchw_packed(x, wp, st, pad, (1, 1), groups, channels=ws[0],
                                       options=host(), config=config), geo


@pytest.mark.parametrize("xs,ws,st,pad,groups", CASES)
def test_prefetch_stays_inside_the_weights_and_covers_the_next_block(
        xs, ws, st, pad, groups, width) -> None:
    inputs, conv, geo = _direct(xs, ws, st, pad, groups)
    func = lower("conv_pf", inputs, [conv])
    calls: list = []
    _conv_calls(func.body, {}, calls)
    assert calls, "the case does not run the direct micro-kernel"
    total = math.prod(geo)
    taps_kb = geo[3] * geo[4] * geo[5]
    blocks: dict = {}
    for w, c, nxt, lines, loops in calls:
        assert lines > 0, "no prefetch"
        span = c * lines * 16
        assert 0 <= nxt and nxt + span <= total, \
            f"prefetch [{nxt}, {nxt + span}) outside the packed weights [0, {total})"
        blocks.setdefault((w, c, loops), []).append((nxt, nxt + span))
    biggest = max(c for _, c, _ in blocks) * taps_kb
    tiles = max(len(v) for v in blocks.values())
    for (w, c, _), slices in blocks.items():
        if len(slices) < tiles:  # the last pixel block's few tiles
            continue
        want = (w + c * taps_kb, min(w + c * taps_kb + biggest, total))
        covered = want[0]
        for lo, hi in sorted(slices):
            if lo <= covered:
                covered = max(covered, hi)
        assert covered >= want[1] or want[0] >= total, \
            f"block at {w}: the next block {want} is prefetched up to {covered} only"


def test_prefetch_off_leaves_the_calls_without(width) -> None:
    inputs, conv, _ = _direct(*CASES[1], config=Conv2dConfig(prefetch_weights=False))
    calls: list = []
    _conv_calls(lower("conv_nopf", inputs, [conv]).body, {}, calls)
    assert calls and all(lines == 0 for *_, lines, _ in calls)


@pytest.mark.parametrize("xs,ws,st,pad,groups", [CASES[0], CASES[4]])
def test_prefetching_conv_is_exact(xs, ws, st, pad, groups, width) -> None:
    inputs, conv, _ = _direct(xs, ws, st, pad, groups)
    run = build_te(inputs, [conv], "conv_pf_run")
    a, w = _f32(*xs), _f32(*ws)
    want = ref_conv(a, w, st, pad, (1, 1), groups)
    np.testing.assert_allclose(run(a, _pack(w, groups))[0], want, rtol=1e-4, atol=1e-4)
