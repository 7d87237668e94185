"""Row kernels (softmax, layer norm): float32 rows along the last axis, each reduced with one
accumulator per vector lane while it sits in L1, and rows taken in groups whose passes run
interleaved (one pass over every row of the group, then the next pass): a row's reductions are
chains of dependent operations too short to fill the core alone, and the rows' are independent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..options import CodegenOptions
from ..parallel import ParallelPolicy
from ..tir.expr import Expr, Load
from ..tir.ops import const, floordiv, floormod
from ..tir.stmt import Allocate, Buffer, For, Stmt, Store, seq
from .common import F32, imm, tree_reduce, var
from .config import ScheduleConfig, pick

# Rows whose passes run interleaved (softmax 12x128x128: 2 rows 0.121 ms, 8 rows 0.119, as 4)
ROW_GROUP = 4


@dataclass(frozen=True)
class RowsConfig(ScheduleConfig):
    """A row kernel's lanes (vector_width accumulators a row) and row groups."""

    vector_width: int | None = None
    row_group: int | None = None  # rows whose passes run interleaved


def resolve_rows(options: CodegenOptions, given: RowsConfig | None = None) -> RowsConfig:
    """Given fields, the rest by default (the target's vector width, ROW_GROUP)."""
    c = given or RowsConfig()
    return RowsConfig(pick(c.vector_width, lambda: options.vector_width),
                      pick(c.row_group, lambda: ROW_GROUP))


def leading_indices(row: Expr, outer: list) -> tuple:
    """The flat row index as the tensor's leading indices (row-major)."""
    lead, rest = [], row
    for d in reversed(outer):
        lead.insert(0, floormod(rest, d) if d > 1 else imm(0))
        rest = floordiv(rest, d)
    return tuple(lead)


def lane_pass(lanes: Buffer, r: int, n: int, init: float, update: Callable, name: str) -> Stmt:
    """lanes[r, l] = init for every lane l, then update(lane index, column) -> Stmt for each
    column of an n-long row: whole vectors lane by lane, the tail on lane 0."""
    vw = lanes.shape[1]
    full, tail = divmod(n, vw)
    kb, lane, t = var(f"{name}_kb{r}"), var(f"{name}_l{r}"), var(f"{name}_t{r}")
    body = [For(lane, vw, Store(lanes, (imm(r), lane), const(init, F32)), "vectorized"),
            For(kb, full, For(lane, vw, update(lane, kb * vw + lane), "vectorized"))
            if full else None]
    if tail:
        body.append(For(t, tail, update(imm(0), imm(full * vw) + t)))
    return seq(*body)


def lanes_reduce(lanes: Buffer, r: int, combine) -> Expr:
    """combine over row r's lane accumulators (a balanced tree)."""
    return tree_reduce([Load(lanes, (imm(r), imm(i)), F32) for i in range(lanes.shape[1])],
                       combine)


def grouped_rows(rows: int, group: int, n: int, buffers: list, row_passes: Callable,
                 outer: list, name: str, par: ParallelPolicy) -> Stmt:
    """Groups of `group` rows (in parallel when the work pays), then the rows left over one
    at a time; buffers are allocated per group. row_passes(r, leading indices of the row)
    gives the passes over the group's row r; a group runs each pass over all its rows in
    turn, so the rows' short dependent chains overlap."""
    groups, rest = divmod(rows, group)
    g, rt = var(f"{name}_g"), var(f"{name}_rt")

    def rows_stmt(row_exprs: list) -> Stmt:
        passes = [row_passes(r, leading_indices(row, outer)) for r, row in enumerate(row_exprs)]
        return seq(*(seq(*p) for p in zip(*passes)))

    def allocated(body: Stmt) -> Stmt:
        for buf in buffers:
            body = Allocate(buf, body)
        return body

    # a row is read a few times and written once: about 8 flops and 12 bytes an element
    main = par.loop(g, groups, allocated(rows_stmt([g * group + r for r in range(group)])),
                    8 * rows * n, 12 * rows * n)
    if not rest:
        return main
    return seq(main, For(rt, rest, allocated(rows_stmt([imm(groups * group) + rt]))))
