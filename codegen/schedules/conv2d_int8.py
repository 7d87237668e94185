"""int8 conv2d: x[N, C, H, W] (uint8, NCHW) with an int8 weight packed at compile time
(int8_config.int8_conv_geometry: blocks of KB output channels, four input channels of one
output channel a 32-bit lane, [K/KB][C/4][R][S][KB][4]) -> int32 [N, K, OH, OW], the input
padded with a run-time value (the input zero point: the centered padding is then zero),
through the Int8Dot micro-kernel (vpdpbusd where the target has VNNI).

    out[n, k, oh, ow] = sum_{c, r, s} xpad[n, c, oh*sh + r*dh, ow*sw + s*dw] * w[k, c, r, s]

    per image:
      Xp[C/4][Hp][Wp][4] = x padded (pad value; zero in the channels past C): four channels
                           of a pixel one 32-bit lane, so the micro-kernel broadcasts them
                           with one load (rows interleaved by the Interleave4 micro-kernel,
                           in parallel over channel groups and rows)
      parallel for (output channel block kb, pixel block):
        for pixel tile t of the block (P consecutive output pixels, flattened over OH x OW):
          T[:, t's columns] = micro-kernel(pixel pointers into Xp, the block's weights, all C
                     and taps), stored channel-major (transposed in registers): the block's
                     tiles side by side, so a channel's pixels of the block are one row of T
        out[n, kb*KB + v, pixels of the block] = epilogue(T[v])   (per channel one contiguous
                     run of NCHW's flattened pixels, vectorised, per-channel values hoisted;
                     each element stored once, so the epilogue may cast: the fused
                     requantisation writes uint8)

A partial last tile repeats the last pixel (its extra lanes are not stored); a partial last
channel block stores its own channels only.
"""
from __future__ import annotations

from .. import te
from ..llvm.microkernels.descriptors import DOT_NAMES, Int8Dot, Interleave4
from ..options import CodegenOptions
from ..parallel import fused_parallel
from ..tir.expr import Load
from ..tir.ops import cast, const, floordiv, floormod, ge, logical_and, lt
from ..tir.ops import min as tir_min
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import addr, ceil_div, imm, mark_epilogue, ukr_call, var
from .conv2d_config import conv_geometry
from .int8_config import Int8Config, int8_conv_geometry, int8_threads, resolve_int8

U8, I8, I32 = "uint8", "int8", "int32"
PIXEL_BLOCK_TILES = 16  # pixel tiles a parallel task, at most
MIN_TASKS = 16  # split the pixels finer when the channel blocks give fewer tasks than this


def conv2d_int8(x: te.Tensor, wp: te.Tensor, pad_value: te.Tensor, strides=(1, 1),
                padding=(0, 0, 0, 0), dilation=(1, 1), channels: int | None = None,
                name: str = "T_conv2d_int8", *, options: CodegenOptions,
                config: Int8Config | None = None) -> te.Tensor:
    """conv2d of uint8 NCHW x with the packed int8 weight (groups 1), x padded with the int32
    scalar pad_value's byte -> int32 NCHW."""
    n, c, h, w = x.shape
    r, s = wp.shape[2:4]
    k = channels
    g = conv_geometry(x.shape, (k, c, r, s), strides, padding, dilation, 1)
    config = resolve_int8(options, config, conv=True, columns=k, pixels=g["oh"] * g["ow"],
                          channels=c)
    expected = int8_conv_geometry(k or 0, c, r, s, config.block())
    if x.dtype != U8 or wp.dtype != I8 or tuple(wp.shape) != expected \
            or pad_value.dtype != I32 or pad_value.shape != ():
        raise ValueError(f"conv2d_int8: data {x.dtype} {x.shape}, packed weight {wp.dtype} "
                         f"{tuple(wp.shape)}, channels={k}: expected uint8 data, an int8 "
                         f"weight packed as {expected} (blocks of {config.block()} output "
                         f"channels) and an int32 scalar pad value")

    def fcompute(ins, outs, epilogue=None):
        return _conv_stmt(*ins, outs[0], g, epilogue, name, options, config)

    return te.extern((n, k, g["oh"], g["ow"]), [x, wp, pad_value],
                     mark_epilogue(fcompute, in_place=True), name=name, dtype=I32,
                     kernel_attrs={"prefer_vector_width": 32 * config.lanes})


