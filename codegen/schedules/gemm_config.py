"""The GEMM schedule's configuration (GemmConfig, GemvConfig) and its default: the tile, K and M
blocking and parallel split the measurements below chose, as functions of the product's shape
and the target.

The packed weight layout of a dense follows from its configuration (dense_pack_geometry), so
the pass that packs a constant weight and the schedule that reads it agree by construction.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..options import CodegenOptions
from .common import ceil_div
from .config import ScheduleConfig, pick

__all__ = ["GemmConfig", "GemvConfig", "resolve_gemm", "resolve_gemv", "dense_pack_geometry",
           "k_blocks", "block_rows", "gemm_pays", "tile_columns", "rows_per_tile"]

# Depth of a K block, by vector width. AVX2 (Zen 3 measurements): 256, the B micro-panel in L1.
# AVX-512: 1024, one block for K <= 1024: a transformer's 128 x 3072 output is 1.5 MB, more than
# L2, and every further K block reads and writes it again (one thread, Zen 4: 128x768 @ 768x3072
# 4.26 -> 3.95 ms, @ 768x2304 2.90 -> 2.78, 512x768 @ 768x3072 15.9 -> 14.1; onnxruntime 3.88,
# 2.66, 13.4). The B panel then streams from L2 instead of sitting in L1.
K_BLOCK = {8: 256, 16: 1024}
M_BLOCK_ROWS = {8: 144, 16: 288}  # at most this many rows of A per L2 block, by vector width
A_BLOCK_BYTES = 512 * 1024  # and at most this much packed A (kc deep) per block
PARALLEL_BATCHES = 4  # batch_matmul: at least this many products run one per task
# N panels a GEMV micro-kernel call computes, by vector width. AVX-512: two load four vectors
# per broadcast of x, where one panel loaded two (one thread, CPU time, same-process A/B: LSTM
# 0.92x, GRU 0.87x; three or four panels no faster than two). AVX2: one, as its 16 ymm
# registers do not hold two panels' 16 accumulators (gemv_16_2 spills on znver3).
GEMV_PANELS = {8: 1, 16: 2}
GEMV_MAX_ROWS = 4  # a packed dense of at most this many rows runs the GEMV micro-kernel


@dataclass(frozen=True)
class GemmConfig(ScheduleConfig):
    """C[m, n] = A[m, k] B[n, k]^T on packed panels (codegen.schedules.gemm.gemm_stmt)."""

    vector_width: int | None = None     # floats per vector of the micro tile
    tile_rows: int | None = None        # MR: rows of C per micro-kernel tile
    tile_columns: int | None = None     # NR: columns (a multiple of the vector width)
    k_block: int | None = None          # K is split into equal blocks of at most this depth
    m_block_rows: int | None = None     # rows of A packed per L2 block, at most
    a_block_bytes: int | None = None    # and at most this many bytes of packed A
    parallel_batches: int | None = None  # from this many products, one task a product

    def tile(self) -> tuple[int, int]:
        return self.tile_rows, self.tile_columns


@dataclass(frozen=True)
class GemvConfig(ScheduleConfig):
    """A packed dense of few rows as matrix-vector products (gemm.gemv_stmt); its weight is
    packed as the GEMM's (tile_columns wide panels, K padded to k_block blocks)."""

    vector_width: int | None = None
    tile_columns: int | None = None     # NR of the packed panels
    k_block: int | None = None          # the packing's K blocks (the panels' padded depth)
    panels: int | None = None           # N panels a micro-kernel call computes


def gemm_pays(m: int, n: int, k: int) -> bool:
    """Whether the packed schedule pays for an unpacked product (not for matrix-vector
    shapes, which the generic reduction runs)."""
    return m >= 2 and n >= 4 and k >= 1


def k_blocks(k: int, k_block: int) -> tuple[int, int]:
    """(nb, kc): K split into nb equal blocks of kc (padding kc * nb - k < nb)."""
    nb = max(1, ceil_div(k, k_block))
    return nb, max(1, ceil_div(k, nb))


