"""Micro-kernel descriptors: one frozen record per micro-kernel kind, naming one specialised
micro-kernel (its tile, window, strides...) completely.

A schedule makes a descriptor and calls it (codegen.schedules.common.ukr_call); the call's
TIR name is the descriptor's `symbol`, a function of its fields alone and one-to-one with
them (every field is in it, in the same place), so the symbol names the micro-kernel's code
in the compile caches. Creating a descriptor interns it under its symbol (`by_symbol`: the
emitter and the micro-kernel compiler look the record up instead of parsing the name, and two
descriptors claiming one symbol are refused). `args` declares the micro-kernel's argument
types, which every call is checked against (a TIR Load argument is passed as its address,
PTR; any other as an i64 value, I64).

The definitions are in codegen.llvm.microkernels (DEFINITIONS: kind -> the function emitting
its IR from the descriptor): a micro-kernel's code is a function of its descriptor alone
(and of the target CPU it is compiled for, codegen.microkernel_objects).
"""
from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, fields
from typing import ClassVar

__all__ = ["PREFIX", "PTR", "I64", "Microkernel", "Gemm", "GemmRows", "Gemv", "Conv",
           "ConvBlocked", "ConvRows", "Int8Dot", "DOT_NAMES", "Interleave4", "by_symbol",
           "KINDS"]

PREFIX = "relayjit.ukr."
PTR, I64 = "ptr", "i64"  # argument types: an address (a TIR Load), an integer value

_INTERNED: dict[str, Microkernel] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Microkernel:
    """One specialised micro-kernel. Subclasses declare `kind`, their fields, `name()` (the
    symbol without PREFIX, every field in it) and `args` (argument types, in call order)."""

    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("bool", bool):
                if not isinstance(value, bool):
                    raise TypeError(f"{type(self).__name__}.{f.name} must be a bool, got "
                                    f"{value!r}")
            else:
                try:
                    value = operator.index(value)  # numpy integers too
                except TypeError:
                    value = -1
                if isinstance(getattr(self, f.name), bool) or value < 0:
                    raise TypeError(f"{type(self).__name__}.{f.name} must be an int >= 0, "
                                    f"got {getattr(self, f.name)!r}")
                object.__setattr__(self, f.name, value)
        self.check()
        symbol = self.symbol
        with _lock:
            known = _INTERNED.setdefault(symbol, self)
        if known != self:
            raise ValueError(f"micro-kernel symbol {symbol} names both {known} and {self}")

    def check(self) -> None:
        """Refuse field combinations the definition does not implement."""

    def name(self) -> str:
        raise NotImplementedError

    @property
    def symbol(self) -> str:
        """The micro-kernel's function name: PREFIX + name()."""
        return PREFIX + self.name()

    @property
    def args(self) -> tuple[str, ...]:
        raise NotImplementedError


def _shape(n: int, vw: int) -> str:
    """`<n>` for two vectors of vw floats (n = 2 vw), else `<n>x<vw>`."""
    return f"{n}" if n == 2 * vw else f"{n}x{vw}"


@dataclass(frozen=True)
class Gemm(Microkernel):
    """C[mr, nr] (+)= A_packed[kc][mr] * B_packed[kc][nr], rows of nr/vw vectors of vw floats;
    args (kc, a, b, c, ldc, accumulate, b_next): b_next, the panel read next, is prefetched
    into L2 at the pace b is read."""

    kind: ClassVar[str] = "gemm"
    mr: int
    nr: int
    vw: int

    def check(self) -> None:
        if self.vw not in (4, 8, 16) or self.nr % self.vw or not self.mr:
            raise ValueError(f"{self}: nr must be whole vectors of 4, 8 or 16 floats")

    def name(self) -> str:
        return f"gemm_{self.mr}x{_shape(self.nr, self.vw)}"

    @property
    def args(self) -> tuple[str, ...]:
        return (I64, PTR, PTR, PTR, I64, I64, PTR)


@dataclass(frozen=True)
class GemmRows(Gemm):
    """Gemm reading A in place, row i at a + i*lda; args (kc, a, lda, b, c, ldc, accumulate,
    b_next) and, with prefetch_rows, a_next: the row tile read next (rows lda apart),
    prefetched at the pace the kernel reads its own."""

    kind: ClassVar[str] = "gemm_rows"
    prefetch_rows: bool = False

    def name(self) -> str:
        return super().name() + "_rows" + ("_pf" if self.prefetch_rows else "")

    @property
    def args(self) -> tuple[str, ...]:
        return (I64, PTR, I64, PTR, PTR, I64, I64, PTR) + ((PTR,) if self.prefetch_rows else ())


