"""Winograd F(m x m, 3 x 3) conv2d (stride 1, dilation 1, groups 1), NCHW, float32.

Lavin & Gray's minimal filtering: an (m + 2)^2 input tile d gives an m x m output tile as
Y = A^T [ (G g G^T) . (B^T d B) ] A, so the 9 m^2 multiplies of a direct tile become
(m + 2)^2, summed over input channels as (m + 2)^2 independent GEMMs:

    U[xi, k, c]  = (G w[k, c] G^T)[xi]          weights, transformed at compile time
    V[xi, c, t]  = (B^T d[c, t] B)[xi]           per input channel and output tile t
    M[xi, k, t]  = sum_c U[xi, k, c] V[xi, c, t] the GEMM schedule, batch = xi, U's rows
                                                 read in place (u_in_place)
    out[k, tile] = A^T M[:, k, t] A              with the fused epilogue

F(4x4, 3x3) does 2.25 multiplies an output instead of 9; its rounding error is about 16x
direct convolution's (measured ~5e-6 relative on 256-channel layers), F(2x2, 3x3)'s the
same as direct's for 4 multiplies an output. The transforms are unrolled with their constant
coefficients (zeros and ones skipped), every patch and tile value bound once (LetStmt).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import ClassVar

import numpy as np

from .. import te
from ..options import CodegenOptions
from ..tir.expr import Expr, Load, Var
from ..tir.ops import const, floordiv, floormod, ge, if_then_else, logical_and, lt
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, LetStmt, Stmt, Store, seq
from .common import F32, addr, ceil_div, imm, mark_epilogue, var, zero
from .config import ScheduleConfig, pick
from ..parallel import fused_parallel
from .conv2d_nchwc import pad_blocked
from .gemm import gemm_stmt
from .gemm_config import GemmConfig, resolve_gemm

TILE_SIZES = (2, 4)  # the output tiles m of F(m x m, 3 x 3) this schedule has matrices for
# Read in place, each row tile of U also prefetches into L2 the one PREFETCH_U tiles later
# (gemm_stmt's prefetch_a; 0: none): U is read once a run and came cold. One thread, CPU time,
# same-process A/B, 1 tile ahead vs none: ResNet-50 0.94-0.97x, Inception-v2 0.90-0.92x,
# VGG-19 0.96-0.97x; 2 vs 1: 0.998x, 0.978x, 0.985x; 4 vs 2: 1.011x, 0.972x, 0.991x.
PREFETCH_U = 2


@dataclass(frozen=True)
class WinogradConfig(ScheduleConfig):
    """F(m x m, 3 x 3): the output tile, how the GEMMs read U, and their tiles."""

    nested: ClassVar[dict[str, type]] = {"gemm": GemmConfig}

    tile_size: int | None = None    # m (TILE_SIZES); the transformed weight is [m+2, m+2, K, C]
    # the GEMMs read U's rows in place (gemm_stmt's a_rows: its `_rows` micro-kernel, each row
    # tile streaming its rows while it computes) rather than packing each block of U first
    u_in_place: bool | None = None
    prefetch_u: int | None = None   # row tiles ahead each U row tile prefetches (0: none)
    gemm: GemmConfig | None = None


def winograd_tile_size(k: int, c: int, oh: int, ow: int) -> int | None:
    """The output tile m for a 3x3 stride-1 conv of C -> K channels onto oh x ow, or None
    when direct convolution is the better choice. Measured per layer against the packed
    direct schedule (this project's benchmarks, Zen 4): the transforms must be worth the
    multiplies they save (C, K >= 64: 32 channels broke even), the (m+2)^2 GEMMs need at
    least 36 tiles to run at speed (F(4x4) from 24x24 outputs, F(2x2) from 12x12; 7x7 stays
    direct), and with 64 input channels more than 256 tiles (112x112) spill the transformed
    tiles out of cache (0.8x); 128+ channels gain 1.2-1.7x at every size tried. F(2x2)
    saves too little for 64 input channels (SqueezeNet's 64->256 at 13x13: 0.45 ms direct,
    0.54 ms Winograd) and breaks even at 256 (14x14)."""
    if k < 64 or c < 64:
        return None
    for m in (4, 2):
        tiles = -(-oh // m) * -(-ow // m)
        if tiles >= 36:
            return m if c >= 128 or (m == 4 and tiles <= 256) else None
    return None


def resolve_winograd(k: int, c: int, oh: int, ow: int, options: CodegenOptions,
                     given: WinogradConfig | None = None) -> WinogradConfig:
    """The configuration of F(m x m, 3 x 3) over C -> K channels onto oh x ow: given fields,
    the rest by default (the tile: winograd_tile_size's, F(2x2) where it finds none)."""
    g = given or WinogradConfig()
    m = pick(g.tile_size, lambda: winograd_tile_size(k, c, oh, ow) or 2)
    if m not in TILE_SIZES:
        raise ValueError(f"WinogradConfig: tile_size {m}; expected one of {TILE_SIZES}")
    in_place = pick(g.u_in_place, lambda: True)
    tiles = ceil_div(oh, m) * ceil_div(ow, m)
    return WinogradConfig(m, in_place, pick(g.prefetch_u, lambda: PREFETCH_U),
                          resolve_gemm(k, tiles, c, in_place, options, g.gemm))


_F = Fraction
# (G, B^T, A^T) with exact rational entries (points 0, 1, -1 for m = 2; 0, +-1, +-2 for m = 4)
MATRICES = {
    2: ([[1, 0, 0], [_F(1, 2), _F(1, 2), _F(1, 2)], [_F(1, 2), _F(-1, 2), _F(1, 2)], [0, 0, 1]],
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]]),
    4: ([[_F(1, 4), 0, 0], [_F(-1, 6), _F(-1, 6), _F(-1, 6)], [_F(-1, 6), _F(1, 6), _F(-1, 6)],
         [_F(1, 24), _F(1, 12), _F(1, 6)], [_F(1, 24), _F(-1, 12), _F(1, 6)], [0, 0, 1]],
        [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
}


def transform_weight(w: np.ndarray, m: int) -> np.ndarray:
    """U[xi, nu, k, c] = (G w[k, c] G^T)[xi, nu] (numpy, float64 inside; compile time)."""
    g = np.array(MATRICES[m][0], dtype=np.float64)
    return np.einsum("xa,kcab,yb->xykc", g, w.astype(np.float64), g).astype(w.dtype)


def weight_transform(w: te.Tensor, m: int, name: str = "T_winograd_weight") -> te.Tensor:
    """The compiled transform_weight (what FoldConstant runs): U[a, a, K, C] from w[K, C, 3, 3]."""
    k, c = w.shape[:2]
    a = m + 2
    g = MATRICES[m][0]

    def fcompute(ins, outs):
        wb, ub = ins[0], outs[0]
        ki, ci = var(f"{name}_k"), var(f"{name}_c")
        taps = [[Var(f"{name}_w{i}{j}", F32) for j in range(3)] for i in range(3)]
        cols = [[Var(f"{name}_t{p}{j}", F32) for j in range(3)] for p in range(a)]
        stores = [Store(ub, (imm(p), imm(q), ki, ci),
                        _lincomb(g[q], [cols[p][j] for j in range(3)]))
                  for p in range(a) for q in range(a)]
        body = _bind([cols[p][j] for p in range(a) for j in range(3)],
                     [_lincomb(g[p], [taps[i][j] for i in range(3)])
                      for p in range(a) for j in range(3)], seq(*stores))
        body = _bind([taps[i][j] for i in range(3) for j in range(3)],
                     [Load(wb, (ki, ci, imm(i), imm(j)), F32)
                      for i in range(3) for j in range(3)], body)
        return For(ki, k, For(ci, c, body))

    return te.extern((a, a, k, c), [w], fcompute, name=name)


def _lincomb(coefs, values) -> Expr | None:
    """sum(c * v) over nonzero c, with 1 and -1 as adds and subtracts."""
    total: Expr | None = None
    for c, v in zip(coefs, values):
        if c == 0:
            continue
        if c == 1 or c == -1:
            term, negative = v, c == -1
        else:
            term, negative = v * const(float(abs(c)), v.dtype), c < 0
        if total is None:
            total = -term if negative else term
        else:
            total = total - term if negative else total + term
    return total if total is not None else zero()


def _bind(names: list[Var], values: list[Expr], body: Stmt) -> Stmt:
    for v, e in reversed(list(zip(names, values))):
        body = LetStmt(v, e, body)
    return body


def conv2d_winograd(x: te.Tensor, u: te.Tensor, out_shape: tuple, padding=(0, 0, 0, 0),
                    name: str = "T_conv2d_winograd", *, options: CodegenOptions,
                    config: WinogradConfig | None = None) -> te.Tensor:
    """x [N, C, H, W] and U [a, a, K, C] (transform_weight, a = m + 2) -> out_shape [N, K, OH,
    OW]; or channel-blocked (NCHW[x]c), x [N, C/x, H, W, x] -> [N, K/x, OH, OW, x]: only the
    padded copy of step 1 and the input transform (a channel block at once, vectorised over
    its x channels), and the output transform's stores (whole vectors) change."""
    block = x.shape[4] if len(x.shape) == 5 else 0
    if block:
        n, cb, h, wd, _ = x.shape
        c = cb * block
        _, _, oh, ow, _ = out_shape
    else:
        n, c, h, wd = x.shape
        _, _, oh, ow = out_shape
    a = u.shape[0]
    m = a - 2
    k = u.shape[2]

    th, tw = ceil_div(oh, m), ceil_div(ow, m)
    tiles = th * tw
    config = config or WinogradConfig()
    if config.tile_size not in (None, m):
        raise ValueError(f"{name}: U {u.shape} is transformed for F({m}x{m}), the "
                         f"configuration says F({config.tile_size}x{config.tile_size})")
    config = resolve_winograd(k, c, oh, ow, options, replace(config, tile_size=m))
    par = options.parallel
    pt, pl = padding[0], padding[1]
    hp, wp = th * m + 2, tw * m + 2  # padded input covering every tile
    _, bt, at = MATRICES[m]

    def fcompute(ins, outs, epilogue=None):
        xb, ub = ins
        out = outs[0]
        # V[xi][c][t], blocked V[xi][c/x][t][x]: the input transform's stores are vectors, and
        # the GEMM's packing of B gathers each panel's tiles x floats apart
        vbuf = Buffer(f"{name}_v", (a * a, c // block, tiles, block) if block
                      else (a * a, c, tiles), F32)

        def v_at(xi, ci, t) -> tuple:
            return (xi, floordiv(ci, block), t, floormod(ci, block)) if block else (xi, ci, t)
        mbuf = Buffer(f"{name}_m", (a * a, k, tiles), F32)
        ni = var(f"{name}_n")
        # 1. zero-padded input, big enough for whole tiles (blocked: Xp[C/x][Hp][Wp][x])
        if block:
            xpad, pad = pad_blocked(xb, ni, dict(c=c, h=h, w=wd, hp=hp, wp=wp, pt=pt, pl=pl,
                                                 blk=block), name, par, always=True)
        else:
            xpad = Buffer(f"{name}_xpad", (c, hp, wp), F32)
            ci, yi, xi = var(f"{name}_pc"), var(f"{name}_py"), var(f"{name}_px")
            iy, ix = yi - pt, xi - pl
            inside = logical_and(logical_and(ge(iy, 0), lt(iy, h)),
                                 logical_and(ge(ix, 0), lt(ix, wd)))
            pad = par.copy_loops([ci, yi], [c, hp], For(xi, wp, Store(
                xpad, (ci, yi, xi), if_then_else(inside, Load(xb, (ni, ci, iy, ix), F32),
                                                 zero())), "vectorized"), c * hp * wp,
                f"{name}_pad")
        # 2. input transform: V[:, c, t] = B^T d B, d the tile's a x a patch (blocked: the x
        # channels of a block at once, one vector load a patch value)
        c2, ty, tx = var(f"{name}_vc"), var(f"{name}_vy"), var(f"{name}_vx")
        cb2, cv = var(f"{name}_vcb"), var(f"{name}_vcv")  # blocked: c2 = cb2 * x + cv
        d = [[Var(f"{name}_d{i}{j}", F32) for j in range(a)] for i in range(a)]
        rowt = [[Var(f"{name}_r{i}{j}", F32) for j in range(a)] for i in range(a)]
        t = ty * tw + tx
        stores = [Store(vbuf, (imm(p * a + q), cb2, t, cv) if block else (imm(p * a + q), c2, t),
                        _lincomb([bt[p][i] for i in range(a)], [rowt[i][q] for i in range(a)]))
                  for p in range(a) for q in range(a)]
        body = _bind([rowt[i][q] for i in range(a) for q in range(a)],
                     [_lincomb(bt[q], d[i]) for i in range(a) for q in range(a)], seq(*stores))
        # a transform: a^3 multiply-adds each way, a^2 values read and written per tile
        # (channels x tile rows in parallel: enough tasks for many threads)
        in_threads = par.threads(4 * a ** 3 * c * tiles, 8 * a * a * c * tiles)
        if block:
            body = _bind([d[i][j] for i in range(a) for j in range(a)],
                         [Load(xpad, (cb2, ty * m + i, tx * m + j, cv), F32)
                          for i in range(a) for j in range(a)], body)
            transform_in = _channel_rows(cb2, c // block, ty, th, For(tx, tw, For(
                cv, block, body, "vectorized")), in_threads, f"{name}_vin")
        else:
            body = _bind([d[i][j] for i in range(a) for j in range(a)],
                         [Load(xpad, (c2, ty * m + i, tx * m + j), F32)
                          for i in range(a) for j in range(a)], body)
            transform_in = _channel_rows(c2, c, ty, th, For(tx, tw, body), in_threads,
                                         f"{name}_vin")
        # 3. a*a GEMMs over the input channels
        gemm = gemm_stmt(k, tiles, c, (a * a,),
                         lambda b, i, j: Load(ub, (floordiv(b[0], a), floormod(b[0], a), i, j),
                                              F32),
                         lambda b, i, j: Load(vbuf, v_at(b[0], j, i), F32), mbuf, "mk", "kn",
                         None, f"{name}_gemm", options, config.gemm,
                         a_rows=(lambda b, i, j: addr(ub, floordiv(b[0], a), floormod(b[0], a),
                                                      i, j), c) if config.u_in_place else None,
                         prefetch_a=config.prefetch_u)
        # 4. output transform + epilogue: out tile = A^T M A
        ko, uy, ux = var(f"{name}_ok"), var(f"{name}_oy"), var(f"{name}_ox")
        kbo, kv = var(f"{name}_okb"), var(f"{name}_okv")  # blocked: ko = kbo * x + kv
        tt = uy * tw + ux
        mv = [[Var(f"{name}_m{p}{q}", F32) for q in range(a)] for p in range(a)]
        half = [[Var(f"{name}_h{p}{j}", F32) for j in range(m)] for p in range(a)]
        outs_st = []
        for i in range(m):
            for j in range(m):
                val = _lincomb(at[i], [half[p][j] for p in range(a)])
                idx = (ni, kbo, uy * m + i, ux * m + j, kv) if block \
                    else (ni, ko, uy * m + i, ux * m + j)
                if epilogue is not None:
                    val = epilogue(val, idx)
                st: Stmt = Store(out, idx, val)
                conds = []
                if oh % m and i >= oh % m:
                    conds.append(lt(uy, th - 1))
                if ow % m and j >= ow % m:
                    conds.append(lt(ux, tw - 1))
                if conds:
                    cond = conds[0] if len(conds) == 1 else logical_and(*conds)
                    st = IfThenElse(cond, st)
                outs_st.append(st)
        body = _bind([half[p][j] for p in range(a) for j in range(m)],
                     [_lincomb(at[j], mv[p]) for p in range(a) for j in range(m)],
                     seq(*outs_st))
        body = _bind([mv[p][q] for p in range(a) for q in range(a)],
                     [Load(mbuf, (imm(p * a + q), ko, tt), F32)
                      for p in range(a) for q in range(a)], body)
        out_threads = par.threads(4 * a ** 3 * k * tiles, 8 * a * a * k * tiles)
        if block:  # a tile's channel block innermost: its stores are whole vectors
            transform_out = _channel_rows(kbo, k // block, uy, th, For(ux, tw, For(
                kv, block, LetStmt(ko, kbo * block + kv, body), "vectorized")), out_threads,
                f"{name}_vout")
        else:
            transform_out = _channel_rows(ko, k, uy, th, For(ux, tw, body), out_threads,
                                          f"{name}_vout")
        stmt = For(ni, n, seq(pad, transform_in, gemm, transform_out))
        for buf in (mbuf, vbuf, xpad):
            stmt = Allocate(buf, stmt)
        return stmt

    # in place: the output transform stores each element once, from M through the epilogue,
    # and nothing reads the output
    return te.extern(out_shape, [x, u], mark_epilogue(fcompute, True), name=name)


def _channel_rows(ch: Var, channels: int, row: Var, rows: int, body: Stmt, threads: int,
                  name: str) -> Stmt:
    """for ch, for row: body; the pairs in one parallel loop on `threads` threads when that is
    more than one (a transform's channel blocks alone were too few tasks for 16 threads)."""
    if threads > 1:
        return fused_parallel([ch, row], [channels, rows], body, name, threads)
    return For(ch, channels, For(row, rows, body))
