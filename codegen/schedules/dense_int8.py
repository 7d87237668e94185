"""int8 dense: x[..., K] (uint8) . W[N, K]^T (int8) -> int32 [..., N], the weight packed at
compile time (int8_config.int8_dense_geometry: panels of `block` columns, four K values of a
column a 32-bit lane), through the Int8Dot micro-kernel (vpdpbusd where the target has VNNI).

    C[m, n] = sum_k x[m, k] * W[n, k]        (raw sums: no zero points; the strategy's
                                              rewrite adds their terms around it in Relay)

    A's rows are read in place (K % 4 == 0; else copied once into rows padded to whole
    groups of four, zero filled) and broadcast four bytes at a time
    parallel for (panel jt, row tile it):          (jt outer: a thread's consecutive tiles
                                                    share the panel, L1/L2 resident)
      T[P][NR] = micro-kernel(rows m0 .. m0+P-1, panel jt, all of K)
      out[m0 + i, jt*NR + j] = epilogue(T[i][j])   (vectorised over j; each output element
                                                    stored once: the epilogue may cast, as a
                                                    requantisation to uint8 or a dequantise
                                                    to float does)

A partial row tile repeats the last row (its extra rows are not stored); a partial panel
stores its own static column count.
"""
from __future__ import annotations

from .. import te
from ..llvm.microkernels.descriptors import DOT_NAMES, Int8Dot
from ..options import CodegenOptions
from ..parallel import fused_parallel
from ..tir.expr import Load
from ..tir.ops import const, if_then_else, lt
from ..tir.ops import min as tir_min
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import addr, ceil_div, imm, mark_epilogue, ukr_call, var
from .gemm import _unflatten
from .int8_config import (GEMM_UNROLL, Int8Config, int8_dense_geometry, int8_threads,
                          resolve_int8)

U8, I8, I32 = "uint8", "int8", "int32"


def dense_int8(x: te.Tensor, wp: te.Tensor, units: int, name: str = "T_dense_int8", *,
               options: CodegenOptions, config: Int8Config | None = None) -> te.Tensor:
    """x[..., K] uint8 times the packed int8 weight of `units` columns -> int32 [..., units]."""
    *lead, k = x.shape
    n = units
    m = 1
    for d in lead:
        m *= d
    config = resolve_int8(options, config, columns=n)
    expected = int8_dense_geometry(n, k, config.block())
    if x.dtype != U8 or wp.dtype != I8 or tuple(wp.shape) != expected:
        raise ValueError(f"dense_int8: data {x.dtype} {x.shape} and packed weight {wp.dtype} "
                         f"{tuple(wp.shape)}: expected uint8 data and an int8 weight packed "
                         f"as {expected} (panels of {config.block()} columns)")

    def fcompute(ins, outs, epilogue=None):
        xb = ins[0]
        index = lambda i, j: (*_unflatten(i, lead), j)  # noqa: E731
        return int8_gemm_stmt(m, n, k, lambda i, kk: Load(xb, index(i, kk), U8),
                              lambda i: addr(xb, *index(i, 0)), index, ins[1], outs[0],
                              epilogue, name, options, config)

    # each output element stored once, from the tile through the epilogue: it may cast
    return te.extern((*lead, n), [x, wp], mark_epilogue(fcompute, in_place=True), name=name,
                     dtype=I32, kernel_attrs={"prefer_vector_width": 32 * config.lanes})


def int8_gemm_stmt(m: int, n: int, k: int, a_load, a_row, index, wp: Buffer, out: Buffer,
                   epilogue, name: str, options: CodegenOptions, config: Int8Config) -> Stmt:
    """out[index(i, j)] = epilogue(sum_k A[i, k] W[j, k]), A[i, k] = a_load(i, k) (uint8),
    W packed [N/NR][K/4][NR][4] in wp. a_row(i): the address of A's row i where its K values
    are contiguous and may be read in place (None: the rows are copied first)."""
    if m == 0 or n == 0:
        return seq()
    P, NR, lanes = config.tile_rows, config.block(), config.lanes  # noqa: N806
    groups = ceil_div(k, 4)
    nt, mt = ceil_div(n, NR), ceil_div(m, P)
    par = options.parallel
    # rows padded to whole groups of four (zeros: the packed weight is zero there too)
    ap = None if k % 4 == 0 and a_row is not None else \
        Buffer(f"{name}_apad", (m, groups * 4), U8)
    pack = seq()
    if ap is not None:
        pi, pk = var(f"{name}_pi"), var(f"{name}_pk")
        val = a_load(pi, pk) if k % 4 == 0 else \
            if_then_else(lt(pk, k), a_load(pi, tir_min(pk, imm(k - 1))), const(0, U8))
        pack = par.copy_loops([pi, pk], [m, groups * 4], Store(ap, (pi, pk), val),
                              m * groups, f"{name}_apad")  # bytes: a quarter of the floats

    def row(i):
        return addr(ap, i, 0) if ap is not None else a_row(i)

    jt, it = var(f"{name}_jt"), var(f"{name}_it")
    m0, n0 = it * P, jt * NR
    tile = Buffer(f"{name}_tile", (P, NR), I32)
    # each tile of panel jt prefetches its share of panel jt + 1 (read next, from memory)
    share = ceil_div(groups, mt)  # groups of the next panel a tile prefetches
    trips = max(1, groups // GEMM_UNROLL)
    lines = ceil_div(share * NR * 4, 64 * trips) if nt > 1 else 0
    kern = Int8Dot(P, NR // lanes, lanes, 1, 1, 0, 4, 1, 1, DOT_NAMES.index(config.dot), False,
                   GEMM_UNROLL, lines)
    rows = [row(tir_min(m0 + j, imm(m - 1)) if m % P else m0 + j) for j in range(P)]
    w_next = addr(wp, tir_min(jt + 1, imm(nt - 1)), tir_min(it * share, imm(groups - 1)), 0, 0)
    call = ukr_call(kern, addr(wp, jt, 0, 0, 0), addr(tile, 0, 0), 0, groups, w_next, *rows)
    ti, tj = var(f"{name}_ti"), var(f"{name}_tj")

    def store(nrows: int, ncols: int) -> Stmt:
        idx = index(m0 + ti, n0 + tj)
        val = Load(tile, (ti, tj), I32)
        if epilogue is not None:
            val = epilogue(val, idx)
        return For(ti, nrows, For(tj, ncols, Store(out, idx, val), "vectorized"))

    def by_columns(nrows: int) -> Stmt:
        if n % NR == 0:
            return store(nrows, NR)
        return IfThenElse(lt(jt, nt - 1), store(nrows, NR), store(nrows, n % NR))

    stores = by_columns(P) if m % P == 0 else \
        IfThenElse(lt(it, mt - 1), by_columns(P), by_columns(m % P))
    body = Allocate(tile, seq(call, stores))
    threads = int8_threads(par, m * n * k, m * k + n * k + 4 * m * n)
    if threads > 1:
        loops = fused_parallel([jt, it], [nt, mt], body, name, threads)
    else:
        loops = For(jt, nt, For(it, mt, body))
    stmt = seq(pack, loops)
    return Allocate(ap, stmt) if ap is not None else stmt