@dataclass(frozen=True)
class Gemv(Microkernel):
    """c[p*nr : (p+1)*nr] = sum_k x[k] * B_p[k][nr] for `panels` consecutive panels of nr
    floats (nr/vw vectors of vw), panel_stride floats apart; args (k, x, b, c, panel_stride)."""

    kind: ClassVar[str] = "gemv"
    nr: int
    vw: int
    panels: int = 1

    def check(self) -> None:
        if self.vw not in (4, 8, 16) or self.nr % self.vw or self.panels < 1:
            raise ValueError(f"{self}: nr must be whole vectors of 4, 8 or 16 floats, "
                             f"panels >= 1")

    def name(self) -> str:
        return f"gemv_{_shape(self.nr, self.vw)}" + (f"_{self.panels}" if self.panels > 1
                                                    else "")

    @property
    def args(self) -> tuple[str, ...]:
        return (I64, PTR, PTR, PTR, I64)


@dataclass(frozen=True)
class Conv(Microkernel):
    """Direct convolution: kb output channels (kb/vw vectors of vw: two, or three) x p pixels,
    T[p][v] = sum_{c,r,s} x_p[c*chanstep + r*dh*rowstep + s*dw] * W[c][r][s][v] over an NCHW
    (or pixel-major) input; the channel count is an argument. channel_major: the tile is
    stored T[v][p] (pixel rows of vw); prefetch_lines: 64-byte lines of w_next prefetched a
    channel; row_stride > 0: the p pixels are consecutive outputs of one row, row_stride
    apart in the input, and only x_0 is passed. Args (w, t, acc, c, w_next, x_0 .. x_{p-1})."""

    kind: ClassVar[str] = "conv"
    kb: int
    vw: int
    p: int
    r: int
    s: int
    rowstep: int
    chanstep: int
    dh: int
    dw: int
    channel_major: bool
    prefetch_lines: int = 0
    row_stride: int = 0

    def check(self) -> None:
        if self.vw not in (4, 8, 16) or self.kb not in (2 * self.vw, 3 * self.vw) \
                or not (self.p and self.r and self.s):
            raise ValueError(f"{self}: kb must be two or three vectors of 4, 8 or 16 floats")

    def name(self) -> str:
        return (f"conv_{_shape(self.kb, self.vw)}_{self.p}_{self.r}_{self.s}_{self.rowstep}_"
                f"{self.chanstep}_{self.dh}_{self.dw}_{int(self.channel_major)}_"
                f"{self.prefetch_lines}" + (f"_{self.row_stride}" if self.row_stride else ""))

    @property
    def args(self) -> tuple[str, ...]:
        return (PTR, PTR, I64, I64, PTR) + (PTR,) * (1 if self.row_stride else self.p)


@dataclass(frozen=True)
class ConvBlocked(Microkernel):
    """Conv over a channel-blocked input (NCHW[chan_block]c: chan_block channels one float
    apart, blocks blockstep floats apart; rowstep, dw and row_stride in floats), its tile
    pixel-major. Args as Conv's; the channel count a multiple of chan_block."""

    kind: ClassVar[str] = "convb"
    kb: int
    vw: int
    p: int
    r: int
    s: int
    rowstep: int
    blockstep: int
    dh: int
    dw: int
    chan_block: int
    prefetch_lines: int
    row_stride: int

    def check(self) -> None:
        if self.vw not in (4, 8, 16) or self.kb not in (2 * self.vw, 3 * self.vw) \
                or not (self.p and self.r and self.s and self.chan_block):
            raise ValueError(f"{self}: kb must be two or three vectors of 4, 8 or 16 floats, "
                             f"chan_block > 0")

    def name(self) -> str:
        return (f"convb_{self.kb}x{self.vw}_{self.p}_{self.r}_{self.s}_{self.rowstep}_"
                f"{self.blockstep}_{self.dh}_{self.dw}_{self.chan_block}_"
                f"{self.prefetch_lines}_{self.row_stride}")

    @property
    def args(self) -> tuple[str, ...]:
        return (PTR, PTR, I64, I64, PTR) + (PTR,) * (1 if self.row_stride else self.p)


