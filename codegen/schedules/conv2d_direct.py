"""The direct algorithm of the NCHW conv2d schedules (codegen.schedules.conv2d): tiles of KB
output channels x P pixels through the conv micro-kernel, the input read through a padded,
subsampled or pixel-major copy, the reduction blocked over input channels and the pixels over
blocks of tiles (Conv2dConfig: channel_block, tile_pixels, row_tile, weight_block_bytes,
pixel_block_tiles, min_tasks, pixel_major, subsample_strided, prefetch_weights).
"""
from __future__ import annotations

from ..llvm.microkernels.descriptors import Conv
from ..options import CodegenOptions
from ..parallel import ParallelPolicy, fused_parallel
from ..tir.expr import Load, Var
from ..tir.ops import cast, eq, floordiv, floormod, ge, gt, if_then_else, logical_and, lt
from ..tir.ops import min as tir_min
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, LetStmt, Stmt, Store, seq
from .common import F32, addr, ceil_div, imm, padded_row, ukr_call, var, zero
from .conv2d_config import Conv2dConfig


def pad_input(xb: Buffer, ni, g: dict, name: str, par: ParallelPolicy
              ) -> tuple[Buffer | None, Stmt]:
    """Xp[C][Hp][Wp] = zero-padded x[ni] (None when no padding is needed)."""
    if g["hp"] == g["h"] and g["wp"] == g["w"]:
        return None, seq()
    xp = Buffer(f"{name}_xpad", (g["c"], g["hp"], g["wp"]), F32)
    ci, hi = var(f"{name}_pc"), var(f"{name}_ph")
    ih = hi - g["pt"]
    row = padded_plane_row(lambda q, v: Store(xp, (ci, hi, q), v),
                            lambda col: Load(xb, (ni, ci, ih, col), F32),
                            logical_and(ge(ih, 0), lt(ih, g["h"])), g["wp"], 1, -g["pl"],
                            g["w"], f"{name}_pw")
    return xp, par.copy_loops([ci, hi], [g["c"], g["hp"]], row, g["c"] * g["hp"] * g["wp"],
                              f"{name}_pad")


def _subsample(xb: Buffer, ni, g: dict, name: str, par: ParallelPolicy
               ) -> tuple[Buffer, Stmt]:
    """Xs[C][OH][OW] = x[ni, c, oh * sh, ow * sw], the only pixels a 1x1 strided conv reads:
    its tiles then read whole lines, not every other pixel of twice as many rows."""
    xs = Buffer(f"{name}_xsub", (g["c"], g["oh"], g["ow"]), F32)
    ci, hi, wi = var(f"{name}_sc"), var(f"{name}_sh"), var(f"{name}_sw")
    copy = For(wi, g["ow"], Store(xs, (ci, hi, wi), Load(
        xb, (ni, ci, hi * g["sh"], wi * g["sw"]), F32)), "vectorized")
    return xs, par.copy_loops([ci, hi], [g["c"], g["oh"]], copy, g["c"] * g["oh"] * g["ow"],
                              f"{name}_sub")


def _pixel_major(xb: Buffer, ni, g: dict, name: str, par: ParallelPolicy
                 ) -> tuple[Buffer, Stmt]:
    """Xt[pixel][C] = x[ni, c, pixel]: a 1x1 tile's pixels then read their channels as
    contiguous lines, one stream a pixel, instead of a line or two of every channel plane."""
    npix = g["h"] * g["w"]
    xt = Buffer(f"{name}_xpix", (npix, g["c"]), F32)
    pi, ci = var(f"{name}_tp"), var(f"{name}_tc")
    copy = For(ci, g["c"], Store(xt, (pi, ci), Load(
        xb, (ni, ci, floordiv(pi, g["w"]), floormod(pi, g["w"])), F32)), "vectorized")
    return xt, par.copy_loops([pi], [npix], copy, g["c"] * npix, f"{name}_pix")


def padded_plane_row(store, load, row_inside, width: int, step: int, offset: int,
                      src_width: int, name: str) -> Stmt:
    """One row of a zero-padded copy: common.padded_row when the source row is inside the
    input, zeros when it is not."""
    q = var(f"{name}_z")
    return IfThenElse(row_inside,
                      padded_row(store, load, width, step, offset, src_width, name),
                      For(q, width, store(q, zero()), "vectorized"))



