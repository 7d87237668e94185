"""Sliding windows over channel-blocked planes (TVM's NCHW[x]c): pooling and depthwise conv.

x[N, C/x, H, W, x] -> out[N, C/x, OH, OW, x]. A pixel of a channel block is x floats in a row,
so every tap of a window is one vector load and every output pixel one vector store: no stride
phases, no strided loads, no transpose (the NCHW schedule, window.py, splits each plane into
its stride phases to get contiguous runs).

Padding is never materialised. The output rows and columns whose windows lie wholly inside the
input are the interior, reduced over every tap in loops; the few edge rows and columns are
static and reduce over just the taps that fall inside (a max or a sum over padding adds
nothing; `finish` gets the taps each pixel had, so an average's divisor and the value of a
window over padding alone are constants).

    parallel for (n, channel block, group of interior rows)   (edge rows: first / last group)
      for output row:
        for tile of up to 8 pixels of the interior columns (_row_tile):
          for lane in x (vectorised: one iteration of x-wide vectors):
            the tile's windows, taps unrolled (neighbouring windows share their loads; a
            depthwise conv's R*S weight vectors stay in registers across tiles), one store
            a pixel through the fused epilogue
        the pixels left over; the edge pixels, each with its own taps
      (an edge row: the same, one pixel a step)

A global pool sums (or maxes) a channel block's plane into one vector, global_chunk pixels
per step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import te
from ..options import CodegenOptions
from ..parallel import fused_parallel
from ..tir.expr import Expr, IntImm, Load
from ..tir.ops import const, eq, lt
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import Epilogue, ceil_div, imm, mark_epilogue, tree_reduce, var
from .config import ScheduleConfig, pick
from .window import max_with_nan, span, store_sum

# Tasks a blocked window kernel aims for (over images, channel blocks and groups of rows): at
# least MIN_TASKS where the rows allow, so two threads balance within a task in eight.
TARGET_TASKS = 16
# Pixels a global pool reduces per step of its plane loop (one tree of vector adds or maxes)
GLOBAL_CHUNK = 8

# reduce(tap loads, their (r, s), channel block, lane) -> the window's value (a non-empty list)
Reduce = Callable[[list[Expr], list[tuple[int, int]], Expr, Expr], Expr]
# finish(value or None for a window over padding alone, row taps, column taps, oi, oj) -> the
# result; the taps are the window rows / columns inside the input, oi / oj the output row and
# column when static (edge rows and columns; None in the interior, where every tap is inside)
Finish = Callable[[Expr | None, list[int], list[int], int | None, int | None], Expr]


@dataclass(frozen=True)
class BlockedWindowConfig(ScheduleConfig):
    """The blocked window schedule's pixel tiles and parallel split; global pools' steps."""

    tile_pixels: int | None = None   # output pixels a tile of the interior
    target_tasks: int | None = None  # parallel tasks aimed for (images x blocks x row groups)
    global_chunk: int | None = None  # global pools: pixels reduced a step


def tile_pixels(taps: int, weights: bool, avx512: bool) -> int:
    """Output pixels a tile: accumulators and (for a depthwise conv) the R*S weight vectors
    within the vector registers (32 when the target has AVX-512, whatever the block width,
    else 16), 2 to 8."""
    registers = 32 if avx512 else 16
    free = registers - (taps if weights else 0) - 3
    return max(2, min(8, free))


def resolve_blocked_window(taps: int, weights: bool, options: CodegenOptions,
                           given: BlockedWindowConfig | None = None) -> BlockedWindowConfig:
    """Given fields, the rest by default (a window of `taps` taps; weights: a depthwise
    conv's, held in registers)."""
    c = given or BlockedWindowConfig()
    return BlockedWindowConfig(pick(c.tile_pixels,
                                    lambda: tile_pixels(taps, weights, options.avx512)),
                               pick(c.target_tasks, lambda: TARGET_TASKS),
                               pick(c.global_chunk, lambda: GLOBAL_CHUNK))


def _row_tile(width: int, most: int) -> int:
    """Pixels a tile of a row's `width` interior pixels: from `most` down to two thirds of
    it, the one that leaves the fewest over (depthwise 384@14 3x3: 12 pixels in two tiles of
    6, not 8 + 4 one at a time: 0.026 -> 0.024 ms)."""
    top = min(most, max(width, 1))  # a narrower row is one tile
    return min(range(top, min(top, -(-2 * most // 3)) - 1, -1), key=lambda p: (width % p, -p))


def _interior(first: int, step: int, dilation: int, k: int, size: int, count: int
              ) -> tuple[int, int]:
    """[a, b): the outputs o whose taps first + o*step + t*dilation (t < k) all lie in
    [0, size); (count, count) when none does."""
    a1, b1 = span(first, step, 0, size, count)
    a2, b2 = span(first + (k - 1) * dilation, step, 0, size, count)
    a, b = max(a1, a2), min(b1, b2)
    return (a, b) if b > a else (count, count)


def _taps_inside(o: int, first: int, step: int, dilation: int, k: int, size: int) -> list[int]:
    """The taps t < k of static output o whose input first + o*step + t*dilation is inside."""
    return [t for t in range(k) if 0 <= first + o * step + t * dilation < size]


def blocked_window_stmt(xb: Buffer, out: Buffer, geo: dict, reduce_taps: Reduce,
                        finish: Finish, epilogue: Epilogue | None, name: str,
                        options: CodegenOptions, config: BlockedWindowConfig,
                        unroll_rest: bool) -> Stmt:
    """out[n, cb, oi, oj, :] = finish(reduce(the taps inside the input of the window at (oi,
    oj))) through the epilogue; geo holds n, cb (channel blocks), blk (x), h, w, kh, kw, sh,
    sw, dh, dw, pt, pl, oh, ow.

    The interior of a row goes in tiles of config.tile_pixels, then the pixels left over as one
    tile of their own (unroll_rest: a pool's small planes are mostly that remainder: 3x3/2
    512@13 0.012 -> 0.009 ms) or one pixel a step (a depthwise pixel is R*S FMAs and their
    index arithmetic: its code, once per row kind, is what LLVM spends its time on)."""
    n, cbn, blk = geo["n"], geo["cb"], geo["blk"]
    h, w, kh, kw = geo["h"], geo["w"], geo["kh"], geo["kw"]
    sh, sw, dh, dw, pt, pl = (geo[t] for t in ("sh", "sw", "dh", "dw", "pt", "pl"))
    oh, ow = geo["oh"], geo["ow"]
    ni, ci, gi, lane = (var(f"{name}_{t}") for t in ("n", "cb", "g", "v"))
    all_rows, all_cols = list(range(kh)), list(range(kw))
    ra, rb = _interior(-pt, sh, dh, kh, h, oh)
    ca, cb = _interior(-pl, sw, dw, kw, w, ow)

    def pixel(oi, oj, rows: list[int], cols: list[int]) -> Stmt:
        """The store of output pixel (oi, oj) at `lane` (inside the lane loop)."""
        idx = (ni, ci, oi, oj, lane)
        static = tuple(o.value if type(o) is IntImm else None for o in (oi, oj))

        def then(value: Expr | None) -> Expr:
            v = finish(value, rows, cols, *static)
            return epilogue(v, idx) if epilogue is not None else v
        if not rows or not cols:
            return Store(out, idx, then(None))
        by, bx = oi * sh - pt, oj * sw - pl
        loads = [Load(xb, (ni, ci, by + r * dh, bx + s * dw, lane), xb.dtype)
                 for r in rows for s in cols]
        value = reduce_taps(loads, [(r, s) for r in rows for s in cols], ci, lane)
        return store_sum(out, idx, value, then, f"{name}_acc")

    def lanes(stores: list[Stmt]) -> Stmt:
        return For(lane, blk, seq(*stores), "vectorized")

    def row(oi, rows: list[int], tag: str, most: int) -> Stmt:
        """Output row oi whose windows have the window rows `rows` inside the input, its
        interior in tiles of at most `most` pixels."""
        def edge(cols_range) -> Stmt | None:
            stores = [pixel(oi, imm(j), rows, _taps_inside(j, -pl, sw, dw, kw, w))
                      for j in cols_range]
            return lanes(stores) if stores else None
        t = var(f"{name}_t{tag}")
        tile = _row_tile(cb - ca, most)
        full, rest = divmod(cb - ca, tile)
        tiles = For(t, full, lanes([pixel(oi, t * tile + (ca + p), rows, all_cols)
                                    for p in range(tile)])) if full else None
        if rest and unroll_rest:
            last = lanes([pixel(oi, imm(ca + full * tile + p), rows, all_cols)
                          for p in range(rest)])
        elif rest:  # one pixel a step: one more pixel's code, not `rest` more
            j = var(f"{name}_j{tag}")
            last = For(j, rest, lanes([pixel(oi, j + (ca + full * tile), rows, all_cols)]))
        else:
            last = None
        return seq(edge(range(ca)), tiles, last, edge(range(cb, ow)))

    def edge_rows(rows_range) -> Stmt | None:
        # one pixel a step: the few edge rows cost little time, and their own tiles would
        # double the code of a 3x3 kernel (compile time)
        stmts = [row(imm(i), _taps_inside(i, -pt, sh, dh, kh, h), f"e{i}", 1)
                 for i in rows_range]
        return seq(*stmts) if stmts else None

    nint = rb - ra
    tile = config.tile_pixels
    ng = max(1, min(nint, ceil_div(config.target_tasks, n * cbn)))
    per_group = ceil_div(nint, ng) if nint else 0
    ng = ceil_div(nint, per_group) if nint else 1
    ii = var(f"{name}_i")
    oi = gi * per_group + (ii + ra)
    interior = row(oi, all_rows, "", tile) if nint else None
    if interior is not None and ng * per_group > nint:
        interior = IfThenElse(lt(oi, rb), interior)
    top, bottom = edge_rows(range(ra)), edge_rows(range(rb, oh))
    body = seq(IfThenElse(eq(gi, 0), top) if top is not None else None,
               For(ii, per_group, interior) if interior is not None else None,
               IfThenElse(eq(gi, ng - 1), bottom) if bottom is not None else None)
    threads = options.parallel.threads(n * cbn * oh * ow * blk * kh * kw,
                                       4 * n * cbn * blk * (oh * ow + h * w))
    if threads > 1:
        return fused_parallel([ni, ci, gi], [n, cbn, ng], body, name, threads)
    return For(ni, n, For(ci, cbn, For(gi, ng, body)))


def _block_geometry(x: te.Tensor, kernel, strides, dilation, padding, out_hw) -> dict:
    n, cbn, h, w, blk = x.shape
    return dict(n=n, cb=cbn, blk=blk, h=h, w=w, kh=kernel[0], kw=kernel[1], sh=strides[0],
                sw=strides[1], dh=dilation[0], dw=dilation[1], pt=padding[0], pl=padding[1],
                oh=out_hw[0], ow=out_hw[1])


def _kernel_attrs(blk: int) -> dict:
    """Vectors of the whole channel block (LLVM prefers 256-bit loops on AVX-512 CPUs)."""
    return {"prefer_vector_width": 32 * blk}


def pool2d_nchwc(x: te.Tensor, kind: str, pool_size, strides, dilation, padding, out_hw,
                 finish: Finish, name: str, *, options: CodegenOptions,
                 config: BlockedWindowConfig | None = None) -> te.Tensor:
    """max or avg pooling of a float NCHW[x]c tensor; padding is (top, left, bottom, right);
    `finish` turns a window's max or sum (None: no tap inside) into the result."""
    geo = _block_geometry(x, pool_size, strides, dilation, padding, out_hw)
    config = resolve_blocked_window(0, False, options, config)
    dtype = x.dtype

    def reduce_taps(taps, where, _cb, _lane):
        if kind == "max":
            return max_with_nan(taps, dtype, len({s for _, s in where}))
        return tree_reduce(taps, lambda a, b: a + b)

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        return blocked_window_stmt(ins[0], outs[0], geo, reduce_taps, finish, epilogue, name,
                                   options, config, unroll_rest=True)

    n, cbn, _, _, blk = x.shape
    return te.extern((n, cbn, *out_hw, blk), [x], mark_epilogue(fcompute, True), dtype=dtype,
                     name=name, kernel_attrs=_kernel_attrs(blk))


def global_pool_nchwc(x: te.Tensor, kind: str, name: str, *, options: CodegenOptions,
                      config: BlockedWindowConfig | None = None) -> te.Tensor:
    """global max or avg pooling of a float NCHW[x]c tensor: out[n, cb, 0, 0, :] is the max or
    mean of the channel block's plane, reduced into one vector global_chunk pixels a step."""
    n, cbn, h, w, blk = x.shape
    dtype = x.dtype
    config = resolve_blocked_window(0, False, options, config)

    def combine(values: list[Expr]) -> Expr:
        if kind == "max":
            return max_with_nan(values, dtype, len(values))
        return tree_reduce(values, lambda a, b: a + b)

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        xb, ob = ins[0], outs[0]
        ni, ci, yi, step, lane = (var(f"{name}_{t}") for t in ("n", "cb", "y", "p", "v"))
        acc = Buffer(f"{name}_acc", (blk,), dtype)
        at = (lane,)

        def fold(first, count: int) -> Stmt:
            """acc = combine(acc, the row's pixels first .. first + count - 1)."""
            taps = [Load(xb, (ni, ci, yi, first + p, lane), dtype) for p in range(count)]
            return For(lane, blk, Store(acc, at, combine([Load(acc, at, dtype)] + taps)),
                       "vectorized")

        chunk = min(config.global_chunk, w)
        full, rest = divmod(w, chunk)
        fill = const(float("-inf") if kind == "max" else 0.0, dtype)
        row = seq(For(step, full, fold(step * chunk, chunk)) if full > 1 else fold(imm(0), chunk),
                  fold(imm(full * chunk), rest) if rest else None)
        idx = (ni, ci, imm(0), imm(0), lane)
        value = Load(acc, at, dtype)
        if kind == "avg":
            value = value / const(float(h * w), dtype)
        if epilogue is not None:
            value = epilogue(value, idx)
        body = Allocate(acc, seq(For(lane, blk, Store(acc, at, fill), "vectorized"),
                                 For(yi, h, row),
                                 For(lane, blk, Store(ob, idx, value), "vectorized")))
        threads = options.parallel.threads(n * cbn * h * w * blk, 4 * n * cbn * h * w * blk)
        if threads > 1:
            return fused_parallel([ni, ci], [n, cbn], body, name, threads)
        return For(ni, n, For(ci, cbn, body))

    return te.extern((n, cbn, 1, 1, blk), [x], mark_epilogue(fcompute, True), dtype=dtype,
                     name=name, kernel_attrs=_kernel_attrs(blk))


def depthwise_conv2d_nchwc(x: te.Tensor, wp: te.Tensor, strides=(1, 1),
                           padding=(0, 0, 0, 0), dilation=(1, 1),
                           name: str = "T_depthwise_conv2d_NCHWc", *, options: CodegenOptions,
                           config: BlockedWindowConfig | None = None) -> te.Tensor:
    """Depthwise conv2d (channel multiplier 1) of x[N, C/x, H, W, x] with a weight packed as
    [C/x, 1, R, S, 1, x]: out[N, C/x, OH, OW, x]; padding is (top, left, bottom, right)."""
    n, cbn, h, w, blk = x.shape
    if len(wp.shape) != 6 or wp.shape[0] != cbn or wp.shape[1] != 1 or wp.shape[4] != 1 \
            or wp.shape[5] != blk:
        raise ValueError(f"depthwise_conv2d_nchwc: data {x.shape} and weight {wp.shape}; "
                         f"expected a weight [{cbn}, 1, R, S, 1, {blk}]")
    r, s = wp.shape[2], wp.shape[3]
    config = resolve_blocked_window(r * s, True, options, config)
    sh, sw = strides
    dh, dw = dilation
    oh = (h + padding[0] + padding[2] - dh * (r - 1) - 1) // sh + 1
    ow = (w + padding[1] + padding[3] - dw * (s - 1) - 1) // sw + 1
    geo = _block_geometry(x, (r, s), strides, dilation, padding, (oh, ow))
    zero = const(0.0, x.dtype)

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        wb = ins[1]

        def weighted_sum(taps, where, cb, lane):
            terms = [t * Load(wb, (cb, imm(0), imm(i), imm(j), imm(0), lane), wb.dtype)
                     for t, (i, j) in zip(taps, where)]
            acc = terms[0]
            for t in terms[1:]:
                acc = acc + t
            return acc

        return blocked_window_stmt(ins[0], outs[0], geo, weighted_sum,
                                   lambda v, *_: zero if v is None else v, epilogue, name,
                                   options, config, unroll_rest=False)

    return te.extern((n, cbn, oh, ow, blk), [x, wp], mark_epilogue(fcompute, True),
                     dtype=x.dtype, name=name, kernel_attrs=_kernel_attrs(blk))