@dataclass(frozen=True)
class ConvRows(Microkernel):
    """kc output channels x nv vectors of vw consecutive output pixels of one row (stacked:
    vector j the same pixels of output row j) over the phase planes X[c][sh][sw][hq][wq] of
    the padded input, c input channels, weights w(k, c, r, s) at k*kstride +
    ((c*r + r)*s + s)*tapstride broadcast. Args (w, t, x)."""

    kind: ClassVar[str] = "convrows"
    kc: int
    nv: int
    vw: int
    c: int
    r: int
    s: int
    kstride: int
    tapstride: int
    sh: int
    sw: int
    dh: int
    dw: int
    hq: int
    wq: int
    stacked: bool = False

    def check(self) -> None:
        if self.vw not in (4, 8, 16) or not (self.kc and self.nv and self.sh and self.sw):
            raise ValueError(f"{self}: vw must be 4, 8 or 16, kc, nv and strides > 0")

    def name(self) -> str:
        return (f"convrows_{self.kc}_{self.nv}_{self.vw}_{self.c}_{self.r}_{self.s}_"
                f"{self.kstride}_{self.tapstride}_{self.sh}_{self.sw}_{self.dh}_{self.dw}_"
                f"{self.hq}_{self.wq}" + ("_1" if self.stacked else ""))

    @property
    def args(self) -> tuple[str, ...]:
        return (PTR, PTR, PTR)


DOT_NAMES = ("widen", "vpmaddwd", "vpdpbusd")  # Int8Dot.dot: the instruction, by index


@dataclass(frozen=True)
class Int8Dot(Microkernel):
    """u8 x s8 -> s32: p rows (each its own pointer) x nv vectors of `lanes` int32 columns,
    T[j][col] (+)= sum over groups of four input channels and the window's taps of the four
    byte products x_j[g*chanstep + rr*dh*rowstep + ss*dw + q] * W[g][tap][col][q] (offsets in
    bytes); `dot` (DOT_NAMES): vpdpbusd (AVX512-VNNI with 16 lanes, AVX512-VNNI/VL or
    AVX-VNNI with 8), vpmaddwd on 16-bit widened operands (AVX512BW, AVX2), or plain widening
    multiplies (any target). unroll: groups a loop trip; channel_major: the tile stored
    T[col][tile_stride] (p <= lanes; tile_stride 0: lanes), `lanes` values a row (half of
    them when p <= lanes / 2) of which the first p are the tile's (a schedule lays
    consecutive tiles out along the rows, each overwriting the previous one's spare lanes);
    prefetch_lines: 64-byte lines of w_next prefetched (into L2) a loop trip. A GEMM is the
    1x1 case: rows of A, chanstep 4. Args (w, t, acc, groups, w_next, x_0 .. x_{p-1})."""

    kind: ClassVar[str] = "dot8"
    p: int
    nv: int
    lanes: int
    r: int
    s: int
    rowstep: int
    chanstep: int
    dh: int
    dw: int
    dot: int
    channel_major: bool
    unroll: int = 1
    prefetch_lines: int = 0
    tile_stride: int = 0

    def check(self) -> None:
        if self.lanes not in (4, 8, 16) or not (self.p and self.nv and self.r and self.s
                                                and self.unroll) \
                or (self.channel_major and self.p > self.lanes) \
                or (self.tile_stride and self.tile_stride < self.lanes) \
                or self.dot >= len(DOT_NAMES):
            raise ValueError(f"{self}: lanes must be 4, 8 or 16, p, nv, r, s and unroll > 0, "
                             f"a channel-major tile at most `lanes` rows, and its stride at "
                             f"least `lanes`")

    def name(self) -> str:
        return (f"dot8_{self.p}x{self.nv}x{self.lanes}_{self.r}_{self.s}_{self.rowstep}_"
                f"{self.chanstep}_{self.dh}_{self.dw}_{'wmv'[self.dot]}"
                f"{int(self.channel_major)}_{self.unroll}_{self.prefetch_lines}_"
                f"{self.tile_stride}")

    @property
    def args(self) -> tuple[str, ...]:
        return (PTR, PTR, I64, I64, PTR) + (PTR,) * self.p


@dataclass(frozen=True)
class Interleave4(Microkernel):
    """out[4w + q] = in_q[w] for w < width, q < 4: four byte rows (four channels of one image
    row) interleaved into one row of four-byte pixels, as the int8 conv's input is laid out.
    Args (out, in_0, in_1, in_2, in_3)."""

    kind: ClassVar[str] = "interleave4"
    width: int

    def check(self) -> None:
        if not self.width:
            raise ValueError(f"{self}: width must be > 0")

    def name(self) -> str:
        return f"interleave4_{self.width}"

    @property
    def args(self) -> tuple[str, ...]:
        return (PTR,) * 5


KINDS = {cls.kind: cls for cls in (Gemm, GemmRows, Gemv, Conv, ConvBlocked, ConvRows,
                                   Int8Dot, Interleave4)}


def by_symbol(symbol: str) -> Microkernel:
    """The descriptor a call's symbol names (KeyError when no descriptor made it)."""
    with _lock:
        return _INTERNED[symbol]
