"""Sliding windows over one channel plane at a time (NCHW): pooling and depthwise convolution.

Per (image, channel), the task of one parallel iteration, the channel is first copied into
cache-resident scratch with its padding filled in (zeros, or -inf for a max), split into its
stride phases, so that every tap of every window is a contiguous run (no bounds test per tap:
the generic pooling rule tests every tap, and an Inception 3x3 average pool with padding ran 9x
slower than onnxruntime's; no short strided rows: a 14-wide stride-2 row was mostly scalar). The
windows then reduce straight into the output rows, four rows per loop so that their overlapping
windows load each input row once, each row in whole vectors and one remainder vector. A plane
that needs no padding skips the copy and reads its taps in place when its columns are not
strided; strided columns go through the phases when the plane is small (phases_max_bytes),
else each block of output rows first copies the column phases of just the input rows it reads
into a small strip. A depthwise window's sum of products goes
through accumulators, which codegen contracts into FMAs.

A max is reduced as a balanced tree of plain maxima (vmaxps) beside a tree of NaN tests, so a
window's taps are not one serial chain of compare-and-select steps; a NaN anywhere in the
window still gives NaN, as numpy.maximum does. Each window row is reduced first, so the rows
that neighbouring output rows share are reduced once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import te
from ..options import CodegenOptions
from ..tir.dtype import min_value
from ..tir.expr import BinaryOp, Expr, Load
from ..tir.ops import const, floordiv, gt, logical_or, ne, select
from ..tir.stmt import Allocate, Buffer, For, Stmt, Store, seq
from .common import Epilogue, imm, mark_epilogue, tree_reduce, var
from .config import ScheduleConfig, pick

# finish(window value, output row, output column) -> the pool's result (average divisor,
# the value of a window that covers only padding)
Finish = Callable[[Expr, Expr, Expr], Expr]

# Rows are computed ROW_BLOCK output rows per loop: their windows overlap in kh - sh input rows,
# which LLVM then loads once (a 3x3 stride-1 block of 4 rows: 18 row loads, not 36).
# MobileNet's 32@112x112 depthwise 0.20 -> 0.17-0.18 ms, 144@56x56 0.20 -> 0.18-0.19.
ROW_BLOCK = 4
# Floats in the vectors LLVM gives these loops: 256 bits, AVX-512 hosts included. A row goes in
# whole vectors, then the rest in a loop of its own, which LLVM turns into one masked vector
# with AVX-512 (its own remainder loop is scalar): depthwise 192@28x28 0.079 -> 0.053-0.059 ms,
# 272@14x14 0.033 -> 0.022, 384@14x14 0.044-0.049 -> 0.028.
ROW_VECTOR = 8
# _phase_rows copies the columns all phases share in whole vectors (phase_rows_rounded)
# An unpadded window whose columns are strided still goes through the phase split when the
# plane and its phases take at most this many bytes: LLVM vectorises the in-place taps of a
# strided row as gathers (vgatherqps on AVX-512), the phases' taps are plain vector loads (3x3
# stride-2 max pool, one thread: 128@55x55 0.105 -> 0.063 ms, 64@75x75 0.083 -> 0.059,
# 32@91x91 (67 KB) 0.054 -> 0.045). A larger plane's copy and phases outgrow the cache close
# to the core (64@101x101 (82 KB) 0.150 in place, 0.169 through phases; SqueezeNet's 64@111x111
# 0.178 and 0.194): each block of ROW_BLOCK output rows copies the column phases of its input
# rows into a strip instead (0.146 and 0.165-0.169 ms). Smaller planes prefer the whole phases,
# which copy no row twice (256@27x27: 0.036 ms, 0.041 through strips).
PHASES_MAX_BYTES = 72 * 1024
# Output rows per strip: more rows copy fewer input rows twice (64@111x111: 4 rows 0.148 ms,
# 6 rows 0.141, 8 rows 0.142)
STRIP_ROW_BLOCK = 6


@dataclass(frozen=True)
class WindowConfig(ScheduleConfig):
    """The NCHW window schedule's row blocks, vector loops and plane copies (the module
    constants above are the defaults)."""

    row_block: int | None = None          # output rows a loop
    row_vector: int | None = None         # floats a vector of the row loops
    phase_rows_rounded: bool | None = None  # phase copies in whole vectors where safe
    phases_max_bytes: int | None = None   # strided unpadded planes split into phases up to this
    strip_row_block: int | None = None    # output rows a strip (larger planes)


def resolve_window(given: WindowConfig | None = None) -> WindowConfig:
    """Given fields, the rest the module's defaults."""
    c = given or WindowConfig()
    return WindowConfig(pick(c.row_block, lambda: ROW_BLOCK),
                        pick(c.row_vector, lambda: ROW_VECTOR),
                        pick(c.phase_rows_rounded, lambda: True),
                        pick(c.phases_max_bytes, lambda: PHASES_MAX_BYTES),
                        pick(c.strip_row_block, lambda: STRIP_ROW_BLOCK))


