"""The NCHW conv2d schedules' configuration (Conv2dConfig) and its default: which algorithm of
the direct family runs a conv, its output channel block (the packed weight's block), its pixel
tiles, blocking, copies and prefetching, as the measurements below chose them for the conv's
geometry and the target.

Geometry `g` (conv_geometry): n, c, h, w (input), k, cg, r, s (OIHW weight, Cg input channels
a group), sh, sw, dh, dw, pt, pl (padding top, left), hp, wp (padded plane), oh, ow, g
(groups), kg (output channels a group).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..options import CodegenOptions
from .common import ceil_div
from .config import ScheduleConfig, pick
from .gemm_config import GemmConfig, resolve_gemm, rows_per_tile

__all__ = ["Conv2dConfig", "resolve_conv2d", "conv_geometry", "conv2d_pack_geometry",
           "channel_block", "pixels_per_tile", "least_padding_tile", "row_tile_pixels",
           "ALGORITHMS"]

ALGORITHMS = ("direct", "rows", "pointwise_rows", "gemm")
PB = 6  # pixels a direct tile of two 8-float vectors (12 of the 16 ymm registers)
# Three-vector direct tiles where they pad the channels to at most this much of what
# two-vector tiles do (channel_block)
THREE_VECTOR_PADDING = 0.95
# 1x1 direct convs that read a pixel-major copy of their input (pixel_major_pays)
PIXEL_MAJOR_MIN_CHANNELS = 128  # input channels a group, at least
PIXEL_MAJOR_MIN_OUTPUT = 256    # output channels a group, at least (and at least the input's)
SHORT_REDUCTION = 300  # taps (channels x window) a tile at most for 8-pixel tiles on AVX-512
# Blocking of the reduction (input channels) and of the output pixels, so that a weight block
# (KB output channels x CB input channels x R x S) stays cache-resident while it sweeps a block
# of pixel tiles, and the accumulator block of those tiles stays in L1/L2.
WEIGHT_BLOCK_BYTES = 48 * 1024  # target size of one weight block (KB x CB x R x S floats)
PIXEL_BLOCK_TILES = 48          # pixel tiles (of P pixels) per pixel block
# Parallel tasks (group x pixel block x channel block) a conv has at least, where it has the
# tiles: a squeeze 1x1 onto 32-64 channels was one or two tasks and did not speed up on two
# threads (SqueezeNet's 384->48 at 13x13 0.048 -> 0.062 ms). A build for more threads
# (ParallelPolicy.pool_threads) asks for twice as many, so each gets work within one task of
# the others (ResNet-50's, Inception-v1's and DenseNet-121's convs had 4 to 24 tasks; 16
# threads idled). Not more for fewer threads: 16 or 32 tasks cost ResNet-50 2.5-4% at one
# thread (same-process A/B, CPU time).
MIN_TASKS = 4


def min_tasks(options: CodegenOptions) -> int:
    """The default min_tasks for the threads the build expects."""
    return max(MIN_TASKS, 2 * options.parallel.pool_threads)
# Output channels and pixel vectors of a rows tile: ROWS_KC (or rows_channels) x nv
# accumulators
ROWS_KC = 8
ROWS_MAX_ACC = 24
# rows tiles of one vector a row over at least ROWS_STACK_MIN_TAPS taps hold ROWS_KC channels
# x that vector on ROWS_STACK output rows (instead of 16 channels x one row, as rows_channels
# gives): 24 accumulators, each broadcast weight feeding 3 FMAs (one thread, CPU time,
# same-process A/B: 32->32 3x3 at 56x56 0.438 -> 0.392 ms, 16->16 3x3 at 128x128 0.555 ->
# 0.492; 3->64 7x7/2 at 224x224 level; 3->64 3x3/2 at 224x224, 27 taps, 0.390 -> 0.407-0.425)
ROWS_STACK = 3
ROWS_STACK_MIN_TAPS = 64
# pointwise_rows: pixel chunks are the outer parallel loop when the conv reads more channels
# than it writes (144->24 at 56x56: 0.29 -> 0.23 ms, 128->16 at 55x55 0.134 -> 0.131), or
# when the whole output (at most this many bytes) stays in a core's L2, so the input is read
# once (AVX-512, 16->64 at 55x55 0.053 -> 0.049 ms, 32->128 at 27x27 0.045 -> 0.042, 32->192
# at 28x28 0.064 -> 0.062); channel blocks otherwise, so that fewer output planes are written
# at a time (16->96 at 112x112: 0.38 -> 0.32, 24->144 at 56x56 0.156 -> 0.150)
POINTWISE_HOT_OUTPUT_BYTES = 1 << 20


@dataclass(frozen=True)
class Conv2dConfig(ScheduleConfig):
    """How the NCHW direct family (codegen.schedules.conv2d) computes a conv."""

    nested: ClassVar[dict[str, type]] = {"gemm": GemmConfig}

    algorithm: str | None = None        # direct | rows | pointwise_rows | gemm (ALGORITHMS)
    vector_width: int | None = None     # floats per micro-kernel vector
    channel_block: int | None = None    # KB: output channels a tile; the packed weight's block
    # direct: P pixels a tile, consecutive pixels of one row (row_tile) or flattened pixels
    tile_pixels: int | None = None
    row_tile: bool | None = None
    pixel_major: bool | None = None     # 1x1: tiles read a pixel-major copy of the input
    subsample_strided: bool | None = None  # strided 1x1: copy the pixels read into a plane
    prefetch_weights: bool | None = None   # micro-kernels prefetch the weights read next
    weight_block_bytes: int | None = None  # input-channel blocking (weights a block)
    pixel_block_tiles: int | None = None   # pixel tiles a block (accumulators a task)
    min_tasks: int | None = None           # parallel tasks at least, where the tiles allow
    # rows / pointwise_rows: tiles of rows_channels output channels x rows_vectors pixel
    # vectors (of one row) x rows_stack output rows
    rows_channels: int | None = None
    rows_vectors: int | None = None
    rows_stack: int | None = None
    chunks_outer: bool | None = None    # pointwise_rows: pixel chunks the outer parallel loop
    gemm: GemmConfig | None = None      # gemm: the pointwise product's tiles

    def tile_vector_width(self) -> int:
        """Floats per vector of a direct tile: half the block for two vectors (8 for 16
        channels), else the vector width (three vectors)."""
        return min(self.channel_block // 2, self.vector_width)


def conv_geometry(data_shape, weight_shape, strides, padding, dilation, groups: int) -> dict:
    """The geometry dict of an NCHW conv with an OIHW weight [K, Cg, R, S] (module doc);
    padding is (top, left, bottom, right)."""
    n, c, h, w = data_shape
    k, cg, r, s = weight_shape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    hp, wp = h + pt + pb, w + pl + pr
    oh = (hp - dh * (r - 1) - 1) // sh + 1
    ow = (wp - dw * (s - 1) - 1) // sw + 1
    return dict(n=n, c=c, h=h, w=w, k=k, cg=cg, r=r, s=s, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt,
                pl=pl, hp=hp, wp=wp, oh=oh, ow=ow, g=groups, kg=k // groups)


def conv2d_pack_geometry(k: int, cg: int, r: int, s: int, groups: int, block: int) -> tuple:
    """Shape of the packed weight the micro-kernels read for an OIHW weight [K, Cg, R, S] in
    output channel blocks of `block` (Conv2dConfig.channel_block):
    Wp[G, ceil(Kg/KB), Cg, R, S, KB] with Wp[g, kb, c, r, s, v] = w[g*Kg + kb*KB + v, c, r, s]
    (zero where kb*KB + v >= Kg)."""
    return (groups, ceil_div(k // groups, block), cg, r, s, block)


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
    if vw == 16 and ceil_div(kg, three) * three <= THREE_VECTOR_PADDING * ceil_div(kg, two) * two:
        return three
    return two


def pixels_per_tile(kb: int, vw: int, npix: int | None = None,
                    reduction: int | None = None) -> int:
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
    most = 8 if kb > 2 * vw else (8 if short else 12) if kb >= 32 \
        else 8 if vw == 16 else PB
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


def row_tile_pixels(kb: int, vw: int, g: dict) -> int | None:
    """Pixels of a row tile (microkernels.conv_kernel's row_stride: each input value a window
    row reads is broadcast once for all the tile's taps on it), or None where row tiles do
    not apply: windows one column wide, horizontal strides (not measured), and rows no tile
    size from 8 up divides. Its accumulators (two or three vectors a pixel), the s taps'
    weights (as many vectors each) and a broadcast fit the registers (32 with AVX-512, else
    16), and at most a vector of pixels, the width the tile's transpose to channel-major
    takes. The largest divisor of the row wins (3x3 stride 1: 16->64 at 55x55 takes 11
    pixels, 32->128 at 27x27 9)."""
    if g["s"] == 1 or g["sw"] != 1:
        return None
    registers = 32 if vw == 16 else 16
    tvw = min(kb // 2, vw)
    nv = kb // tvw
    most = min(tvw, (registers - 1 - nv * g["s"]) // nv)
    return next((p for p in range(most, 7, -1) if g["ow"] % p == 0), None)


def _pointwise(g: dict) -> bool:
    """A 1x1, stride-1, unpadded conv."""
    return (g["r"], g["s"], g["sh"], g["sw"]) == (1, 1, 1, 1) \
        and (g["hp"], g["wp"]) == (g["h"], g["w"])


def pixel_major_pays(g: dict) -> bool:
    """A 1x1 stride-1 unpadded conv that writes at least as many channels as it reads, from
    128 in and 256 out: its tiles read a pixel-major copy, whose cost the many output channel
    blocks that read it repay (one thread, CPU time, same-process A/B: 512->1000 at 13x13
    1.123 -> 1.069 ms, 256->1024 at 14x14 0.695 -> 0.640, 128->512 at 28x28 0.776 -> 0.723,
    512->2048 at 7x7 0.683 -> 0.655, 256->256 at 14x14 0.171 -> 0.163; it loses where fewer
    blocks share the copy: 128->128 at 28x28 +5%, 160->192 at 14x14 +6%, 1024->256 +13%)."""
    return _pointwise(g) and g["cg"] >= PIXEL_MAJOR_MIN_CHANNELS \
        and g["kg"] >= max(g["cg"], PIXEL_MAJOR_MIN_OUTPUT)


def gemm_pays(g: dict, kb: int, vw: int) -> bool:
    """A 1x1, stride-1, unpadded conv (per group, out[n] = W . x[n] over NCHW's pixel rows)
    with at most 96 input channels a group, unless the GEMM's row tiles would pad the group's
    output channels 5% more than the direct schedule's channel blocks do, or its pixel panels
    would pad the pixels by over 5%. There the GEMM beats the direct schedule, whose fixed
    cost per tile (transpose, stores) weighs on a short reduction (measured: 16->96 channels
    at 112x112 59 -> 95 GFLOP/s, 24->144 66 -> 102, 64->256 92 -> 104; 64->64 (72 GEMM rows for
    64) and from ~128 input channels the direct one wins, as it does for 64->1280 at 14x14,
    whose 196 pixels take 224 in 32-pixel panels: 67 -> 84 GFLOP/s). Convs over at most 32
    input channels go to pointwise_rows before this is asked."""
    if not _pointwise(g) or g["cg"] > 96:
        return False
    kg, mr, nr = g["kg"], rows_per_tile(g["kg"], False, vw), 2 * vw
    npix = g["oh"] * g["ow"]
    return ceil_div(kg, mr) * mr <= 1.05 * ceil_div(kg, kb) * kb \
        and ceil_div(npix, nr) * nr <= 1.05 * npix


def rows_pay(g: dict, kb: int, vw: int) -> bool:
    """Where the rows algorithm beats the direct one (measured against each other, 1 thread,
    AVX-512): a short reduction (a 3x3 first layer over 3 channels: 0.80 -> 0.67 ms for 3->64
    at 224x224/2), or few output channels over a moderate one (16->16 3x3 at 128x128 1.07 ->
    0.85 ms, 32->32 at 64x64 0.88 -> 0.78); the direct tile wins from 64 output channels
    (16->64 3x3, a 7x7 first layer) and on long reductions (64->32 3x3). Rows of at least one
    vector, and a window of more than one tap: a 1x1 conv would pay the phase copy of its
    whole input for nothing (128->16 at 55x55: 0.17 -> 0.41 ms)."""
    reduction = g["cg"] * g["r"] * g["s"]
    return g["g"] == 1 and kb % ROWS_KC == 0 and g["ow"] >= vw and \
        g["r"] * g["s"] > 1 and (reduction <= 48 or (g["k"] <= 32 and reduction <= 320))


def pointwise_rows_pay(g: dict, kb: int, vw: int) -> bool:
    """A 1x1 stride-1 unpadded conv over at most 32 input channels: pointwise_rows beats the
    GEMM, whose packing of the activations and per-tile stores weigh on so short a reduction
    (16->96 at 112x112: 0.79 -> 0.60 ms; 16->64 at 55x55: 0.11 -> 0.075), and ties from 24
    channels; from 64 the GEMM or the direct tile win (64->384 at 14x14: 0.10 -> 0.14).
    Also any 1x1 onto at most 24 output channels: the direct tile's 16 or 32 channels are
    then too few accumulators or mostly padding (AVX-512: 64->16 at 55x55 0.097 -> 0.049 ms,
    128->16 0.17 -> 0.13, 96->24 at 56x56 0.19 -> 0.12); at 32 they tie."""
    return _pointwise(g) and (g["cg"] <= 32 or g["k"] <= 24) and g["g"] == 1 \
        and kb % ROWS_KC == 0 and g["oh"] * g["ow"] >= vw


def rows_channels(k: int, kb: int, vw: int) -> int:
    """Output channels of a rows tile: 16 (x one pixel vector) with AVX-512's 32 registers
    when they divide the channels, else ROWS_KC: each pixel vector loaded then feeds twice
    the FMAs (3->64 3x3/2 at 224x224: 0.41 -> 0.37 ms, 3->32: 0.22 -> 0.19; 3x3 stride-1
    16->16 and 32->32 the same)."""
    wide = 2 * ROWS_KC
    return wide if vw == 16 and k % wide == 0 and kb % wide == 0 else ROWS_KC


def rows_vectors(width: int, vw: int, kc: int = ROWS_KC) -> int:
    """Pixel vectors a rows tile over rows `width` pixels wide: the fewest computed vectors
    per row, with at least 12 accumulators per tile of kc channels."""
    v = ceil_div(width, vw)
    best = None
    for nv in range(ceil_div(12, kc), ROWS_MAX_ACC // kc + 1):
        key = (ceil_div(v, nv) * nv, -nv)
        if best is None or key < best[0]:
            best = (key, nv)
    return best[1]


def choose_algorithm(g: dict, packed: bool, kb: int, vw: int) -> str:
    """The direct family's algorithm for a conv (the rows algorithms read packed weights)."""
    if packed and pointwise_rows_pay(g, kb, vw):
        return "pointwise_rows"
    if gemm_pays(g, kb, vw):
        return "gemm"
    if packed and rows_pay(g, kb, vw):
        return "rows"
    return "direct"


def resolve_conv2d(g: dict, packed: bool, options: CodegenOptions,
                   given: Conv2dConfig | None = None) -> Conv2dConfig:
    """The configuration of the conv of geometry g (packed: its weight is pre-packed in the
    configuration's channel blocks): `given`'s fields, the rest by default (the heuristics
    above), checked."""
    c = given or Conv2dConfig()
    vw = pick(c.vector_width, lambda: options.vector_width)
    kb = pick(c.channel_block, lambda: channel_block(g["kg"], vw))
    algorithm = pick(c.algorithm, lambda: choose_algorithm(g, packed, kb, vw))
    where = f"Conv2dConfig for a {g['cg']}->{g['kg']} {g['r']}x{g['s']} conv"
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{where}: algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    tvw = min(kb // 2, vw)
    if tvw not in (4, 8, 16) or kb not in (2 * tvw, 3 * tvw):
        raise ValueError(f"{where}: channel_block {kb} with {vw}-float vectors; expected two "
                         f"vectors of 4, 8 or 16 floats (at most {vw}), or three of {vw}")
    c = Conv2dConfig(algorithm=algorithm, vector_width=vw, channel_block=kb)
    if algorithm in ("rows", "pointwise_rows") and not packed:
        raise ValueError(f"{where}: the {algorithm} algorithm reads a packed weight")
    if algorithm in ("gemm", "pointwise_rows") and (not _pointwise(g) or (
            algorithm == "pointwise_rows" and g["g"] != 1)):
        raise ValueError(f"{where}: the {algorithm} algorithm computes 1x1, stride-1, "
                         f"unpadded convs" + (" of one group" if algorithm != "gemm" else ""))
    given = given or Conv2dConfig()
    if algorithm == "direct":
        return _resolve_direct(g, c, given, where, options)
    if algorithm == "gemm":
        return Conv2dConfig(algorithm, vw, kb, gemm=resolve_gemm(
            g["kg"], g["oh"] * g["ow"], g["cg"], False, options, given.gemm))
    if algorithm == "rows":
        return _resolve_rows(g, c, given, where)
    kc = pick(given.rows_channels, lambda: ROWS_KC)
    npix = g["oh"] * g["ow"]
    if kb % kc:
        raise ValueError(f"{where}: rows_channels {kc} must divide channel_block {kb}")
    return Conv2dConfig(algorithm, vw, kb, rows_channels=kc,
                        rows_vectors=pick(given.rows_vectors, lambda: rows_vectors(npix, vw)),
                        rows_stack=1, chunks_outer=pick(
                            given.chunks_outer, lambda: g["c"] > g["k"]
                            or g["k"] * npix * 4 <= POINTWISE_HOT_OUTPUT_BYTES))


def _resolve_direct(g: dict, c: Conv2dConfig, given: Conv2dConfig, where: str,
                    options: CodegenOptions) -> Conv2dConfig:
    kb, vw = c.channel_block, c.vector_width
    row_px = row_tile_pixels(kb, vw, g)
    row_tile = pick(given.row_tile, lambda: row_px is not None)
    p = given.tile_pixels
    if p is None:
        if row_tile and row_px is None:
            raise ValueError(f"{where}: row_tile without tile_pixels, and no row tile of 8 to "
                             f"{min(kb // 2, vw)} pixels divides the {g['ow']}-pixel rows")
        p = row_px if row_tile else pixels_per_tile(kb, vw, g["oh"] * g["ow"],
                                                    g["cg"] * g["r"] * g["s"])
    if p < 1 or p > min(kb // 2, vw) or (row_tile and g["ow"] % p):
        raise ValueError(f"{where}: tile_pixels {p}: expected 1 to {min(kb // 2, vw)} (a tile "
                         f"is transposed in vectors)" + (f", dividing the {g['ow']}-pixel rows "
                                                         f"of a row tile" if row_tile else ""))
    pixel_major = pick(given.pixel_major, lambda: pixel_major_pays(g))
    if pixel_major and not _pointwise(g):
        raise ValueError(f"{where}: pixel_major reads 1x1, stride-1, unpadded convs only")
    return Conv2dConfig(
        "direct", vw, kb, tile_pixels=p, row_tile=row_tile, pixel_major=pixel_major,
        subsample_strided=pick(given.subsample_strided, lambda: True),
        prefetch_weights=pick(given.prefetch_weights, lambda: True),
        weight_block_bytes=pick(given.weight_block_bytes, lambda: WEIGHT_BLOCK_BYTES),
        pixel_block_tiles=pick(given.pixel_block_tiles, lambda: PIXEL_BLOCK_TILES),
        min_tasks=pick(given.min_tasks, lambda: min_tasks(options)))


def _resolve_rows(g: dict, c: Conv2dConfig, given: Conv2dConfig, where: str) -> Conv2dConfig:
    kb, vw = c.channel_block, c.vector_width
    kc = pick(given.rows_channels, lambda: rows_channels(g["k"], kb, vw))
    nv = pick(given.rows_vectors, lambda: rows_vectors(g["ow"], vw, kc))
    stack = pick(given.rows_stack, lambda: ROWS_STACK if nv == 1 and kc > ROWS_KC
                 and g["c"] * g["r"] * g["s"] >= ROWS_STACK_MIN_TAPS else 1)
    if stack > 1:  # ROWS_KC channels x one vector of `stack` rows
        kc = pick(given.rows_channels, lambda: ROWS_KC)
        nv = 1
    if kb % kc or (stack > 1 and nv != 1) or stack < 1:
        raise ValueError(f"{where}: rows tiles of {kc} channels x {nv} vectors x {stack} rows; "
                         f"the channels must divide channel_block {kb}, and a tile of several "
                         f"rows is one vector wide")
    return Conv2dConfig("rows", vw, kb, rows_channels=kc, rows_vectors=nv, rows_stack=stack)
