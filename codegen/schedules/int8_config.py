"""Configuration of the int8 schedules (Int8Config) and what the target offers them.

The int8 kernels multiply unsigned 8-bit data by signed 8-bit weights into int32 (the
codegen.llvm.microkernels Int8Dot tile): through `vpdpbusd` where the target has AVX512-VNNI
(16 int32 lanes, or 8 with AVX512VL) or AVX-VNNI (8 lanes), else through widening multiplies
(exact, slower). The weights are packed at compile time for it: four consecutive input
channels (K values) of one output column form a 32-bit lane, a vector of `lanes` columns
holds 4 x lanes bytes, and a panel (dense) or channel block (conv) is tile_vectors vectors
wide: int8_pack_geometry.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..options import CodegenOptions
from ..parallel import ParallelPolicy
from .common import ceil_div
from .config import ScheduleConfig, pick

__all__ = ["Int8Config", "resolve_int8", "vnni", "int8_lanes", "int8_threads",
           "int8_dense_geometry", "int8_conv_geometry"]

# (rows, vectors) of the register tile by lanes: accumulators + weight vectors + a broadcast
# within the register file (32 registers with AVX-512, else 16)
DENSE_TILE = {16: (8, 3), 8: (4, 2)}
CONV_TILE = {16: (6, 4), 8: (4, 2)}
NO_VNNI_TILE = {16: (4, 2), 8: (2, 2)}  # widening keeps temporaries in registers too
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


@dataclass(frozen=True)
class Int8Config(ScheduleConfig):
    """The int8 dot-product tile of a dense or conv schedule."""

    lanes: int | None = None           # int32 lanes a vector (16: zmm, 8: ymm)
    tile_rows: int | None = None       # rows (GEMM) or pixels (conv) a micro-kernel tile
    tile_vectors: int | None = None    # vectors of `lanes` output columns / channels a tile
    vnni: bool | None = None           # vpdpbusd (else widening multiplies)

    def block(self) -> int:
        """Output columns (channels) a tile: the packed weight's panel width."""
        return self.tile_vectors * self.lanes


def resolve_int8(options: CodegenOptions, given: Int8Config | None = None, conv: bool = False,
                 columns: int | None = None) -> Int8Config:
    """The default configuration for the target, keeping `given`'s fields; `columns` (the
    output's width, when known) caps the tile's vectors at what it needs."""
    c = given or Int8Config()
    lanes = pick(c.lanes, lambda: int8_lanes(options))
    fast = pick(c.vnni, lambda: vnni(options, lanes))
    if fast and not vnni(options, lanes):
        raise ValueError(f"int8 configuration: vnni on {lanes}-lane vectors, which the target "
                         f"{options.cpu.cpu} ({options.cpu.features[:60]}...) does not have")
    rows, vectors = (CONV_TILE if conv else DENSE_TILE)[lanes] if fast else NO_VNNI_TILE[lanes]
    if columns is not None:
        vectors = max(1, min(vectors, ceil_div(columns, lanes)))
    if c.lanes is not None and lanes not in (4, 8, 16):
        raise ValueError(f"int8 configuration: lanes must be 4, 8 or 16, got {lanes}")
    return Int8Config(lanes, pick(c.tile_rows, lambda: rows),
                      pick(c.tile_vectors, lambda: vectors), fast)


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