def max_with_nan(taps: list[Expr], dtype: str, row: int) -> Expr:
    """max of taps (window rows of `row` taps each), NaN when any float tap is NaN. Each window
    row is reduced on its own first: the same loads reduced the same way, which LLVM's GVN then
    computes once for the output rows that share an input row (3x3 stride-2 max pools
    0.181 -> 0.175 ms at 64@111x111, 0.105 -> 0.101 at 128@55x55)."""
    rows = [taps[i:i + row] for i in range(0, len(taps), row)]

    def larger(a: Expr, b: Expr) -> Expr:
        return select(gt(a, b), a, b)
    top = tree_reduce([tree_reduce(r, larger) for r in rows], larger)
    if not dtype.startswith("float"):
        return top
    nan = tree_reduce([tree_reduce([ne(t, t) for t in r], logical_or) for r in rows],
                      logical_or)
    return select(nan, const(float("nan"), dtype), top)


def span(first: int, step: int, lo: int, hi: int, count: int) -> tuple[int, int]:
    """[a, b): the k in [0, count) with lo <= first + k*step < hi."""
    a = min(count, max(0, -(-(lo - first) // step)))
    b = min(count, max(a, -(-(hi - first) // step)))
    return a, b


def _vector_loop(name: str, extent: int, body: Callable[[Expr], Stmt], vector: int
                 ) -> Stmt | None:
    """body(j) for j in [0, extent): whole `vector`-float vectors, then the rest in a loop of
    its own, which LLVM makes one masked vector with AVX-512 (its own remainder is scalar)."""
    main = extent - extent % vector
    j, rest = var(name), var(f"{name}_rest")
    return seq(For(j, main, body(j), "vectorized") if main else None,
               For(rest, extent - main, body(rest + main), "vectorized") if extent > main
               else None) if extent > 0 else None


def _phase_rows(xb: Buffer, phases: Buffer, ni, ci, py: int, g: dict, fill: Expr,
                name: str, config: WindowConfig) -> Stmt:
    """Row phase py of channel ci, all its column phases px together:
    P[py][px][i*wq + j] = x[ci, i*sh + py - pt, j*sw + px - pl], fill outside x.

    The rows and columns inside x are static ranges. Over the columns every phase has inside
    x, one loop stores all sw phases from the same stretch of the input row (an interleaved
    load group: one pass over the row, where a loop per phase re-read it sw times in short
    strided loops: MobileNet's 144@56x56 stride-2 depthwise), in whole vectors and a remainder
    (192@28x28 stride 2: 0.046 -> 0.033 ms), or rounded up to whole vectors on every row but
    the last (phase_rows_rounded); the phases' own edge columns and the padding are short
    copies and plain fills."""
    wq, size, sw, w = g["wq"], g["size"], g["sw"], g["w"]
    i0, i1 = span(py - g["pt"], g["sh"], 0, g["h"], g["hq"])
    cols = [span(px - g["pl"], sw, 0, w, wq) for px in range(sw)]
    c0 = max(a for a, _ in cols)
    c1 = max(c0, min(b for _, b in cols))  # the columns inside x in every phase

    def at(px: int, start, v) -> tuple:
        return (imm(py), imm(px), start + v)

    def fills(px: int, start, extent: int, tag: str) -> Stmt | None:
        v = var(f"{name}_{px}{tag}")
        return For(v, extent, Store(phases, at(px, start, v), fill), "vectorized") \
            if extent > 0 else None

    def row_copy(ii: Expr, common: int, tag: str) -> Stmt:
        """Phase row i0 + ii: `common` columns from c0 on in one loop for all phases, then
        each phase's own columns and fills, which overwrite whatever lies past c1."""
        i = ii + i0
        row_in = i * g["sh"] + py - g["pt"]

        def copies(pxs, j0: int, j1: int, part: str) -> Stmt | None:
            def body(j: Expr) -> Stmt:
                return seq(*(Store(phases, at(px, i * wq + j0, j), Load(
                    xb, (ni, ci, row_in, (j0 + j) * sw + px - g["pl"]), xb.dtype))
                    for px in pxs))
            return _vector_loop(f"{name}_{tag}{part}", j1 - j0, body, config.row_vector)

        row = [copies(range(sw), c0, c0 + common, "c")]
        for px, (j0, j1) in enumerate(cols):
            row += [fills(px, i * wq, j0, f"{tag}l"),
                    copies([px], j0, min(c0, j1), f"{px}a"),
                    copies([px], max(c1, j0), j1, f"{px}b"),
                    fills(px, i * wq + j1, wq - j1, f"{tag}r")]
        return seq(*row)

    # The common columns in whole vectors, no remainder loop (an interleaved group's remainder
    # became gathers or scalar copies): the extra columns read the next input row and land
    # where this row's own copies and fills, or the next row, write after them; not on the
    # last row, whose extra columns would pass the plane or its phase. Only rows of at least
    # a vector: shorter ones lost (one thread: 3x3/2 max pool 256@27x27 0.038 -> 0.033 ms;
    # depthwise 3x3/2 192@28x28 0.032 -> 0.027, 144@56x56 0.090 -> 0.085; 576@14x14 0.027
    # -> 0.029 when rounded, so left exact)
    vector = config.row_vector
    rounded = -(-(c1 - c0) // vector) * vector
    safe = config.phase_rows_rounded and rounded > c1 - c0 >= vector \
        and c0 + rounded <= 2 * wq \
        and (c0 + rounded) * sw - 1 - g["pl"] < 2 * w and i1 - i0 > 1
    ii = var(f"{name}_i")
    if safe:
        body = [For(ii, i1 - i0 - 1, row_copy(ii, rounded, "")),
                row_copy(imm(i1 - i0 - 1), c1 - c0, "e")]
    else:
        body = [For(ii, i1 - i0, row_copy(ii, c1 - c0, "")) if i1 > i0 else None]
    for px in range(sw):
        body = [fills(px, imm(0), i0 * wq, "t")] + body + \
            [fills(px, imm(i1 * wq), size - i1 * wq, "b")]
    return seq(*body)


def _column_phases(xb: Buffer, strip: Buffer, ni, ci, row0: Expr, rows: int, width: int,
                   name: str, config: WindowConfig) -> Stmt:
    """strip[px][i][j] = x[ni, ci, row0 + i, j*sw + px] for i < rows and the strip's wq
    columns of each phase (an unpadded plane, so all inside x): the columns every phase has
    in one loop storing all sw phases (an interleaved load group, plain vector loads and
    shuffles), then each phase's own last columns; the shared columns rounded up to whole
    vectors on every row but the last, as _phase_rows does (phase_rows_rounded)."""
    sw, _, wq = strip.shape
    count = [min(wq, -(-(width - px) // sw)) for px in range(sw)]
    common = min(count)

    def row(ii: Expr, shared: int, tag: str) -> Stmt:
        def copies(pxs, j0: int, j1: int, part: str) -> Stmt | None:
            def body(j: Expr) -> Stmt:
                return seq(*(Store(strip, (imm(px), ii, j + j0), Load(
                    xb, (ni, ci, row0 + ii, (j + j0) * sw + px), xb.dtype)) for px in pxs))
            return _vector_loop(f"{name}_{tag}{part}", j1 - j0, body, config.row_vector)
        return seq(copies(range(sw), 0, shared, "c"),
                   *(copies([px], common, count[px], f"{px}e") for px in range(sw)))

    vector = config.row_vector
    rounded = -(-common // vector) * vector
    ii = var(f"{name}_i")
    if config.phase_rows_rounded and rounded > common >= vector and rounded <= 2 * wq \
            and rounded * sw - 1 < 2 * width and rows > 1:
        return seq(For(ii, rows - 1, row(ii, rounded, "")), row(imm(rows - 1), common, "l"))
    return For(ii, rows, row(ii, common, ""))


def _products(value: Expr) -> list[tuple[Expr, Expr]] | None:
    """[(a0, b0), (a1, b1), ...] when value is a0*b0 + a1*b1 + ... (a chain of adds of float
    products, as a depthwise window's weighted sum is), else None."""
    terms = []
    while type(value) is BinaryOp and value.kind == "add":
        terms.append(value.b)
        value = value.a
    terms.append(value)
    if len(terms) < 2 or not value.dtype.startswith("float") or any(
            type(t) is not BinaryOp or t.kind != "mul" for t in terms):
        return None
    return [(t.a, t.b) for t in reversed(terms)]


def store_sum(dest: Buffer, index: tuple, value: Expr, then: Callable[[Expr], Expr],
               name: str) -> Stmt:
    """Store(dest, index, then(value)); a sum of products goes through one-element
    accumulators, whose updates codegen may contract and reassociate: each product and add
    become one FMA (the plain expression is a chain of separate multiplies and adds, twice the
    floating-point instructions: depthwise 32@112x112 0.17-0.18 -> 0.15-0.16 ms, 192@28x28
    0.096 -> 0.088)."""
    pairs = _products(value)
    if pairs is None:
        return Store(dest, index, then(value))
    dtype = value.dtype
    prod, total = Buffer(f"{name}_prod", (1,), dtype), Buffer(f"{name}_sum", (1,), dtype)
    at = (imm(0),)
    steps = [Store(total, at, pairs[0][0] * pairs[0][1])]
    for a, b in pairs[1:]:
        steps += [Store(prod, at, a), Store(prod, at, Load(prod, at, dtype) * b),
                  Store(total, at, Load(total, at, dtype) + Load(prod, at, dtype))]
    steps.append(Store(dest, index, then(Load(total, at, dtype))))
    return Allocate(prod, Allocate(total, seq(*steps)))


# reduce(taps, k): a window's value from its tap loads (r-major) for output channel k
Reduce = Callable[[list[Expr], Expr], Expr]


def window_stmt(xb: Buffer, out: Buffer, geo: dict, fill: Expr, reduce_taps: Reduce,
                finish: Callable[[Expr, Expr, Expr, Expr], Expr], epilogue: Epilogue | None,
                name: str, options: CodegenOptions, config: WindowConfig,
                channel_of=lambda k: k, out_row0: Expr | int = 0) -> Stmt:
    """out[n, k, out_row0 + oi, oj] = finish(reduce(window of x[n, channel_of(k)] at (oi, oj)),
    k, oi, oj) through the epilogue; geo holds n, k (output channels), h, w, kh, kw, sh, sw, dh,
    dw, pt, pl, oh, ow. out_row0 places the rows in a taller output (a strip of it: conv_pool).

    Per (image, output channel), the task of one parallel iteration, the padded input plane
    is split into its stride phases, P[py][px][i*wq + j] = xpad[i*sh + py][j*sw + px], so that
    every tap is a contiguous run of P, and the windows reduce straight into the output rows.
    A plane that needs no padding is read in place."""
    kh, kw, sh, sw, dh, dw = (geo[t] for t in ("kh", "kw", "sh", "sw", "dh", "dw"))
    oh, ow = geo["oh"], geo["ow"]
    qy, qx = (kh - 1) * dh // sh, (kw - 1) * dw // sw  # the farthest tap, in phase rows/columns
    hq, wq = oh + qy, ow + qx
    g = dict(h=geo["h"], w=geo["w"], pt=geo["pt"], pl=geo["pl"], sh=sh, sw=sw, hq=hq, wq=wq,
             size=hq * wq)
    ni, ki = var(f"{name}_n"), var(f"{name}_k")
    work = geo["n"] * geo["k"] * oh * ow * kh * kw
    threads = options.parallel.threads(work, 4 * geo["n"] * geo["k"] * (
        oh * ow + geo["h"] * geo["w"]))
    kind = "parallel" if threads > 1 else "serial"
    padded = (oh - 1) * sh + (kh - 1) * dh >= geo["h"] or geo["pt"] or geo["pl"] \
        or (ow - 1) * sw + (kw - 1) * dw >= geo["w"]

    def store(value: Expr, oi: Expr, oj: Expr) -> Stmt:
        """out[n, k, oi, oj] = epilogue(finish(value))."""
        row = oi if isinstance(out_row0, int) and out_row0 == 0 else oi + out_row0
        idx = (ni, ki, row, oj)

        def then(v: Expr) -> Expr:
            v = finish(v, ki, oi, oj)
            return epilogue(v, idx) if epilogue is not None else v
        return store_sum(out, idx, value, then, f"{name}_acc")

    def along_row(tag: str, body: Callable[[Expr], Stmt]) -> Stmt | None:
        return _vector_loop(f"{name}_w{tag}", ow, body, config.row_vector)

    def output_rows(value_at: Callable[[Expr, Expr, int], Expr],
                    prepare: Callable[[Expr, int], Stmt] | None = None,
                    block: int = config.row_block) -> Stmt:
        """The output plane of channel ki, `block` rows per loop, then the rows left over.
        value_at(output row, column, the row's place in its block); prepare(first output
        row, rows), when given, runs before each block and before the rows left over."""
        ob = var(f"{name}_h")
        full = oh // block

        def before(first: Expr, count: int) -> Stmt | None:
            return prepare(first, count) if prepare is not None else None
        rows = [For(ob, full, seq(before(ob * block, block), along_row(
            "", lambda oj: seq(*(store(value_at(ob * block + b, oj, b), ob * block + b, oj)
                                 for b in range(block)))))) if full else None]
        if oh > full * block:
            rows.append(before(imm(full * block), oh - full * block))
        for b in range(full * block, oh):
            rows.append(along_row(str(b), lambda oj: store(
                value_at(imm(b), oj, b - full * block), imm(b), oj)))
        return seq(*rows)

    plane_bytes = (geo["h"] * geo["w"] + sh * sw * hq * wq) * np.dtype(xb.dtype).itemsize
    if not padded and sw == 1:
        # the taps straight from the input, as plain vector loads; the phase copy would be one
        # more pass
        cin = channel_of(ki)

        def in_place(oi: Expr, oj: Expr, _b: int) -> Expr:
            return reduce_taps([Load(xb, (ni, cin, oi * sh + r * dh, oj * sw + s * dw), xb.dtype)
                                for r in range(kh) for s in range(kw)], ki)
        return For(ni, geo["n"], For(ki, geo["k"], output_rows(in_place), kind, threads))
    if not padded and plane_bytes > config.phases_max_bytes:
        # the column phases of each block's input rows only, in a strip that stays in cache
        span = (config.strip_row_block - 1) * sh + (kh - 1) * dh + 1  # input rows a block reads
        strip = Buffer(f"{name}_strip", (sw, span, wq), xb.dtype)

        def fill_strip(first: Expr, count: int) -> Stmt:
            return _column_phases(xb, strip, ni, channel_of(ki), first * sh,
                                  (count - 1) * sh + (kh - 1) * dh + 1, geo["w"], f"{name}_s",
                                  config)

        def from_strip(_oi: Expr, oj: Expr, b: int) -> Expr:
            return reduce_taps([Load(strip, (imm(s * dw % sw), imm(b * sh + r * dh),
                                             oj + s * dw // sw), xb.dtype)
                                for r in range(kh) for s in range(kw)], ki)
        plane = Allocate(strip, output_rows(from_strip, fill_strip, config.strip_row_block))
        return For(ni, geo["n"], For(ki, geo["k"], plane, kind, threads))

    phases = Buffer(f"{name}_phases", (sh, sw, hq * wq), xb.dtype)
    split = seq(*(_phase_rows(xb, phases, ni, channel_of(ki), py, g, fill, f"{name}_{py}",
                              config)
                  for py in range(sh)))

    def from_phases(oi: Expr, oj: Expr, _b: int) -> Expr:
        q = oi * wq + oj
        return reduce_taps([Load(phases, (imm(r * dh % sh), imm(s * dw % sw),
                                          q + (r * dh // sh * wq + s * dw // sw)), xb.dtype)
                            for r in range(kh) for s in range(kw)], ki)
    plane = Allocate(phases, seq(split, output_rows(from_phases)))
    return For(ni, geo["n"], For(ki, geo["k"], plane, kind, threads))


def pool2d_nchw(x: te.Tensor, kind: str, pool_size, strides, dilation, padding, out_hw,
                finish: Finish, name: str, *, options: CodegenOptions,
                config: WindowConfig | None = None) -> te.Tensor:
    """max or avg pooling of an NCHW tensor (float; integer for max) through window_stmt;
    padding is (top, left, bottom, right); `finish` turns the window's max or sum into the
    result at (row, column)."""
    config = resolve_window(config)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = pool_size, strides, dilation
    geo = dict(n=n, k=c, h=h, w=w, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=padding[0],
               pl=padding[1], oh=out_hw[0], ow=out_hw[1])
    dtype = x.dtype
    lowest = float("-inf") if dtype.startswith("float") else min_value(dtype)
    fill = const(lowest if kind == "max" else 0.0, dtype)

    def reduce_taps(taps, _k):
        if kind == "max":
            return max_with_nan(taps, dtype, kw)
        return tree_reduce(taps, lambda a, b: a + b)

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        return window_stmt(ins[0], outs[0], geo, fill, reduce_taps,
                           lambda acc, _k, oi, oj: finish(acc, oi, oj), epilogue, name,
                           options, config)

    return te.extern((n, c, *out_hw), [x], mark_epilogue(fcompute), dtype=dtype, name=name)


def depthwise_conv2d_nchw(x: te.Tensor, w: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0),
                          dilation=(1, 1), groups: int = 1, name: str = "T_conv2d", *,
                          options: CodegenOptions, config: WindowConfig | None = None
                          ) -> te.Tensor:
    """An NCHW conv2d with one input channel a group (Cg == 1; OIHW weight [K, 1, R, S]):
    out[n, k] = sum_rs xpad[k // Kg] * w[k, 0] per output channel plane, through window_stmt
    (stride phases, flattened rows: a 14x14 stride-2 MobileNet layer was a short loop of
    strided loads); padding is (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    if cg != 1 or k % groups or c != groups:
        raise ValueError(f"depthwise_conv2d_nchw: data {x.shape}, weight {w.shape}, groups "
                         f"{groups}; expected one input channel a group")
    config = resolve_window(config)
    (sh, sw), (dh, dw) = strides, dilation
    oh = (h + padding[0] + padding[2] - dh * (r - 1) - 1) // sh + 1
    ow = (wd + padding[1] + padding[3] - dw * (s - 1) - 1) // sw + 1
    geo = dict(n=n, k=k, h=h, w=wd, kh=r, kw=s, sh=sh, sw=sw, dh=dh, dw=dw, pt=padding[0],
               pl=padding[1], oh=oh, ow=ow)
    kg = k // groups

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        wb = ins[1]

        def weighted_sum(taps, ki):
            terms = [t * Load(wb, (ki, imm(0), imm(i // s), imm(i % s)), wb.dtype)
                     for i, t in enumerate(taps)]
            acc = terms[0]
            for t in terms[1:]:
                acc = acc + t
            return acc

        return window_stmt(ins[0], outs[0], geo, const(0.0, x.dtype), weighted_sum,
                           lambda acc, *_: acc, epilogue, name, options, config,
                           channel_of=lambda ki: floordiv(ki, kg) if kg != 1 else ki)

    return te.extern((n, k, oh, ow), [x, w], mark_epilogue(fcompute), name=name,
                     kernel_attrs={"prefer_vector_width": 32 * options.vector_width})