def c_blocks(cg: int, bytes_per_channel: int, block_bytes: int) -> tuple[int, int, int]:
    """(CB, full blocks, tail channels): cg = CB * full + tail, CB * bytes ~ block_bytes."""
    target = max(1, block_bytes // max(1, bytes_per_channel))
    if cg <= target:
        return cg, 1, 0
    best = max(d for d in range(1, target + 1) if cg % d == 0)
    if 2 * best >= target:
        return best, cg // best, 0
    nb = ceil_div(cg, target)
    cb = ceil_div(cg, nb)
    return cb, cg // cb, cg % cb


def pixel_tile_loops(name: str, pb: Var, pblk: int, npb: int, p: int, npix: int, ow: int,
                     bound: int):
    """tiles(make_body, clamp): the loop over pixel block pb's pblk tiles of p flattened
    output pixels (rows ow wide; npb blocks cover the output), binding the (oh_j, ow_j) of
    the tile's first `bound` pixels around make_body(tl, t, ohs, ows). With clamp, pixels
    past the output's last repeat it (the micro-kernel computes whole tiles). Each call
    makes fresh variables, so one schedule can nest several such loops."""
    ntiles = ceil_div(npix, p)
    count = [0]

    def tiles(make_body, clamp: bool) -> Stmt:
        count[0] += 1
        tag = count[0]
        tl = var(f"{name}_tl{tag}")
        t = pb * pblk + tl
        ohs = [Var(f"{name}_oh{tag}_{j}", "int64") for j in range(p)]
        ows = [Var(f"{name}_ow{tag}_{j}", "int64") for j in range(p)]
        body = make_body(tl, t, ohs, ows)
        for j in reversed(range(bound)):
            pix = t * p + j
            if clamp and npix % p:
                pix = tir_min(pix, imm(npix - 1))
            body = LetStmt(ohs[j], floordiv(pix, ow), LetStmt(ows[j], floormod(pix, ow), body))
        if npb * pblk > ntiles:
            body = IfThenElse(lt(t, ntiles), body)
        return For(tl, pblk, body)

    return tiles


def direct_stmt(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str,
                options: CodegenOptions, config: Conv2dConfig, packed: bool = False) -> Stmt:
    """The direct algorithm of the conv of geometry g (conv2d_config.conv_geometry) into out,
    through the epilogue; wb is OIHW, or packed in config.channel_block blocks."""
    cg, r, s, kg, groups = g["cg"], g["r"], g["s"], g["kg"], g["g"]
    par = options.parallel
    KB = config.channel_block  # noqa: N806
    row_tile = config.row_tile
    P = config.tile_pixels  # noqa: N806
    nkb = ceil_div(kg, KB)
    npix = g["oh"] * g["ow"]
    ntiles = ceil_div(npix, P)
    npb = ceil_div(ntiles, config.pixel_block_tiles)
    if groups * nkb * npb < config.min_tasks:  # few output channels: split the pixels finer
        npb = min(ntiles, ceil_div(config.min_tasks, groups * nkb))
    pblk = ceil_div(ntiles, npb)
    cbs, ncb, ctail = c_blocks(cg, r * s * KB * 4, config.weight_block_bytes)
    # ---- weights: Wp[gi, kb, c, r, s, v]
    wpk = wb if packed else Buffer(f"{name}_wpack", (groups, nkb, cg, r, s, KB), F32)
    gi, kb, ci, ri, si, vi = (var(f"{name}_w{x}") for x in "gkcrsv")
    kk = kb * KB + vi
    wval = zero() if packed else Load(wb, (gi * kg + kk, ci, ri, si), F32)
    if kg % KB and not packed:
        wval = if_then_else(lt(kk, kg), wval, zero())
    pack_w = None if packed else fused_parallel([gi, kb], [groups, nkb], For(ci, cg, For(ri, r, For(
        si, s, For(vi, KB, Store(wpk, (gi, kb, ci, ri, si, vi), wval))))), f"{name}_w")
    # one input-channel block: each tile is stored right after the micro-kernel, cache hot,
    # through a one-tile accumulator; else the pixel block's tiles accumulate over the channel
    # blocks and are stored at the end. Tiles are channel-major (see microkernels).
    single = ncb == 1 and not ctail
    tvw = config.tile_vector_width()
    acc = Buffer(f"{name}_acc", (1 if single else pblk, KB, tvw), F32)
    ni = var(f"{name}_n")
    pixel_major = config.pixel_major
    if config.subsample_strided and (r, s) == (1, 1) and (g["sh"], g["sw"]) != (1, 1) \
            and (g["hp"], g["wp"]) == (g["h"], g["w"]):
        xp, pad = _subsample(xb, ni, g, name, par)
        g = dict(g, h=g["oh"], w=g["ow"], hp=g["oh"], wp=g["ow"], sh=1, sw=1)
    elif pixel_major:
        xp, pad = _pixel_major(xb, ni, g, name, par)
    else:
        xp, pad = pad_input(xb, ni, g, name, par)
    src = xp if xp is not None else xb
    rowstep, chanstep = (g["wp"], 1 if pixel_major else g["hp"] * g["wp"])
    gg, kb2, pb, cb = (var(f"{name}_{x}") for x in ("g", "kb", "pb", "cb"))
    tiles = pixel_tile_loops(name, pb, pblk, npb, P, npix, g["ow"], P)

    # While a weight block (KB channels x csize input channels) runs its pblk tiles, each
    # tile prefetches its slice of the weights that follow it in memory, which are the
    # ones read next (the next channel block, then the next KB block): deep layers' weights
    # are read once a run and would otherwise arrive cold, from memory.
    taps_kb = r * s * KB
    w_total = groups * nkb * cg * taps_kb

    def prefetch_lines(csize: int) -> int:
        """Lines a channel so that pblk calls over csize channels cover a whole block of
        cbs channels (a tail block's calls too: the block after it is a whole one)."""
        return ceil_div(cbs * taps_kb // 16, csize * pblk) if config.prefetch_weights else 0

    def w_next(c0, csize: int, tl):
        """Tile tl's prefetch slice, after the block at c0; its start is clamped so that the
        slice ends inside the packed weights (the last block's slices end at their end)."""
        span = csize * prefetch_lines(csize) * 16
        start = ((gg * nkb + kb2) * cg + c0 + csize) * taps_kb + tl * span
        return addr(wpk, 0, 0, 0, 0, 0, tir_min(start, imm(w_total - span)))  # flat offset

    def compute(c0, csize: int, accflag, last):
        """The tiles of one input-channel block; `last` (bool or condition): the block that
        leaves the tile channel-major for store_out."""
        def make(tl, t, ohs, ows):
            slot = imm(0) if single else tl
            # a row tile passes its first pixel only (the others follow it in the row); a
            # pixel-major copy holds pixel p's channels at Xt[p]
            xptrs = [addr(src, ohs[j] * g["ow"] + ows[j], gg * cg + c0) if pixel_major else
                     addr(src, *(() if xp is not None else (ni,)), gg * cg + c0,
                          ohs[j] * g["sh"], ows[j] * g["sw"]) for j in range(1 if row_tile else P)]
            args = (addr(wpk, gg, kb2, c0, 0, 0, 0), addr(acc, slot, 0, 0), accflag, csize,
                    w_next(c0, csize, tl), *xptrs)
            final, partial = (ukr_call(Conv(KB, tvw, P, r, s, rowstep, chanstep, g["dh"],
                                            g["dw"], cm, prefetch_lines(csize),
                                            g["sw"] if row_tile else 0), *args)
                              for cm in (True, False))
            call = final if last is True else partial if last is False else \
                IfThenElse(last, final, partial)
            return seq(call, store_out(slot, t)) if single else call
        return tiles(make, clamp=True)

    def store_out(tl, t, ohs=None, ows=None):
        """Per output channel, the tile's pixels (consecutive in NCHW's flattened pixel index,
        whatever rows they cross) as one vector loop over the channel-major tile. The last
        tile of an output whose pixels P does not divide stores its own static count: a
        bounds test inside the vector loop made every tile's stores scalar."""
        vv = var(f"{name}_v")

        def row(width: int, tag: str) -> Stmt:
            jj = var(f"{name}_j{tag}")
            kout = gg * kg + kb2 * KB + vv
            pix = t * P + jj
            idx = (ni, kout, floordiv(pix, g["ow"]), floormod(pix, g["ow"]))
            val = Load(acc, (tl, vv, jj), F32)
            if epilogue is not None:
                val = epilogue(val, idx)
            return For(jj, width, Store(out, idx, val), "vectorized")

        pixels = row(P, "") if npix % P == 0 else \
            IfThenElse(lt(t, ntiles - 1), row(P, "f"), row(npix - (ntiles - 1) * P, "l"))
        if kg % KB:
            pixels = IfThenElse(lt(kb2 * KB + vv, kg), pixels)
        return For(vv, KB, pixels)

    if ncb > 1:
        cblocks = For(cb, ncb, compute(cb * cbs, cbs, cast(gt(cb, 0), "int64"),
                                       False if ctail else eq(cb, ncb - 1)))
    else:
        cblocks = compute(imm(0), cbs, imm(0), not ctail)
    tail = compute(imm(ncb * cbs), ctail, imm(1), True) if ctail else None
    per_kb = Allocate(acc, seq(cblocks, tail, None if single else tiles(store_out, clamp=False)))
    # (group, pixel block, channel block) in parallel, each task with its own accumulators
    threads = par.contraction(g["n"] * g["k"] * npix * cg * r * s,
                              g["k"] * cg * r * s + g["n"] * (g["c"] * g["h"] * g["w"]
                                                              + g["k"] * npix))
    if threads > 1:
        pixels = fused_parallel([gg, pb, kb2], [groups, npb, nkb], per_kb, name, threads)
    else:
        pixels = For(gg, groups, For(pb, npb, For(kb2, nkb, per_kb)))
    stmt = seq(None if packed else pack_w, For(ni, g["n"], seq(pad, pixels)))
    for buf in (() if packed else (wpk,)) + ((xp,) if xp is not None else ()):
        stmt = Allocate(buf, stmt)
    return stmt