def block_rows(kc: int, mr: int, config: GemmConfig) -> int:
    """Rows of A per packed block (a multiple of mr): m_block_rows, fewer when kc is deep."""
    rows = min(config.m_block_rows, config.a_block_bytes // (4 * kc))
    return max(mr, rows // mr * mr)


def tile_columns(n: int, vw: int) -> int:
    """NR of the dense family's micro tile: rows of three vectors on AVX-512 (8 x 48: 24 zmm
    accumulators, three B vectors and a broadcast of 32) when that pads n's columns no more
    than two vectors do, else two (6 x 16 on AVX2, whose 16 ymm hold no more). Per FMA the
    8 x 48 tile loads 0.46 values to 8 x 32's 0.63; one thread, CPU time, Xeon (AVX-512),
    benchmarks/experiments/gemm_tiles.py: 128 rows at 768 x 3072, 3072 x 768, 768 x 768,
    768 x 2304, 768 x 1000 about 8% faster (0.92x the time)."""
    if vw != 16:
        return 2 * vw
    return 3 * vw if ceil_div(n, 3 * vw) * 3 <= ceil_div(n, 2 * vw) * 2 else 2 * vw


def rows_per_tile(m: int | None, a_in_place: bool, vw: int) -> int:
    """Rows of C per micro-kernel tile: AVX2 6x16 = 12 ymm accumulators (of 16); AVX-512
    12x32 = 24 zmm (of 32), or 8x32 when that pads m's rows less (a batch-32 dense computed
    36 rows for 32 with 12: 0.29 -> 0.25 ms for 32x784 @ 784x512). When A can be read in
    place, ties go to 8 rows: only the 8x32 kernel reads it so (with twelve row addresses LLVM
    spills the 12x32 one's accumulators, 2-2.5x slower), and packing A costs more than a tie."""
    if vw == 8:
        return 6
    if m is None:
        return 12
    if a_in_place and ceil_div(m, 8) * 8 <= ceil_div(m, 12) * 12:
        return 8
    return min((12, 8), key=lambda mr: (ceil_div(m, mr) * mr, -mr))


def resolve_gemm(m: int, n: int, k: int, a_in_place: bool, options: CodegenOptions,
                 given: GemmConfig | None = None, wide: bool = False) -> GemmConfig:
    """The GEMM configuration for C[m, n] over k: `given`'s fields, the rest by default.

    a_in_place: A's rows are read in place (gemm_stmt's a_rows). wide: the dense family's
    tiles (tile_columns: three vectors where they pad no more); else rows of two vectors."""
    c = given or GemmConfig()
    vw = pick(c.vector_width, lambda: options.vector_width)
    nr = pick(c.tile_columns, lambda: tile_columns(n, vw) if wide else 2 * vw)
    mr = pick(c.tile_rows, lambda: 8 if nr == 3 * vw else rows_per_tile(m, a_in_place, vw))
    if nr % vw or nr // vw not in (1, 2, 3) or mr < 1:
        raise ValueError(f"GemmConfig: a {mr} x {nr} tile of {vw}-float vectors; expected rows "
                         f"of one to three vectors")
    return GemmConfig(vw, mr, nr, pick(c.k_block, lambda: K_BLOCK[vw]),
                      pick(c.m_block_rows, lambda: M_BLOCK_ROWS[vw]),
                      pick(c.a_block_bytes, lambda: A_BLOCK_BYTES),
                      pick(c.parallel_batches, lambda: PARALLEL_BATCHES))


def resolve_gemv(n: int, options: CodegenOptions, given: GemvConfig | None = None
                 ) -> GemvConfig:
    """The GEMV configuration of a packed dense onto n outputs (panels packed as the GEMM's
    default would pack them)."""
    c = given or GemvConfig()
    vw = pick(c.vector_width, lambda: options.vector_width)
    return GemvConfig(vw, pick(c.tile_columns, lambda: tile_columns(n, vw)),
                      pick(c.k_block, lambda: K_BLOCK[vw]),
                      pick(c.panels, lambda: GEMV_PANELS[vw]))


def dense_pack_geometry(n: int, k: int, config: GemmConfig | GemvConfig
                        ) -> tuple[int, int, int]:
    """(panels, Kp, NR): the shape of the packed B the micro-kernels read for w[N, K].

    Bp[jt, kk, v] = w[jt*NR + v, kk] (zero where jt*NR + v >= N or kk >= K); Kp is K rounded
    up to the K-block split gemm_stmt uses (nb equal blocks of kc)."""
    nb, kc = k_blocks(k, config.k_block)
    nr = config.tile_columns
    return ceil_div(n, nr), nb * kc, nr