def _pad_stmt(xb: Buffer, pad: Buffer, ni, g: dict, name: str, options) -> tuple[Buffer, Stmt]:
    """Xp[C/4][Hp][Wp][4] from image ni: a row of pad values, or the pad columns, the image
    row's four channels interleaved (the Interleave4 micro-kernel; a group short of four
    channels reads rows of zeros for the missing ones: their weights are zero) and the pad
    columns; the channel groups' rows in parallel."""
    c4, full = ceil_div(g["c"], 4), g["c"] // 4
    xp = Buffer(f"{name}_xpad", (c4, g["hp"], g["wp"], 4), U8)
    zeros = Buffer(f"{name}_zeros", (g["w"],), U8) if g["c"] % 4 else None
    hi = var(f"{name}_ph")
    ih = hi - g["pt"]
    byte = cast(Load(pad, (), I32), U8)
    lo, hi_col = g["pl"], g["pl"] + g["w"]

    def fill(ci, start: int, stop: int) -> Stmt | None:
        if stop <= start:
            return None
        wq, q = var(f"{name}_pw{start}"), var(f"{name}_pq{start}")
        return For(wq, stop - start, For(q, 4, Store(xp, (ci, hi, wq + start, q), byte)),
                   "vectorized")

    def row(ci, present: int) -> Stmt:
        rows = [addr(xb, ni, ci * 4 + q, ih, 0) if q < present else addr(zeros, 0)
                for q in range(4)]
        inside = seq(fill(ci, 0, lo), ukr_call(Interleave4(g["w"]), addr(xp, ci, hi, lo, 0),
                                               *rows), fill(ci, hi_col, g["wp"]))
        return IfThenElse(logical_and(ge(ih, 0), lt(ih, g["h"])), inside, fill(ci, 0, g["wp"]))

    ci = var(f"{name}_pc")
    # the groups' rows in parallel (an RGB input has one group); bytes: a quarter of floats
    groups = options.parallel.copy_loops([ci, hi], [full, g["hp"]], row(ci, 4),
                                         full * g["hp"] * g["wp"], f"{name}_pad") \
        if full else seq()
    if zeros is None:
        return xp, groups
    z = var(f"{name}_z")
    last = seq(For(z, g["w"], Store(zeros, (z,), const(0, U8)), "vectorized"),
               For(hi, g["hp"], row(imm(full), g["c"] % 4)))
    return xp, Allocate(zeros, seq(groups, last))


def _conv_stmt(xb: Buffer, wpk: Buffer, pad: Buffer, out: Buffer, g: dict, epilogue,
               name: str, options: CodegenOptions, config: Int8Config) -> Stmt:
    k, r, s = g["k"], g["r"], g["s"]
    P, KB, lanes = config.tile_rows, config.block(), config.lanes  # noqa: N806
    c4 = ceil_div(g["c"], 4)
    npix = g["oh"] * g["ow"]
    nkb, ntiles = ceil_div(k, KB), ceil_div(npix, P)
    npb = ceil_div(ntiles, PIXEL_BLOCK_TILES)
    if nkb * npb < MIN_TASKS:
        npb = min(ntiles, ceil_div(MIN_TASKS, nkb))
    pblk = ceil_div(ntiles, npb)
    npb = ceil_div(ntiles, pblk)  # no block left empty
    ni = var(f"{name}_n")
    xp, pad_rows = _pad_stmt(xb, pad, ni, g, name, options)
    plane = g["hp"] * g["wp"] * 4
    # the block's tiles side by side: each channel's pixels of the block one run of T's row
    stride = pblk * P + lanes
    # each tile prefetches its share of the next channel block's weights (deep layers'
    # weights are read once a run, from memory): the block's tiles over all pixel blocks
    block_bytes = c4 * r * s * KB * 4
    share = ceil_div(block_bytes, npb * pblk * 64) * 64
    lines = ceil_div(share, 64 * c4) if nkb > 1 else 0
    kern = Int8Dot(P, KB // lanes, lanes, r, s, g["wp"] * 4, plane, g["dh"], g["dw"] * 4,
                   DOT_NAMES.index(config.dot), True, prefetch_lines=lines,
                   tile_stride=stride)
    tile = Buffer(f"{name}_tile", (KB, stride), I32)
    kb, pb, tl = var(f"{name}_kb"), var(f"{name}_pb"), var(f"{name}_tl")
    t = pb * pblk + tl

    def pixel_ptr(j: int):
        pix = t * P + j
        if npix % P:
            pix = tir_min(pix, imm(npix - 1))
        oh, ow = floordiv(pix, g["ow"]), floormod(pix, g["ow"])
        return addr(xp, 0, oh * g["sh"], ow * g["sw"], 0)

    weights = addr(wpk, kb, 0, 0, 0, 0, 0)
    ahead = tir_min(kb + 1, imm(nkb - 1)) * block_bytes + t * share
    w_next = addr(wpk, 0, 0, 0, 0, 0, tir_min(ahead, imm(nkb * block_bytes - 64)))
    call = ukr_call(kern, weights, addr(tile, 0, tl * P), 0, c4, w_next,
                    *(pixel_ptr(j) for j in range(P)))
    if npb * pblk > ntiles:
        call = IfThenElse(lt(t, ntiles), call)
    vv, jj = var(f"{name}_v"), var(f"{name}_j")

    def store(count: int) -> Stmt:
        pix = pb * (pblk * P) + jj
        idx = (ni, kb * KB + vv, floordiv(pix, g["ow"]), floormod(pix, g["ow"]))
        val = Load(tile, (vv, jj), I32)
        if epilogue is not None:
            val = epilogue(val, idx)
        return For(jj, count, Store(out, idx, val), "vectorized")

    last = npix - (npb - 1) * pblk * P  # pixels of the last block
    pixels = store(last) if npb == 1 else store(pblk * P) if last == pblk * P else \
        IfThenElse(lt(pb, npb - 1), store(pblk * P), store(last))
    if k % KB:
        pixels = IfThenElse(lt(kb * KB + vv, k), pixels)
    per_task = Allocate(tile, seq(For(tl, pblk, call), For(vv, KB, pixels)))
    reduction = c4 * 4 * r * s
    threads = int8_threads(options.parallel, g["n"] * npix * k * reduction,
                           k * reduction + g["n"] * (c4 * 4 * g["h"] * g["w"] + 4 * k * npix))
    if threads > 1:
        tiles = fused_parallel([kb, pb], [nkb, npb], per_task, name, threads)
    else:
        tiles = For(kb, nkb, For(pb, npb, per_task))
    return Allocate(xp, For(ni, g["n"], seq(pad_rows, tiles)))
