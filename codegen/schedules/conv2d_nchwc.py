"""conv2d on channel-blocked activations (TVM's NCHW[x]c): x[N, C/x, H, W, x] -> out[N, K/x, OH,
OW, x], x the target's vector width, on a weight packed as conv2d.conv2d_pack_geometry (groups 1).

    out[n, k // x, oh, ow, k % x] = sum_{c, r, s} xpad[n, c // x, oh*sh + r*dh, ow*sw + s*dw, c % x]
                                                 * w[k, c, r, s]

The same direct micro-kernel as the NCHW schedule (microkernels.conv_kernel), with its channel
loop two-level (`convb_`: x channels one float apart, then a block's plane): a tile's input
lines are its pixels' 64-byte channel blocks, not one line per channel plane (the NCHW plane
stride puts those in few L1 sets), and a 1x1 conv reads its input in place (no pixel-major or
subsampled copy). The tile T[P][KB] is pixel-major, and pixel j's output channel block is one
contiguous vector of the output: the epilogue stores whole vectors, with no transpose.

    pad x[n] into Xp[C/x][Hp][Wp][x] (only when there is padding)
    parallel for (pixel block, kb in K/KB):
      for input-channel block (of whole channel blocks, ~W_BLOCK_BYTES of weights):
        for pixel tile t: micro-kernel -> T (accumulating over the channel blocks)
      T -> out[n, kb*KB/x + h, pixel, :] through the fused epilogue, one vector a store
"""
from __future__ import annotations

from dataclasses import replace

from .. import te
from ..llvm.microkernels.descriptors import ConvBlocked
from ..options import CodegenOptions
from ..parallel import ParallelPolicy, fused_parallel
from ..tir.expr import Load
from ..tir.ops import cast, floordiv, floormod, ge, gt, logical_and, lt
from ..tir.ops import min as tir_min
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import F32, addr, ceil_div, imm, mark_epilogue, ukr_call, var, zero
from .config import pick
from .conv2d_config import (
    PIXEL_BLOCK_TILES, WEIGHT_BLOCK_BYTES, Conv2dConfig, conv_geometry,
    least_padding_tile, min_tasks, row_tile_pixels,
)
from .conv2d_direct import c_blocks, pixel_tile_loops

MAX_TILE_PIXELS = 12  # pixels a tile at most (24 accumulators of two vectors with AVX-512)


def nchwc_applicable(channels: int, out_channels: int, groups: int, kb: int, block: int
                     ) -> bool:
    """Groups 1, whole channel blocks of `block` in and out, and output tiles of whole
    blocks."""
    return groups == 1 and channels % block == 0 and out_channels % block == 0 \
        and kb % block == 0


