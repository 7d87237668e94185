"""conv2d NCHW / OIHW float32: direct convolution with a 16-channel x 6-pixel register tile.

out[n, k, oh, ow] = sum_{c, r, s} x[n, g*Cg + c, oh*sh + r*dh - pt, ow*sw + s*dw - pl]
                                  * w[k, c, r, s]                 (g = k // Kg)

Schedule (general groups, any stride/padding/dilation):

    pack weights Wp[g][Kg/16][Cg][R][S][16]          (zero padded channels; parallel)
    for n:
      pad x[n] into Xp[C][Hp][Wp] (skipped when there is no padding; parallel over C)
      parallel for (g, pixel block, kb in Kg/16):    (each task its own accumulator block)
        for pixel tile t (6 consecutive flattened output pixels, any row crossing):
          x_j = &Xp[g*Cg, oh_j*sh, ow_j*sw]         (one base pointer per pixel)
          micro-kernel: 12 ymm accumulators (6 pixels x 2 <8 x float>), loop over c with
                        the R*S taps unrolled: 2 weight vector loads + 6 broadcasts, 12 FMA;
                        prefetches its slice of the next weight block into L2
        tiles T[6][16] -> out[n, k, oh_j, ow_j] with the fused epilogue (cache hot)

Where a tile size divides the output row (row_tile_pixels), a tile is that many pixels of
one row, and the micro-kernel broadcasts each input value once for all the taps reading it.
1x1 convs onto many channels read a pixel-major copy of their input (_pixel_major_pays).

Depthwise-like convs (Cg == 1) use a plain vectorised loop over output width instead, in
parallel over channels: the 16-channel tile would be mostly padding there.
"""
from __future__ import annotations

import functools

from .. import te
from ..llvm.microkernels import conv_kernel_name
from ..parallel import MIN_PARALLEL_WORK, fused_parallel
from ..tir.expr import Load, Var
from ..tir.ops import cast, eq, floordiv, floormod, ge, gt, if_then_else, logical_and, lt
from ..tir.ops import min as tir_min
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, LetStmt, Stmt, Store, seq
from .common import (
    F32, addr, ceil_div, imm, mark_epilogue, padded_row, ukr_call, var, vector_width, zero,
)
from .gemm import gemm_stmt, in_place_applicable, rows_per_tile
from .window import window_stmt

PB = 6  # pixels per tile; output channels per block KB = two vectors (16 or 32)


def conv2d_applicable(dtype: str = "float32") -> bool:
    """The schedule handles every float32 NCHW/OIHW conv2d."""
    return dtype == "float32"


