"""Configuration of the int8 schedules (Int8Config) and what the target offers them.

The int8 kernels multiply unsigned 8-bit data by signed 8-bit weights into int32 (the
codegen.llvm.microkernels Int8Dot tile): through `vpdpbusd` where the target has AVX512-VNNI
(16 int32 lanes, or 8 with AVX512VL) or AVX-VNNI (8 lanes); else through `vpmaddwd` on
16-bit widened operands (AVX512BW, AVX2: exact, about half the products an instruction),
else through plain widening multiplies (any target; exact, slow): dot_instruction. The
weights are packed at compile time for it: four consecutive input channels (K values) of one
output column form a 32-bit lane, a vector of `lanes` columns holds 4 x lanes bytes, and a
panel (dense) or channel block (conv) is tile_vectors vectors wide (int8_dense_geometry,
int8_conv_geometry). One thread, 128 x 768 x 768: vpdpbusd 837 GOP/s (AVX-512), vpmaddwd 164
(AVX-512) and 118 (AVX2), plain widening about 5.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..options import CodegenOptions
from ..parallel import ParallelPolicy
from .common import ceil_div
from .config import ScheduleConfig, pick

__all__ = ["Int8Config", "resolve_int8", "vnni", "dot_instruction", "DOTS", "int8_lanes",
           "int8_threads", "int8_dense_geometry", "int8_conv_geometry"]

DOTS = ("widen", "vpmaddwd", "vpdpbusd")  # the dot-product instructions, slowest first

# (rows, vectors) of the register tile by lanes: accumulators + weight vectors + a broadcast
# within the register file (32 registers with AVX-512, else 16)
DENSE_TILE = {16: (8, 3), 8: (4, 2)}
CONV_TILE = {16: (6, 4), 8: (4, 2)}
# A wide, shallow conv (many output pixels, few input channels) does little work a tile, so
# the tile's fixed costs (its transpose, the call) count: 12 pixels x 2 vectors halves them
# a pixel. One thread, CPU time: 3x3 64->64 at 56x56 0.43 -> 0.36-0.41 ms, the 7x7/2 RGB
# stem 0.80 -> 0.64 ms; 3x3 128->128 at 28x28 0.30 -> 0.33 and 256->256 at 14x14
# 0.28 -> 0.30 lose, so only at least WIDE_PIXELS pixels of at most SHALLOW_CHANNELS.
WIDE_CONV_TILE = {16: (12, 2)}
WIDE_PIXELS, SHALLOW_CHANNELS = 56 * 56, 64
# without vpdpbusd an output vector is two accumulators of pair sums (vpmaddwd), and the
# weights are widened to 16 bits in registers
NO_VNNI_TILE = {16: (4, 2), 8: (2, 2)}
GEMM_UNROLL = 4  # groups of four K values a micro-kernel loop trip (1x1 windows)


def int8_lanes(options: CodegenOptions) -> int:
    """int32 lanes of the int8 kernels' vectors: the options' vector width (16 with AVX-512,
    8 with AVX2)."""
    return options.vector_width


def vnni(options: CodegenOptions, lanes: int) -> bool:
    """Whether the target has vpdpbusd on vectors of `lanes` int32 lanes."""
    features = set(options.cpu.enabled_features())
    if lanes == 16:
        return "avx512vnni" in features
    return "avxvnni" in features or {"avx512vnni", "avx512vl"} <= features


def _pmaddwd(options: CodegenOptions, lanes: int) -> bool:
    features = set(options.cpu.enabled_features())
    return "avx512bw" in features if lanes == 16 else lanes == 8 and "avx2" in features


def dot_instruction(options: CodegenOptions, lanes: int) -> str:
    """The fastest of DOTS the target has on vectors of `lanes` int32 lanes."""
    if vnni(options, lanes):
        return "vpdpbusd"
    return "vpmaddwd" if _pmaddwd(options, lanes) else "widen"


@dataclass(frozen=True)
class Int8Config(ScheduleConfig):
    """The int8 dot-product tile of a dense or conv schedule."""

    lanes: int | None = None           # int32 lanes a vector (16: zmm, 8: ymm)
    tile_rows: int | None = None       # rows (GEMM) or pixels (conv) a micro-kernel tile
    tile_vectors: int | None = None    # vectors of `lanes` output columns / channels a tile
    dot: str | None = None             # one of DOTS (the target must have it)

    def block(self) -> int:
        """Output columns (channels) a tile: the packed weight's panel width."""
        return self.tile_vectors * self.lanes


def resolve_int8(options: CodegenOptions, given: Int8Config | None = None, conv: bool = False,
                 columns: int | None = None, pixels: int = 0, channels: int = 0
                 ) -> Int8Config:
    """The default configuration for the target, keeping `given`'s fields; `columns` (the
    output's width, when known) caps the tile's vectors at what it needs; a conv's output
    pixels and input channels pick its tile."""
    c = given or Int8Config()
    lanes = pick(c.lanes, lambda: int8_lanes(options))
    best = dot_instruction(options, lanes)
    dot = pick(c.dot, lambda: best)
    if dot not in DOTS or DOTS.index(dot) > DOTS.index(best):
        raise ValueError(f"int8 configuration: dot {dot!r} on {lanes}-lane vectors; the "
                         f"target {options.cpu.cpu} has {list(DOTS[:DOTS.index(best) + 1])}")
    fast = dot == "vpdpbusd"
    tiles = DENSE_TILE
    if conv:
        wide = pixels >= WIDE_PIXELS and channels <= SHALLOW_CHANNELS
        tiles = {**CONV_TILE, **WIDE_CONV_TILE} if wide else CONV_TILE
    rows, vectors = tiles[lanes] if fast else NO_VNNI_TILE[lanes]
    if columns is not None:
        vectors = max(1, min(vectors, ceil_div(columns, lanes)))
    if c.lanes is not None and lanes not in (4, 8, 16):
        raise ValueError(f"int8 configuration: lanes must be 4, 8 or 16, got {lanes}")
    return Int8Config(lanes, pick(c.tile_rows, lambda: rows),
                      pick(c.tile_vectors, lambda: vectors), dot)


def int8_threads(policy: ParallelPolicy, macs: int, nbytes: int) -> int:
    """Threads an int8 product of `macs` multiply-adds moving `nbytes` pays for: the policy's
    float32 costs with a quarter of the instructions a multiply-add (four products a lane)."""
    return policy.threads(flops=2 * macs // 4, nbytes=nbytes)


def int8_dense_geometry(n: int, k: int, block: int) -> tuple[int, int, int, int]:
    """The packed int8 dense weight: [ceil(N/block), ceil(K/4), block, 4]."""
    return ceil_div(n, block), ceil_div(k, 4), block, 4


def int8_conv_geometry(k: int, c: int, r: int, s: int, block: int
                       ) -> tuple[int, int, int, int, int, int]:
    """The packed int8 conv weight: [ceil(K/block), ceil(C/4), R, S, block, 4]."""
    return ceil_div(k, block), ceil_div(c, 4), r, s, block, 4