def tile_pixels(kb: int, vw: int, npix: int) -> int:
    """Pixels a tile: as many as the registers hold beside one weight row and a broadcast
    (32 with AVX-512, else 16), at most MAX_TILE_PIXELS, then least_padding_tile."""
    tvw = min(kb // 2, vw)
    nv = kb // tvw
    registers = 32 if vw == 16 else 16
    most = min(MAX_TILE_PIXELS, (registers - nv - 1) // nv, 8 if nv > 2 else MAX_TILE_PIXELS)
    return least_padding_tile(most, npix)


def resolve_conv2d_nchwc(g: dict, kb: int, options: CodegenOptions,
                         given: Conv2dConfig | None = None) -> Conv2dConfig:
    """The direct configuration of the blocked conv of geometry g (conv_geometry) over a
    weight packed in blocks of kb output channels: given fields, the rest by default. A
    strided 1x1 conv without padding first copies the pixels it reads (each a whole channel
    block vector) into a dense blocked buffer (subsample_strided), then runs the stride-1
    kernel: its tiles then read consecutive 64-byte lines instead of every s-th one."""
    c = given or Conv2dConfig()
    vw = pick(c.vector_width, lambda: options.vector_width)
    row_px = row_tile_pixels(kb, vw, g)
    row_tile = pick(c.row_tile, lambda: row_px is not None)
    p = c.tile_pixels
    if p is None:
        if row_tile and row_px is None:
            raise ValueError(f"conv2d_nchwc: row_tile without tile_pixels, and no row tile of "
                             f"8 or more pixels divides the {g['ow']}-pixel rows")
        p = row_px if row_tile else tile_pixels(kb, vw, g["oh"] * g["ow"])
    if p < 1 or (row_tile and g["ow"] % p) or (c.channel_block or kb) != kb:
        raise ValueError(f"conv2d_nchwc: tile_pixels {p}, channel_block {c.channel_block}: "
                         f"expected a block of {kb} (the packed weight's) and a tile of at "
                         f"least one pixel" + (", dividing the rows" if row_tile else ""))
    return Conv2dConfig(
        "direct", vw, kb, tile_pixels=p, row_tile=row_tile,
        subsample_strided=pick(c.subsample_strided, lambda: True),
        prefetch_weights=pick(c.prefetch_weights, lambda: True),
        weight_block_bytes=pick(c.weight_block_bytes, lambda: WEIGHT_BLOCK_BYTES),
        pixel_block_tiles=pick(c.pixel_block_tiles, lambda: PIXEL_BLOCK_TILES),
        min_tasks=pick(c.min_tasks, lambda: min_tasks(options)))


def nchwc_geometry(data_shape, packed_shape, channels: int, strides, padding, dilation
                   ) -> dict:
    """conv_geometry of the blocked conv (its NCHW view), with blk: the block x."""
    n, cbn, h, w, blk = data_shape
    _, _, c, r, s, _ = packed_shape
    return dict(conv_geometry((n, cbn * blk, h, w), (channels, c, r, s), strides, padding,
                              dilation, 1), blk=blk)


def conv2d_nchwc_packed(x: te.Tensor, wp: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0),
                        dilation=(1, 1), channels: int | None = None,
                        name: str = "T_conv2d_NCHWc", *, options: CodegenOptions,
                        config: Conv2dConfig | None = None) -> te.Tensor:
    """conv2d of a channel-blocked x [N, C/x, H, W, x] (x = the options' vector width) with a
    weight packed per conv2d_pack_geometry (groups 1): out [N, K/x, OH, OW, x]."""
    n, cbn, h, wd, blk = x.shape
    g_, nkb, c, r, s, kb = wp.shape
    k = channels
    vw = options.vector_width
    if blk != vw or g_ != 1 or c != cbn * blk or k is None \
            or ceil_div(k, kb) != nkb or not nchwc_applicable(c, k, 1, kb, blk):
        raise ValueError(f"conv2d_nchwc_packed: data {x.shape} and packed weight {wp.shape} "
                         f"with channels={k}; expected blocks of {vw} channels (the "
                         f"target's vector width), groups 1, and whole blocks in and out")
    geo = nchwc_geometry(x.shape, wp.shape, k, strides, padding, dilation)
    config = resolve_conv2d_nchwc(geo, kb, options,
                                  replace(config or Conv2dConfig(), vector_width=vw))

    def fcompute(ins, outs, epilogue=None):
        return _direct_blocked(ins[0], ins[1], outs[0], geo, epilogue, name, options.parallel,
                               config)

    return te.extern((n, k // blk, geo["oh"], geo["ow"], blk), [x, wp],
                     mark_epilogue(fcompute, True), name=name,
                     kernel_attrs={"prefer_vector_width": 32 * vw})


def pad_blocked(xb: Buffer, ni, g: dict, name: str, par: ParallelPolicy, always: bool = False
                ) -> tuple[Buffer | None, Stmt]:
    """Xp[C/x][Hp][Wp][x] = x[ni] (blocked) at row pt, column pl of zeros (None when no padding
    is needed, unless always): per row, a zero run, the copied pixels and a zero run, each
    pixel one vector. g: c, h, w, hp, wp, pt, pl and blk (x)."""
    if g["hp"] == g["h"] and g["wp"] == g["w"] and not always:
        return None, seq()
    blk = g["blk"]
    xp = Buffer(f"{name}_xpad", (g["c"] // blk, g["hp"], g["wp"], blk), F32)
    ci, hi, qi, vi = (var(f"{name}_p{t}") for t in "chqv")
    ih = hi - g["pt"]
    lo, hi_col = g["pl"], g["pl"] + g["w"]

    def run(start: int, stop: int, value) -> Stmt | None:
        if stop <= start:
            return None
        q = var(f"{name}_pq{start}")
        return For(q, stop - start, For(vi, blk, Store(xp, (ci, hi, q + start, vi),
                                                       value(q + start)), "vectorized"))

    zeros = lambda q: zero()  # noqa: E731
    inside = seq(run(0, lo, zeros),
                 run(lo, hi_col, lambda q: Load(xb, (ni, ci, ih, q - lo, vi), F32)),
                 run(hi_col, g["wp"], zeros))
    outside = For(qi, g["wp"], For(vi, blk, Store(xp, (ci, hi, qi, vi), zero()), "vectorized"))
    row = IfThenElse(logical_and(ge(ih, 0), lt(ih, g["h"])), inside, outside)
    return xp, par.copy_loops([ci, hi], [g["c"] // blk, g["hp"]], row,
                              g["c"] * g["hp"] * g["wp"], f"{name}_pad")


def subsample_blocked(xb: Buffer, ni, g: dict, name: str, par: ParallelPolicy
                      ) -> tuple[Buffer, Stmt]:
    """Xs[C/x][OH][OW][x] = x[ni, :, oh*sh, ow*sw, :] (blocked, no padding): the pixels a
    strided 1x1 conv reads, dense, each one vector. g: c, oh, ow, sh, sw and blk (x)."""
    blk = g["blk"]
    xs = Buffer(f"{name}_xsub", (g["c"] // blk, g["oh"], g["ow"], blk), F32)
    ci, hi, qi, vi = (var(f"{name}_s{t}") for t in "chqv")
    copy = For(qi, g["ow"], For(vi, blk, Store(
        xs, (ci, hi, qi, vi), Load(xb, (ni, ci, hi * g["sh"], qi * g["sw"], vi), F32)),
        "vectorized"))
    return xs, par.copy_loops([ci, hi], [g["c"] // blk, g["oh"]], copy,
                              g["c"] * g["oh"] * g["ow"], f"{name}_sub")


def _subsamples(g: dict, config: Conv2dConfig) -> bool:
    """A strided 1x1 conv without padding or dilation, subsampled (subsample_strided)."""
    return config.subsample_strided and (g["r"], g["s"]) == (1, 1) \
        and (g["sh"], g["sw"]) != (1, 1) \
        and (g["hp"], g["wp"]) == (g["h"], g["w"])


def _direct_blocked(xb: Buffer, wpk: Buffer, out: Buffer, g: dict, epilogue, name: str,
                    par: ParallelPolicy, config: Conv2dConfig) -> Stmt:
    blk, c, r, s, k = g["blk"], g["c"], g["r"], g["s"], g["k"]
    ni = var(f"{name}_n")
    if _subsamples(g, config):
        xp, pad = subsample_blocked(xb, ni, g, name, par)
        g = dict(g, h=g["oh"], w=g["ow"], hp=g["oh"], wp=g["ow"], sh=1, sw=1)
    else:
        xp, pad = pad_blocked(xb, ni, g, name, par)
    KB = wpk.shape[-1]  # noqa: N806
    tvw = config.tile_vector_width()  # the micro-kernel's vector: two of KB/2, or of x
    nvo = KB // blk  # output channel blocks a tile
    row_tile = config.row_tile
    npix = g["oh"] * g["ow"]
    P = config.tile_pixels  # noqa: N806
    nkb = ceil_div(k, KB)
    ntiles = ceil_div(npix, P)
    npb = ceil_div(ntiles, config.pixel_block_tiles)
    if nkb * npb < config.min_tasks:
        npb = min(ntiles, ceil_div(config.min_tasks, nkb))
    pblk = ceil_div(ntiles, npb)
    # input-channel blocks of whole channel blocks
    cbs, ncb, ctail = (v * blk for v in c_blocks(c // blk, r * s * KB * 4 * blk,
                                                 config.weight_block_bytes))
    ncb //= blk
    single = ncb == 1 and not ctail
    acc = Buffer(f"{name}_acc", (1 if single else pblk, P, KB), F32)
    src = xp if xp is not None else xb
    rowstep, blockstep = g["wp"] * blk, g["hp"] * g["wp"] * blk
    kb2, pb, cb = (var(f"{name}_{t}") for t in ("kb", "pb", "cb"))
    # a row tile passes its first pixel only (the others follow it in the row)
    tiles = pixel_tile_loops(name, pb, pblk, npb, P, npix, g["ow"], 1 if row_tile else P)

    taps_kb = r * s * KB
    w_total = nkb * c * taps_kb

    def prefetch_lines(csize: int) -> int:
        return ceil_div(cbs * taps_kb // 16, csize * pblk) if config.prefetch_weights else 0

    def w_next(c0, csize: int, tl):
        span = csize * prefetch_lines(csize) * 16
        start = (kb2 * c + c0 + csize) * taps_kb + tl * span
        return addr(wpk, 0, 0, 0, 0, 0, tir_min(start, imm(w_total - span)))

    def compute(c0, csize: int, accflag) -> Stmt:
        def make(tl, t, ohs, ows):
            slot = imm(0) if single else tl
            lead = () if xp is not None else (ni,)
            xptrs = [addr(src, *lead, floordiv(c0, blk), ohs[j] * g["sh"], ows[j] * g["sw"], 0)
                     for j in range(1 if row_tile else P)]
            kern = ConvBlocked(KB, tvw, P, r, s, rowstep, blockstep, g["dh"], g["dw"] * blk, blk,
                               prefetch_lines(csize), g["sw"] * blk if row_tile else 0)
            call = ukr_call(kern, addr(wpk, 0, kb2, c0, 0, 0, 0), addr(acc, slot, 0, 0),
                            accflag, csize, w_next(c0, csize, tl), *xptrs)
            return seq(call, store_out(slot, t)) if single else call
        return tiles(make, clamp=True)

    def store_out(tl, t, ohs=None, ows=None) -> Stmt:
        """The tile's pixels, each output channel block one vector, through the epilogue;
        the last tile of an output P does not divide stores its own static count."""
        hh, vv = var(f"{name}_h"), var(f"{name}_v")

        def pixels(width: int, tag: str) -> Stmt:
            jj = var(f"{name}_j{tag}")
            pix = t * P + jj
            idx = (ni, kb2 * nvo + hh, floordiv(pix, g["ow"]), floormod(pix, g["ow"]), vv)
            val = Load(acc, (tl, jj, hh * blk + vv), F32)
            if epilogue is not None:
                val = epilogue(val, idx)
            return For(jj, width, For(vv, blk, Store(out, idx, val), "vectorized"))

        body = pixels(P, "") if npix % P == 0 else \
            IfThenElse(lt(t, ntiles - 1), pixels(P, "f"), pixels(npix - (ntiles - 1) * P, "l"))
        if k % KB:
            body = IfThenElse(lt(kb2 * KB + hh * blk, k), body)
        return For(hh, nvo, body)

    if ncb > 1:
        cblocks = For(cb, ncb, compute(cb * cbs, cbs, cast(gt(cb, 0), "int64")))
    else:
        cblocks = compute(imm(0), cbs, imm(0))
    tail = compute(imm(ncb * cbs), ctail, imm(1)) if ctail else None
    per_kb = Allocate(acc, seq(cblocks, tail,
                               None if single else tiles(store_out, clamp=False)))
    threads = par.contraction(g["n"] * k * npix * c * r * s,
                              k * c * r * s + g["n"] * (c * g["h"] * g["w"] + k * npix))
    if threads > 1:
        body = fused_parallel([pb, kb2], [npb, nkb], per_kb, name, threads)
    else:
        body = For(pb, npb, For(kb2, nkb, per_kb))
    stmt = For(ni, g["n"], seq(pad, body))
    return Allocate(xp, stmt) if xp is not None else stmt