def conv2d_pack_geometry(k: int, cg: int, r: int, s: int, groups: int = 1,
                         vw: int | None = None) -> tuple:
    """Shape of the packed weight the direct micro-kernel reads for an OIHW weight [K, Cg, R, S]:
    Wp[G, ceil(Kg/KB), Cg, R, S, KB] with Wp[g, kb, c, r, s, v] = w[g*Kg + kb*KB + v, c, r, s]
    (zero where kb*KB + v >= Kg), KB from channel_block."""
    kb = channel_block(k // groups, vector_width() if vw is None else vw)
    return (groups, ceil_div(k // groups, kb), cg, r, s, kb)


# Three-vector direct tiles where they pad the channels to at most THREE_VECTOR_PADDING of
# what two-vector tiles do (channel_block); False: two vectors (for A/B in one process)
THREE_VECTOR_TILES = True
THREE_VECTOR_PADDING = 0.95


def channel_block(kg: int, vw: int) -> int:
    """Output channels per micro-kernel tile: two vectors; but at most 16 channels (two 8-float
    vectors) for a group of at most 16, where two 16-float vectors would be half padding; and
    three 16-float vectors (with AVX-512's 32 registers) where they pad the group's channels
    clearly less (one thread, CPU time, same-process A/B: 1x1 384->48 at 13x13 0.059 -> 0.048
    ms, 256->48 0.039 -> 0.029, 512->144 at 14x14 0.209 -> 0.182, 232->232 at 7x7 0.041 ->
    0.037; 3x3 96->48 at 28x28 0.61 -> 0.42, 64->40 at 27x27 0.32 -> 0.26; but 512->1000 at
    13x13, 1008 channels for 1024, 1.22 -> 1.30: its 10-pixel two-vector tile wins)."""
    if kg <= 16:
        return 16
    two, three = 2 * vw, 3 * vw
    if THREE_VECTOR_TILES and vw == 16 \
            and ceil_div(kg, three) * three <= THREE_VECTOR_PADDING * ceil_div(kg, two) * two:
        return three
    return two


def tile_vector_width(kb: int) -> int:
    """Floats per vector of a direct tile of kb channels (channel_block): half of it for two
    vectors (8 for 16 channels), else the target's width (three vectors)."""
    return min(kb // 2, vector_width())


def conv2d_nchw_packed(x: te.Tensor, wp: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0),
                       dilation=(1, 1), groups: int = 1, channels: int | None = None,
                       name: str = "T_conv2d") -> te.Tensor:
    """conv2d_nchw on a weight pre-packed per conv2d_pack_geometry (no run-time packing)."""
    g_, nkb, cg, r, s, kb = wp.shape
    k = channels
    if g_ != groups or k is None or k % groups or ceil_div(k // groups, kb) != nkb:
        raise ValueError(f"conv2d_nchw_packed: packed weight {wp.shape} does not fit "
                         f"channels={k}, groups={groups}")
    return _conv(x, wp, (k, cg, r, s), strides, padding, dilation, groups, name, packed=True)


def conv2d_nchw(x: te.Tensor, w: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0),
                dilation=(1, 1), groups: int = 1, name: str = "T_conv2d") -> te.Tensor:
    """NCHW conv2d; padding is (top, left, bottom, right)."""
    return _conv(x, w, w.shape, strides, padding, dilation, groups, name, packed=False)


def _conv(x: te.Tensor, w: te.Tensor, wshape, strides, padding, dilation, groups: int,
          name: str, packed: bool) -> te.Tensor:
    n, c, h, wd = x.shape
    k, cg, r, s = wshape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    hp, wp = h + pt + pb, wd + pl + pr
    oh = (hp - dh * (r - 1) - 1) // sh + 1
    ow = (wp - dw * (s - 1) - 1) // sw + 1
    kg = k // groups
    geo = dict(n=n, c=c, h=h, w=wd, k=k, cg=cg, r=r, s=s, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt,
               pl=pl, hp=hp, wp=wp, oh=oh, ow=ow, g=groups, kg=kg)

    # in_place: the tile schedules store each output element once, from their tile through
    # the epilogue, so a residual the epilogue adds may share the output's storage; so does
    # the GEMM over one K block (over more it accumulates in the output; depthwise: not
    # checked)
    kb = w.shape[-1] if packed else None
    if cg == 1 and not packed:
        schedule, in_place = _depthwise, False
    elif packed and _pointwise_rows_pay(geo, kb):
        schedule, in_place = _pointwise_rows, True
    elif _is_gemm(geo):
        in_place = in_place_applicable(cg)
        schedule = functools.partial(_pointwise, packed=packed, in_place=in_place)
    elif packed and _rows_pay(geo, kb):
        schedule, in_place = _rows, True
    else:
        schedule, in_place = functools.partial(_direct, packed=packed), True

    def fcompute(ins, outs, epilogue=None):
        return schedule(ins[0], ins[1], outs[0], geo, epilogue, name)

    # its padded copies, edge tiles and epilogue vectorise at the micro-kernel's width: LLVM
    # prefers 256-bit loops on AVX-512 CPUs, and 512 made MobileNet-v2 8-11% faster
    return te.extern((n, k, oh, ow), [x, w], mark_epilogue(fcompute, in_place), name=name,
                     kernel_attrs={"prefer_vector_width": 32 * vector_width()})


def _is_gemm(g: dict) -> bool:
    """A 1x1, stride-1, unpadded conv (per group, out[n] = W . x[n] over NCHW's pixel rows)
    with at most 96 input channels a group, unless the GEMM's row tiles would pad the group's
    output channels 5% more than the direct schedule's channel blocks do, or its pixel panels
    would pad the pixels by over 5%. There the GEMM beats the direct schedule, whose fixed
    cost per tile (transpose, stores) weighs on a short reduction (measured: 16->96 channels
    at 112x112 59 -> 95 GFLOP/s, 24->144 66 -> 102, 64->256 92 -> 104; 64->64 (72 GEMM rows for
    64) and from ~128 input channels the direct one wins, as it does for 64->1280 at 14x14,
    whose 196 pixels take 224 in 32-pixel panels: 67 -> 84 GFLOP/s). Convs over at most 32
    input channels go to _pointwise_rows before this is asked."""
    if (g["r"], g["s"], g["sh"], g["sw"]) != (1, 1, 1, 1) \
            or (g["hp"], g["wp"]) != (g["h"], g["w"]) or g["cg"] > 96:
        return False
    kg, mr, nr = g["kg"], rows_per_tile(g["kg"]), 2 * vector_width()
    npix = g["oh"] * g["ow"]
    kb = channel_block(kg, vector_width())
    return ceil_div(kg, mr) * mr <= 1.05 * ceil_div(kg, kb) * kb \
        and ceil_div(npix, nr) * nr <= 1.05 * npix


def _pointwise(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str,
               packed: bool, in_place: bool) -> Stmt:
    """_is_gemm convs through the GEMM schedule, one product per (image, group):
    C[Kg, pixels] = W[g][Kg, Cg] . x[n][g][Cg, pixels], whose rows are NCHW's channel planes,
    so tiles and their fused epilogue store whole vectors along the pixels (the direct
    schedule's tiles are channel vectors, stored a plane apart)."""
    kg, cg, ow = g["kg"], g["cg"], g["ow"]
    npix = g["oh"] * ow
    if packed:
        kb = wb.shape[-1]
        a_load = lambda b, i, j: Load(  # noqa: E731 - Wp[g, k // KB, c, 0, 0, k % KB]
            wb, (b[1], floordiv(i, kb), j, imm(0), imm(0), floormod(i, kb)), F32)
    else:
        a_load = lambda b, i, j: Load(  # noqa: E731 - w[g*Kg + k, c, 0, 0]
            wb, (b[1] * kg + i, j, imm(0), imm(0)), F32)
    b_load = lambda b, i, j: Load(  # noqa: E731 - x[n][g*Cg + c][pixel]
        xb, (b[0], b[1] * cg + j, floordiv(i, ow), floormod(i, ow)), F32)
    out_index = lambda b, i, j: (  # noqa: E731
        b[0], b[1] * kg + i, floordiv(j, ow), floormod(j, ow))
    return gemm_stmt(kg, npix, cg, (g["n"], g["g"]), a_load, b_load, out, "mk", "kn",
                     epilogue, name, out_index=out_index, in_place=in_place)


def _pad(xb: Buffer, ni, g: dict, name: str) -> tuple[Buffer | None, Stmt]:
    """Xp[C][Hp][Wp] = zero-padded x[ni] (None when no padding is needed)."""
    if g["hp"] == g["h"] and g["wp"] == g["w"]:
        return None, seq()
    xp = Buffer(f"{name}_xpad", (g["c"], g["hp"], g["wp"]), F32)
    ci, hi = var(f"{name}_pc"), var(f"{name}_ph")
    ih = hi - g["pt"]
    row = _padded_plane_row(lambda q, v: Store(xp, (ci, hi, q), v),
                            lambda col: Load(xb, (ni, ci, ih, col), F32),
                            logical_and(ge(ih, 0), lt(ih, g["h"])), g["wp"], 1, -g["pl"],
                            g["w"], f"{name}_pw")
    kind = "parallel" if g["c"] * g["hp"] * g["wp"] >= MIN_PARALLEL_WORK else "serial"
    return xp, For(ci, g["c"], For(hi, g["hp"], row), kind)


# A 1x1 strided conv first copies the pixels it reads into a dense plane
SUBSAMPLE_STRIDED = True


def _subsample(xb: Buffer, ni, g: dict, name: str) -> tuple[Buffer, Stmt]:
    """Xs[C][OH][OW] = x[ni, c, oh * sh, ow * sw], the only pixels a 1x1 strided conv reads:
    its tiles then read whole lines, not every other pixel of twice as many rows."""
    xs = Buffer(f"{name}_xsub", (g["c"], g["oh"], g["ow"]), F32)
    ci, hi, wi = var(f"{name}_sc"), var(f"{name}_sh"), var(f"{name}_sw")
    copy = For(wi, g["ow"], Store(xs, (ci, hi, wi), Load(
        xb, (ni, ci, hi * g["sh"], wi * g["sw"]), F32)), "vectorized")
    kind = "parallel" if g["c"] * g["oh"] * g["ow"] >= MIN_PARALLEL_WORK else "serial"
    return xs, For(ci, g["c"], For(hi, g["oh"], copy), kind)


# 1x1 direct convs that read a pixel-major copy of their input (_pixel_major_pays); False:
# none (for A/B in one process)
PIXEL_MAJOR = True
PIXEL_MAJOR_MIN_CHANNELS = 128  # input channels a group, at least
PIXEL_MAJOR_MIN_OUTPUT = 256    # output channels a group, at least (and at least the input's)


def _pixel_major_pays(g: dict) -> bool:
    """A 1x1 stride-1 unpadded conv that writes at least as many channels as it reads, from
    128 in and 256 out: its tiles read a pixel-major copy, whose cost the many output channel
    blocks that read it repay (one thread, CPU time, same-process A/B: 512->1000 at 13x13
    1.123 -> 1.069 ms, 256->1024 at 14x14 0.695 -> 0.640, 128->512 at 28x28 0.776 -> 0.723,
    512->2048 at 7x7 0.683 -> 0.655, 256->256 at 14x14 0.171 -> 0.163; it loses where fewer
    blocks share the copy: 128->128 at 28x28 +5%, 160->192 at 14x14 +6%, 1024->256 +13%)."""
    return PIXEL_MAJOR and (g["r"], g["s"], g["sh"], g["sw"]) == (1, 1, 1, 1) \
        and (g["hp"], g["wp"]) == (g["h"], g["w"]) and g["cg"] >= PIXEL_MAJOR_MIN_CHANNELS \
        and g["kg"] >= max(g["cg"], PIXEL_MAJOR_MIN_OUTPUT)


def _pixel_major(xb: Buffer, ni, g: dict, name: str) -> tuple[Buffer, Stmt]:
    """Xt[pixel][C] = x[ni, c, pixel]: a 1x1 tile's pixels then read their channels as
    contiguous lines, one stream a pixel, instead of a line or two of every channel plane."""
    npix = g["h"] * g["w"]
    xt = Buffer(f"{name}_xpix", (npix, g["c"]), F32)
    pi, ci = var(f"{name}_tp"), var(f"{name}_tc")
    copy = For(ci, g["c"], Store(xt, (pi, ci), Load(
        xb, (ni, ci, floordiv(pi, g["w"]), floormod(pi, g["w"])), F32)), "vectorized")
    kind = "parallel" if g["c"] * npix >= MIN_PARALLEL_WORK else "serial"
    return xt, For(pi, npix, copy, kind)


def _padded_plane_row(store, load, row_inside, width: int, step: int, offset: int,
                      src_width: int, name: str) -> Stmt:
    """One row of a zero-padded copy: common.padded_row when the source row is inside the
    input, zeros when it is not."""
    q = var(f"{name}_z")
    return IfThenElse(row_inside,
                      padded_row(store, load, width, step, offset, src_width, name),
                      For(q, width, store(q, zero()), "vectorized"))


# Blocking of the reduction (input channels) and of the output pixels, so that a weight block
# (KB output channels x CB input channels x R x S) stays cache-resident while it sweeps a block
# of pixel tiles, and the accumulator block of those tiles stays in L1/L2.
W_BLOCK_BYTES = 48 * 1024     # target size of one weight block (KB x CB x R x S floats)
ACC_BLOCK_TILES = 48          # pixel tiles (of PB pixels) per pixel block
# Parallel tasks (group x pixel block x channel block) a conv has at least, where it has the
# tiles: a squeeze 1x1 onto 32-64 channels was one or two tasks and did not speed up on two
# threads (SqueezeNet's 384->48 at 13x13 0.048 -> 0.062 ms)
MIN_TASKS = 4


# The direct schedule's micro-kernel calls prefetch the weights read next (see _direct);
# False builds the same schedule without (for A/B measurements in one process).
PREFETCH_WEIGHTS = True

SHORT_REDUCTION = 300  # taps (channels x window) a tile at most for 8-pixel tiles on AVX-512


def pixels_per_tile(kb: int, npix: int | None = None, reduction: int | None = None) -> int:
    """Pixels per micro-kernel tile: up to 6 with 16 ymm registers (12 accumulators), up to 12
    with the 32 zmm registers of AVX-512 (24 accumulators + 2 weight vectors + 1 broadcast),
    up to 8 for a 16-channel tile on AVX-512 (its transpose to channel-major is 8 x 8), and
    up to 8 for three-vector tiles (24 accumulators), and
    up to 8 too over a reduction of at most SHORT_REDUCTION taps: there the tile's store
    weighs most, and 8 pixels store as whole 8-float vectors where 12 take a masked tail
    (AVX-512: 64->1280 1x1 at 14x14 0.27 -> 0.24 ms, 16->64 3x3 at 55x55 0.376 -> 0.359,
    64->384 1x1 0.075 -> 0.069; from 432 taps the 12-pixel tile wins).

    Given the output's pixel count, the largest tile (down to two thirds of the most) whose
    last tile pads the output by at most 4% (a 7x7 output takes 5 tiles of 10 pixels rather
    than 5 of 12 with 11 computed for nothing), else the one that pads least."""
    short = reduction is not None and reduction <= SHORT_REDUCTION
    most = 8 if kb > 2 * vector_width() else (8 if short else 12) if kb >= 32 \
        else 8 if vector_width() == 16 else PB
    return most if npix is None else least_padding_tile(most, npix)


def least_padding_tile(most: int, npix: int) -> int:
    """Pixels a tile for npix output pixels: the largest from `most` down to two thirds of it
    whose last tile pads the output by at most 4%, else the one that pads least."""
    candidates = range(most, -(-2 * most // 3) - 1, -1)
    waste = {p: -(-npix // p) * p - npix for p in candidates}
    for p in candidates:
        if waste[p] <= 0.04 * npix:
            return p
    return min(candidates, key=lambda p: (waste[p], -p))


# Tiles of consecutive pixels of one output row where a tile size divides the row (see
# row_tile_pixels); False: the flattened-pixel tiles everywhere (for A/B in one process)
ROW_TILES = True


def row_tile_pixels(kb: int, g: dict) -> int | None:
    """Pixels of a row tile (microkernels.conv_kernel's row_stride: each input value a window
    row reads is broadcast once for all the tile's taps on it), or None where row tiles do
    not apply: windows one column wide, horizontal strides (not measured), and rows no tile
    size from 8 up divides. Its accumulators (two or three vectors a pixel), the s taps'
    weights (as many vectors each) and a broadcast fit the registers (32 with AVX-512, else
    16), and at most a vector of pixels, the width the tile's transpose to channel-major
    takes. The largest divisor of the row wins (3x3 stride 1: 16->64 at 55x55 takes 11
    pixels, 32->128 at 27x27 9)."""
    if not ROW_TILES or g["s"] == 1 or g["sw"] != 1:
        return None
    registers = 32 if vector_width() == 16 else 16
    vw = tile_vector_width(kb)
    nv = kb // vw
    most = min(vw, (registers - 1 - nv * g["s"]) // nv)
    return next((p for p in range(most, 7, -1) if g["ow"] % p == 0), None)


def _c_blocks(cg: int, bytes_per_channel: int) -> tuple[int, int, int]:
    """(CB, full blocks, tail channels): cg = CB * full + tail, CB * bytes ~ W_BLOCK_BYTES."""
    target = max(1, W_BLOCK_BYTES // max(1, bytes_per_channel))
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


def _direct(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str,
            packed: bool = False) -> Stmt:
    cg, r, s, kg, groups = g["cg"], g["r"], g["s"], g["kg"], g["g"]
    KB = wb.shape[-1] if packed else channel_block(kg, vector_width())  # noqa: N806
    row_tile = row_tile_pixels(KB, g)
    P = row_tile or pixels_per_tile(KB, g["oh"] * g["ow"], cg * r * s)  # noqa: N806
    nkb = ceil_div(kg, KB)
    npix = g["oh"] * g["ow"]
    ntiles = ceil_div(npix, P)
    npb = ceil_div(ntiles, ACC_BLOCK_TILES)
    if groups * nkb * npb < MIN_TASKS:  # few output channels: split the pixels finer
        npb = min(ntiles, ceil_div(MIN_TASKS, groups * nkb))
    pblk = ceil_div(ntiles, npb)
    cbs, ncb, ctail = _c_blocks(cg, r * s * KB * 4)
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
    tvw = tile_vector_width(KB)
    acc = Buffer(f"{name}_acc", (1 if single else pblk, KB, tvw), F32)
    ni = var(f"{name}_n")
    pixel_major = _pixel_major_pays(g)
    if SUBSAMPLE_STRIDED and (r, s) == (1, 1) and (g["sh"], g["sw"]) != (1, 1) \
            and (g["hp"], g["wp"]) == (g["h"], g["w"]):
        xp, pad = _subsample(xb, ni, g, name)
        g = dict(g, h=g["oh"], w=g["ow"], hp=g["oh"], wp=g["ow"], sh=1, sw=1)
    elif pixel_major:
        xp, pad = _pixel_major(xb, ni, g, name)
    else:
        xp, pad = _pad(xb, ni, g, name)
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
        return ceil_div(cbs * taps_kb // 16, csize * pblk) if PREFETCH_WEIGHTS else 0

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
            geo = f"{P}_{r}_{s}_{rowstep}_{chanstep}_{g['dh']}_{g['dw']}"
            row = f"_{g['sw']}" if row_tile else ""
            args = (addr(wpk, gg, kb2, c0, 0, 0, 0), addr(acc, slot, 0, 0), accflag, csize,
                    w_next(c0, csize, tl), *xptrs)
            kern = conv_kernel_name(KB, tvw)
            final, partial = (ukr_call(f"{kern}_{geo}_{cm}_{prefetch_lines(csize)}{row}", *args)
                              for cm in (1, 0))
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
    flops = g["n"] * g["k"] * npix * cg * r * s
    if flops >= MIN_PARALLEL_WORK:
        pixels = fused_parallel([gg, pb, kb2], [groups, npb, nkb], per_kb, name)
    else:
        pixels = For(gg, groups, For(pb, npb, For(kb2, nkb, per_kb)))
    stmt = seq(None if packed else pack_w, For(ni, g["n"], seq(pad, pixels)))
    for buf in (() if packed else (wpk,)) + ((xp,) if xp is not None else ()):
        stmt = Allocate(buf, stmt)
    return stmt


# Output channels and pixel vectors of a _rows tile: ROWS_KC (or rows_channels) x nv
# accumulators
ROWS_KC = 8
ROWS_MAX_ACC = 24
# _rows tiles of one vector a row over at least ROWS_STACK_MIN_TAPS taps hold ROWS_KC channels
# x that vector on ROWS_STACK output rows (1: 16 channels x one row, as rows_channels gives):
# 24 accumulators, each broadcast weight feeding 3 FMAs (one thread, CPU time, same-process
# A/B: 32->32 3x3 at 56x56 0.438 -> 0.392 ms, 16->16 3x3 at 128x128 0.555 -> 0.492; 3->64
# 7x7/2 at 224x224 level; 3->64 3x3/2 at 224x224, 27 taps, 0.390 -> 0.407-0.425)
ROWS_STACK = 3
ROWS_STACK_MIN_TAPS = 64
# _pointwise_rows: an output of at most this many bytes stays in a core's L2
POINTWISE_HOT_OUTPUT_BYTES = 1 << 20


def rows_channels(k: int, kb: int) -> int:
    """Output channels of a _rows tile: 16 (x one pixel vector) with AVX-512's 32 registers
    when they divide the channels, else ROWS_KC: each pixel vector loaded then feeds twice
    the FMAs (3->64 3x3/2 at 224x224: 0.41 -> 0.37 ms, 3->32: 0.22 -> 0.19; 3x3 stride-1
    16->16 and 32->32 the same)."""
    wide = 2 * ROWS_KC
    return wide if vector_width() == 16 and k % wide == 0 and kb % wide == 0 else ROWS_KC


def _rows_pay(g: dict, kb: int) -> bool:
    """Where _rows beats _direct (measured against each other, 1 thread, AVX-512): a short
    reduction (a 3x3 first layer over 3 channels: 0.80 -> 0.67 ms for 3->64 at 224x224/2),
    or few output channels over a moderate one (16->16 3x3 at 128x128 1.07 -> 0.85 ms, 32->32
    at 64x64 0.88 -> 0.78); the direct tile wins from 64 output channels (16->64 3x3, a 7x7
    first layer) and on long reductions (64->32 3x3). Rows of at least one vector, and a
    window of more than one tap: a 1x1 conv would pay the phase copy of its whole input for
    nothing (128->16 at 55x55: 0.17 -> 0.41 ms)."""
    reduction = g["cg"] * g["r"] * g["s"]
    return g["g"] == 1 and kb % ROWS_KC == 0 and g["ow"] >= vector_width() and \
        g["r"] * g["s"] > 1 and (reduction <= 48 or (g["k"] <= 32 and reduction <= 320))


def _pointwise_rows_pay(g: dict, kb: int) -> bool:
    """A 1x1 stride-1 unpadded conv over at most 32 input channels: _pointwise_rows beats the
    GEMM, whose packing of the activations and per-tile stores weigh on so short a reduction
    (16->96 at 112x112: 0.79 -> 0.60 ms; 16->64 at 55x55: 0.11 -> 0.075), and ties from 24
    channels; from 64 the GEMM or the direct tile win (64->384 at 14x14: 0.10 -> 0.14).
    Also any 1x1 onto at most 24 output channels: the direct tile's 16 or 32 channels are
    then too few accumulators or mostly padding (AVX-512: 64->16 at 55x55 0.097 -> 0.049 ms,
    128->16 0.17 -> 0.13, 96->24 at 56x56 0.19 -> 0.12); at 32 they tie."""
    return (g["r"], g["s"], g["sh"], g["sw"]) == (1, 1, 1, 1) \
        and (g["cg"] <= 32 or g["k"] <= 24) \
        and (g["hp"], g["wp"]) == (g["h"], g["w"]) and g["g"] == 1 and kb % ROWS_KC == 0 \
        and g["oh"] * g["ow"] >= vector_width()


def _rows_vectors(ow: int, vw: int, kc: int = ROWS_KC) -> tuple[int, int]:
    """(pixel vectors per tile, tiles per row): the fewest computed vectors per row, with at
    least 12 accumulators per tile of kc channels."""
    v = ceil_div(ow, vw)
    best = None
    for nv in range(ceil_div(12, kc), ROWS_MAX_ACC // kc + 1):
        chunks = ceil_div(v, nv)
        key = (chunks * nv, -nv)
        if best is None or key < best[0]:
            best = (key, nv, chunks)
    return best[1], best[2]


def _store_tile(tile: Buffer, out: Buffer, index, k0, k: int, width: int, epilogue,
                name: str, column0: int = 0) -> Stmt:
    """A rows tile T[kc][span] (from column column0 on) into the output: channel k0 + v's
    first `width` pixels at index(v, j), through the epilogue; a static width, so the vector
    loop has no bounds test (one made the stores scalar)."""
    v, j = var(f"{name}_v"), var(f"{name}_j")
    idx = index(v, j)
    value = Load(tile, (v, column0 + j), F32)
    if epilogue is not None:
        value = epilogue(value, idx)
    row: Stmt = For(j, width, Store(out, idx, value), "vectorized")
    kc = tile.shape[0]
    if k % kc:
        row = IfThenElse(lt(k0 + v, k), row)
    return For(v, kc, row)


def _rows(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str) -> Stmt:
    """Output pixels as vectors, output channels broadcast (TVM's NCHW direct conv the other
    way round): a tile is ROWS_KC (or rows_channels) channels x nv vectors of one output row,
    or ROWS_KC channels x one vector of ROWS_STACK rows, stored straight into NCHW rows (no
    transpose). The padded input is first split into stride phases, so
    every tap reads contiguous pixels at any stride: Xph[c][py][px][i][j] =
    xpad[c][i*sh + py][j*sw + px]."""
    vw = vector_width()
    c, r, s, k, kb = g["c"], g["r"], g["s"], g["k"], wb.shape[-1]
    sh, sw, dh, dw, oh, ow = g["sh"], g["sw"], g["dh"], g["dw"], g["oh"], g["ow"]
    kcn = rows_channels(k, kb)
    nv, chunks = _rows_vectors(ow, vw, kcn)
    # a tile of one vector a row: ROWS_KC channels x the vector of ROWS_STACK rows instead
    stack = ROWS_STACK if ROWS_STACK > 1 and nv == 1 and kcn > ROWS_KC \
        and c * r * s >= ROWS_STACK_MIN_TAPS else 1
    if stack > 1:
        kcn, nv = ROWS_KC, stack
    span = vw if stack > 1 else nv * vw
    groups = ceil_div(oh, stack)  # of output rows, a tile each per column chunk
    hq = groups * stack + (r - 1) * dh // sh
    wq = chunks * span + (s - 1) * dw // sw
    xph = Buffer(f"{name}_xph", (c, sh, sw, hq, wq), F32)
    ni = var(f"{name}_n")
    ci, qi = var(f"{name}_xc"), var(f"{name}_xi")
    phases = []
    for py in range(sh):  # the phases unrolled: each row's bounds are then static
        ih = qi * sh + py - g["pt"]
        for px in range(sw):
            phases.append(_padded_plane_row(
                lambda q, v, py=py, px=px: Store(xph, (ci, imm(py), imm(px), qi, q), v),
                lambda col, ih=ih: Load(xb, (ni, ci, ih, col), F32),
                logical_and(ge(ih, 0), lt(ih, g["h"])), wq, sw, px - g["pl"], g["w"],
                f"{name}_x{py}_{px}"))
    fill = For(ci, c, For(qi, hq, seq(*phases)),
               "parallel" if c * sh * sw * hq * wq >= MIN_PARALLEL_WORK else "serial")
    nkc = ceil_div(k, kcn)
    tile = Buffer(f"{name}_tile", (kcn, stack * span), F32)
    kc, oi = var(f"{name}_kc"), var(f"{name}_oh")
    k0 = kc * kcn
    geo = f"{kcn}_{nv}_{vw}_{c}_{r}_{s}_1_{kb}_{sh}_{sw}_{dh}_{dw}_{hq}_{wq}" + \
        ("_1" if stack > 1 else "")

    def tile_of(ch, width: int, tag: str) -> Stmt:
        """The tile at column ch * span: the micro-kernel, then its first `width` columns
        (of each of its rows) stored through the epilogue."""
        call = ukr_call(f"convrows_{geo}",
                        addr(wb, 0, floordiv(k0, kb), 0, 0, 0, floormod(k0, kb)),
                        addr(tile, 0, 0), addr(xph, 0, 0, 0, oi * stack, ch * span))
        stores = []
        for q in range(stack):
            row = oi * stack + q
            store = _store_tile(tile, out,
                                lambda v, j, row=row: (ni, k0 + v, row, ch * span + j),
                                k0, k, width, epilogue, f"{name}_{tag}{q}", q * span)
            stores.append(IfThenElse(lt(row, oh), store) if oh % stack and q else store)
        return seq(call, *stores)

    ch = var(f"{name}_ch")
    last = ow - (chunks - 1) * span
    body = Allocate(tile, seq(For(ch, chunks - 1, tile_of(ch, span, "f")) if chunks > 1
                              else None, tile_of(imm(chunks - 1), last, "l")))
    flops = k * oh * ow * c * r * s
    par = fused_parallel([kc, oi], [nkc, groups], body, name) if flops >= MIN_PARALLEL_WORK \
        else For(kc, nkc, For(oi, groups, body))
    return Allocate(xph, For(ni, g["n"], seq(fill, par)))


def _pointwise_rows(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str) -> Stmt:
    """A 1x1 stride-1 unpadded conv through the rows micro-kernel over the flattened pixels:
    its input planes are read in place (no phase copy, no GEMM packing of the activations);
    only the last, partial tile's pixels are copied into zero-padded scratch, once per image
    before the channel blocks read it, so no vector load passes the end of the input."""
    vw = vector_width()
    c, k, kb, npix = g["c"], g["k"], wb.shape[-1], g["oh"] * g["ow"]
    # ROWS_KC channels a tile: 16 (rows_channels) measured worse here (16->96 at 112x112:
    # 0.32 -> 0.36 ms, 128->16 at 55x55 0.108 -> 0.117)
    nv, chunks = _rows_vectors(npix, vw)
    span = nv * vw
    last = npix - (chunks - 1) * span
    nkc = ceil_div(k, ROWS_KC)
    tile = Buffer(f"{name}_tile", (ROWS_KC, span), F32)
    tail = Buffer(f"{name}_tail", (c, span), F32)
    ni, kc, ch = var(f"{name}_n"), var(f"{name}_kc"), var(f"{name}_ch")
    k0 = kc * ROWS_KC
    w_ptr = addr(wb, 0, floordiv(k0, kb), 0, 0, 0, floormod(k0, kb))

    def pixel(p):
        return floordiv(p, g["ow"]), floormod(p, g["ow"])

    def tile_at(x_ptr, plane: int, width: int, tag: str) -> Stmt:
        geo = f"{ROWS_KC}_{nv}_{vw}_{c}_1_1_1_{kb}_1_1_1_1_1_{plane}"
        return seq(ukr_call(f"convrows_{geo}", w_ptr, addr(tile, 0, 0), x_ptr),
                   _store_tile(tile, out, lambda v, j: (ni, k0 + v, *pixel(ch * span + j)),
                               k0, k, width, epilogue, f"{name}_{tag}"))

    full = tile_at(addr(xb, ni, 0, *pixel(ch * span)), npix, span, "f")
    copy = None
    if last < span:
        cc, jj = var(f"{name}_tc"), var(f"{name}_tj")
        p = (chunks - 1) * span + jj
        copy = For(cc, c, For(jj, span, Store(tail, (cc, jj), if_then_else(
            lt(p, npix), Load(xb, (ni, cc, *pixel(p)), F32), zero())), "vectorized"))
        body: Stmt = IfThenElse(lt(ch, chunks - 1), full,
                                tile_at(addr(tail, 0, 0), span, last, "l"))
    else:
        body = full
    body = Allocate(tile, body)
    # pixel chunks outer when reading more channels than writing (144->24 at 56x56: 0.29 ->
    # 0.23 ms, 128->16 at 55x55 0.134 -> 0.131), or when the whole output stays in L2 (then
    # the input is read once: AVX-512, 16->64 at 55x55 0.053 -> 0.049 ms, 32->128 at 27x27
    # 0.045 -> 0.042, 32->192 at 28x28 0.064 -> 0.062); channel blocks outer otherwise, so
    # that fewer output planes are written at a time (16->96 at 112x112: 0.38 -> 0.32,
    # 24->144 at 56x56 0.156 -> 0.150)
    chunks_outer = c > k or k * npix * 4 <= POINTWISE_HOT_OUTPUT_BYTES
    loops, extents = ([ch, kc], [chunks, nkc]) if chunks_outer else ([kc, ch], [nkc, chunks])
    flops = k * npix * c
    par = fused_parallel(loops, extents, body, name) if flops >= MIN_PARALLEL_WORK \
        else For(loops[0], extents[0], For(loops[1], extents[1], body))
    stmt = For(ni, g["n"], seq(copy, par))
    return Allocate(tail, stmt) if copy is not None else stmt


def _depthwise(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str) -> Stmt:
    """Cg == 1: out[n, k] = sum_rs xpad[k // Kg] * w[k, 0] per output channel plane, through
    window.window_stmt (stride phases, flattened rows: a 14x14 stride-2 MobileNet layer was a
    short loop of strided loads)."""
    geo = dict(n=g["n"], k=g["k"], h=g["h"], w=g["w"], kh=g["r"], kw=g["s"], sh=g["sh"],
               sw=g["sw"], dh=g["dh"], dw=g["dw"], pt=g["pt"], pl=g["pl"], oh=g["oh"],
               ow=g["ow"])
    kg = g["kg"]

    def weighted_sum(taps, k):
        terms = [t * Load(wb, (k, imm(0), imm(i // g["s"]), imm(i % g["s"])), F32)
                 for i, t in enumerate(taps)]
        acc = terms[0]
        for t in terms[1:]:
            acc = acc + t
        return acc

    return window_stmt(xb, out, geo, zero(), weighted_sum, lambda acc, *_: acc, epilogue, name,
                       channel_of=lambda k: floordiv(k, kg) if kg != 1 else k)


def conv_rows_stmt(xb: Buffer, wb: Buffer, out: Buffer, g: dict, name: str) -> Stmt:
    """The output rows of geometry g (as _conv builds it; a packed weight, groups 1, a window
    wider than one tap) through _rows or _direct, whichever _conv would pick, with no epilogue:
    conv_pool computes the strips of a conv's output this way. Both schedules read the input
    through their own padded copy, whose row offset -g["pt"] may then be an expression (the
    strip's first row); a strip that needs no copy (the whole unpadded input) must start at
    row 0 (a static pt of 0)."""
    if g["g"] != 1 or g["r"] * g["s"] == 1:
        raise ValueError(f"conv_rows_stmt: groups {g['g']} and a {g['r']}x{g['s']} window; "
                         f"expected groups 1 and a window wider than one tap")
    if (g["hp"], g["wp"]) == (g["h"], g["w"]) and not (isinstance(g["pt"], int) and g["pt"] == 0):
        raise ValueError("conv_rows_stmt: an unpadded strip of the whole input must start at row 0")
    if _rows_pay(g, wb.shape[-1]):
        return _rows(xb, wb, out, g, None, name)
    return _direct(xb, wb, out, g, None, name, packed=True)
