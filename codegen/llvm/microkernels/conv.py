"""The direct convolution micro-kernels: Conv (NCHW or pixel-major input), ConvBlocked
(NCHW[x]c input) and ConvRows (output rows over phase planes); see codegen.llvm.microkernels."""
from __future__ import annotations

from llvmlite import ir

from ..textir import TextBlock, TextBuilder
from ..types import F32, I64
from .common import (I32, counted_loop, fma_decl, new_function, prefetch_l2_decl, splat,
                     transpose, vload, vstore)
from .descriptors import Conv, ConvBlocked, ConvRows

# A window of more taps than this loops over its rows (one row's taps unrolled)
ROW_LOOP_TAPS = 16


def conv_kernel(module: ir.Module, kernel: Conv | ConvBlocked) -> ir.Function:
    """void conv(ptr w, ptr t, i64 acc, i64 c, ptr w_next, ptr x_0 .. x_{p-1}): kb channels
    x p pixels (module doc). The channel count is an argument, not part of the kernel: one
    kernel serves every layer with the same window, tile and input plane (DenseNet's convs
    differ mostly in it). The strides stay constants, folded into the loads' addresses (as
    arguments they cost 1x1 convs 10-17%: an index register per unrolled channel).

    Each input channel also prefetches (into L2) the next `prefetch_lines` 64-byte lines
    from w_next on: the schedule points every call at its slice of the weights it reads
    next, so a layer's packed weights stream from memory while the tiles before them run
    (deep layers' weights are read once a run and arrive cold).

    With row_stride > 0 the p pixels are consecutive outputs of one row, pixel j at
    x_0 + j*row_stride, and only x_0 is passed: each input value a window row reads is then
    broadcast once and feeds every (pixel, tap) that uses it (3x3 stride 1 over 8 pixels: 10
    broadcasts a window row instead of 24), with the row's s taps of weights in registers.

    A ConvBlocked kernel's input is channel-blocked (NCHW[x]c, `convb_...`): channel c at (c // chan_block) * chanstep + c % chan_block, so
    the channel loop is two-level, chan_block channels one float apart, then a block step of
    chanstep; rowstep, dw and row_stride are then in floats (a pixel is chan_block floats).
    c must be a multiple of chan_block; the tile is pixel-major (channel_major 0)."""
    kb, vw, p, r, s, rowstep = (kernel.kb, kernel.vw, kernel.p, kernel.r, kernel.s,
                                kernel.rowstep)
    dh, dw, prefetch_lines, row_stride = kernel.dh, kernel.dw, kernel.prefetch_lines, \
        kernel.row_stride
    if isinstance(kernel, ConvBlocked):
        chanstep, chan_block, channel_major = kernel.blockstep, kernel.chan_block, False
    else:
        chanstep, chan_block, channel_major = kernel.chanstep, 0, kernel.channel_major
    nv = kb // vw  # vectors a pixel: two, or three (48 channels of 16-float vectors)
    name = kernel.symbol
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fma = fma_decl(module, vw)
    prefetch = prefetch_l2_decl(module)
    nx = 1 if row_stride else p  # pixel pointers passed
    fn = new_function(module, kernel)
    w, t, accf, c, w_next, *xs = fn.args
    entry = TextBlock(fn, "entry")
    load_bb = TextBlock(fn, "init.load")
    start_bb = TextBlock(fn, "init.done")
    b = TextBuilder(entry)
    zero = ir.Constant(ir.VectorType(F32, vw), [0.0] * vw)

    def i64(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    # A window of more than ROW_LOOP_TAPS taps loops over its rows (one row's taps unrolled):
    # a fully unrolled 7x7 body holds 49 x p broadcasts in one block, which LLVM's scheduler
    # hoists and spills (a 7x7/2 first layer ran at half speed).
    rows = r if r * s > ROW_LOOP_TAPS else 1
    window_rows = r // rows
    # channels per loop iteration: keep about 8+ taps unrolled per trip
    cu = max(1, 8 // (window_rows * s)) if window_rows * s < 8 else 1
    # the step between channels the unrolled body reads: one float inside a channel block
    cstep = 1 if chan_block else chanstep
    if chan_block:
        cu = max(d for d in range(1, cu + 1) if chan_block % d == 0)
    b.cbranch(b.icmp_signed("!=", accf, i64(0)), load_bb, start_bb)
    b.position_at_end(load_bb)
    loaded = [vload(b, t, kb * j + vw * h, vw) for j in range(p) for h in range(nv)]
    b.branch(start_bb)
    b.position_at_end(start_bb)
    init = []
    for v in loaded:
        phi = b.phi(v.type)
        phi.add_incoming(zero, entry)
        phi.add_incoming(v, load_bb)
        init.append(phi)

    taps = [(rr * s + ss, rr * dh * rowstep + ss * dw)
            for rr in range(window_rows) for ss in range(s)]

    def chan_of_taps(b, w_ptr, x_ptrs, accs, cc):
        """Channel cc's taps: one broadcast a (pixel, tap)."""
        accs = list(accs)
        for tap, off in taps:
            wbase = (cc * r * s + tap) * kb
            ws = [vload(b, w_ptr, wbase + vw * h, vw) for h in range(nv)]
            for j in range(p):
                xo = off + cc * cstep
                xp = b.gep(x_ptrs[j], [i64(xo)], inbounds=True, source_etype=F32) \
                    if xo else x_ptrs[j]
                xv = splat(b, xp, vw)
                for h in range(nv):
                    accs[nv * j + h] = b.call(fma, [xv, ws[h], accs[nv * j + h]])
        return accs

    # row tiles: the (pixel, tap) pairs of a window row by the input offset they read
    uses: dict[int, list[tuple[int, int]]] = {}
    for j in range(p if row_stride else 0):
        for ss in range(s):
            uses.setdefault(j * row_stride + ss * dw, []).append((j, ss))

    def chan_of_row_tile(b, w_ptr, x_ptrs, accs, cc):
        """Channel cc of a row tile: one broadcast an input value a window row reads."""
        accs = list(accs)
        for rr in range(window_rows):
            wbase = (cc * r * s + rr * s) * kb
            ws = [vload(b, w_ptr, wbase + ss * kb + h * vw, vw) for ss in range(s)
                  for h in range(nv)]
            for off, pairs in sorted(uses.items()):
                xo = cc * cstep + rr * dh * rowstep + off
                xp = b.gep(x_ptrs[0], [i64(xo)], inbounds=True, source_etype=F32) \
                    if xo else x_ptrs[0]
                xv = splat(b, xp, vw)
                for j, ss in pairs:
                    for h in range(nv):
                        accs[nv * j + h] = b.call(fma, [xv, ws[nv * ss + h],
                                                        accs[nv * j + h]])
        return accs

    chan = chan_of_row_tile if row_stride else chan_of_taps

    # carried through the channel loop: [w, x_0 .. x_{nx-1}, (w_next,) accumulators...]
    npf = 1 if prefetch_lines else 0
    na = 1 + nx + npf

    def advance(b, carried, w_step: int, x_step: int, n_chan: int = 0):
        w_ptr, x_ptrs = carried[0], carried[1:1 + nx]
        pf = [b.gep(carried[1 + nx], [i64(16 * prefetch_lines * n_chan)], source_etype=F32)
              if n_chan else carried[1 + nx]] if npf else []
        return [b.gep(w_ptr, [i64(w_step)], inbounds=True, source_etype=F32),
                *(b.gep(x, [i64(x_step)], inbounds=True, source_etype=F32)
                  if x_step else x for x in x_ptrs), *pf, *carried[na:]]

    def prefetch_next(b, carried, n_chan: int) -> None:
        """n_chan channels' worth of lines from the prefetch pointer (read, into L2)."""
        for line in range(n_chan * prefetch_lines):
            ptr = b.gep(carried[1 + nx], [i64(16 * line)], source_etype=F32) if line \
                else carried[1 + nx]
            b.call(prefetch, [ptr, ir.Constant(I32, 0), ir.Constant(I32, 2),
                              ir.Constant(I32, 1)])

    def make_body(n_chan):
        def body(b, it, carried):
            w_ptr, x_ptrs, accs = carried[0], carried[1:1 + nx], carried[na:]
            if npf:
                prefetch_next(b, carried, n_chan)
            for cc in range(n_chan):
                accs = chan(b, w_ptr, x_ptrs, accs, cc)
            return advance(b, [*carried[:na], *accs], n_chan * r * s * kb, n_chan * cstep,
                           n_chan)
        return body

    def row_body(b, it, carried):
        accs = chan(b, carried[0], carried[1:1 + nx], carried[na:], 0)
        return advance(b, [*carried[:na], *accs], s * kb, dh * rowstep)

    def channel_of_rows(b, it, carried):
        if npf:
            prefetch_next(b, carried, 1)
        carried = counted_loop(b, fn, i64(r), carried, row_body, "r")
        return advance(b, carried, 0, cstep - r * dh * rowstep, 1)

    def channel_block(b, it, carried):
        """One block of chan_block channels one float apart, then on to the next block."""
        if rows > 1:
            carried = counted_loop(b, fn, i64(chan_block), carried, channel_of_rows, "cb")
        else:
            carried = counted_loop(b, fn, i64(chan_block // cu), carried, make_body(cu), "cb")
        return advance(b, carried, 0, chanstep - chan_block)

    carried = [w, *xs] + ([w_next] if npf else []) + init
    if chan_block:
        carried = counted_loop(b, fn, b.udiv(c, i64(chan_block)), carried, channel_block, "c")
    elif rows > 1:
        carried = counted_loop(b, fn, c, carried, channel_of_rows, "c")
    else:
        carried = counted_loop(b, fn, b.udiv(c, i64(cu)), carried, make_body(cu), "c")
        if cu > 1:
            carried = counted_loop(b, fn, b.urem(c, i64(cu)), carried, make_body(1), "c1")
    accs = carried[na:]
    if not channel_major:
        for j in range(p):
            for h in range(nv):
                vstore(b, accs[nv * j + h], t, kb * j + vw * h)
    half = vw // 2
    for h in range(nv if channel_major else 0):  # T[v][j], pixel rows padded to vw
        if p <= half:
            # two channels a vector: half the rows, a quarter of the shuffles (AVX-512's
            # 8-pixel tiles: 16->64 3x3 at 55x55 0.371 -> 0.358 ms, 64->1280 1x1 at 14x14
            # 0.236 -> 0.230)
            rows_ = [accs[nv * j + h] for j in range(p)] + [zero] * (half - p)
            for v, col in enumerate(transpose(b, rows_, lanes=vw)):
                for q in range(2):  # lanes [q*half, (q+1)*half): channel q*half + v
                    part = b.shuffle_vector(col, ir.Constant(col.type, ir.Undefined),
                                            ir.Constant(ir.VectorType(I32, half),
                                                        list(range(q * half, (q + 1) * half))))
                    vstore(b, part, t, (h * vw + q * half + v) * vw)
            continue
        rows_ = [accs[nv * j + h] for j in range(p)] + [zero] * (vw - p)
        for v, col in enumerate(transpose(b, rows_)):
            vstore(b, col, t, (h * vw + v) * vw)
    b.ret_void()
    return fn


def conv_rows_kernel(module: ir.Module, kernel: ConvRows) -> ir.Function:
    """void conv_rows(ptr w, ptr t, ptr x): kc output channels x nv vectors of vw consecutive
    output pixels of one row, T[k][j] = sum_{c,r,s} w(k, c, r, s) * x(c, r, s)[j]; with
    stacked = 1, vector j holds the same vw pixels of output row j (from the tile's row on),
    so a row of a single vector still gives each broadcast weight nv FMAs.

    x points at the phase planes X[c][py][px][hq][wq] of the padded input (X[c][py][px][i][j]
    = xpad[c][i*sh + py][j*sw + px]) at the tile's first output pixel, so every tap's pixels
    are one contiguous vector load whatever the stride; w(k, c, r, s) is the scalar at
    w[k*kstride + ((c*r_ + r)*s_ + s)*tapstride], broadcast. Windows of more than
    ROW_LOOP_TAPS taps loop over their rows (see conv_kernel)."""
    kc, nv, vw, c, r, s = kernel.kc, kernel.nv, kernel.vw, kernel.c, kernel.r, kernel.s
    kstride, tapstride, sh, sw, dh, dw = (kernel.kstride, kernel.tapstride, kernel.sh, kernel.sw,
                                          kernel.dh, kernel.dw)
    hq, wq, stacked = kernel.hq, kernel.wq, kernel.stacked
    name = kernel.symbol
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fma = fma_decl(module, vw)
    fn = new_function(module, kernel)
    w, t, x = fn.args
    for arg in (w, t, x):
        arg.add_attribute("noalias")
    b = TextBuilder(TextBlock(fn, "entry"))
    zero = ir.Constant(ir.VectorType(F32, vw), [0.0] * vw)
    plane = hq * wq
    chanstep = sh * sw * plane
    vector_step = wq if stacked else vw  # the next output row: the next phase-plane row

    def row_offset(rr: int) -> int:
        """Window row rr's offset in the phase planes (its phase, then its row there)."""
        qy, py = divmod(rr * dh, sh)
        return py * sw * plane + qy * wq

    def column_offset(ss: int) -> int:
        qx, px = divmod(ss * dw, sw)
        return px * plane + qx

    def row_taps(b, w_row, x_row, accs, x_base: int = 0, w_base: int = 0):
        """The s taps of one window row at x_row + x_base (weights at w_row + w_base)."""
        accs = list(accs)
        for ss in range(s):
            xo, wo = x_base + column_offset(ss), w_base + ss * tapstride
            xs = [vload(b, x_row, xo + vector_step * j, vw) for j in range(nv)]
            for k in range(kc):
                wv = splat(b, step(b, w_row, k * kstride + wo), vw)
                for j in range(nv):
                    accs[k * nv + j] = b.call(fma, [xs[j], wv, accs[k * nv + j]])
        return accs

    def step(b, ptr, elems: int):
        return b.gep(ptr, [ir.Constant(I64, elems)], inbounds=True, source_etype=F32) \
            if elems else ptr

    def window_row(b, it, accs, w_ptr, x_ptr):
        """Row `it` of the window: row_offset computed from the trip count."""
        rdh = b.mul(it, ir.Constant(I64, dh))
        py, qy = b.urem(rdh, ir.Constant(I64, sh)), b.udiv(rdh, ir.Constant(I64, sh))
        off = b.add(b.mul(py, ir.Constant(I64, sw * plane)), b.mul(qy, ir.Constant(I64, wq)))
        x_row = b.gep(x_ptr, [off], inbounds=True, source_etype=F32)
        w_row = b.gep(w_ptr, [b.mul(it, ir.Constant(I64, s * tapstride))], inbounds=True,
                      source_etype=F32)
        return row_taps(b, w_row, x_row, accs)

    def channel(b, it, carried):
        w_ptr, x_ptr, accs = carried[0], carried[1], carried[2:]
        if r * s <= ROW_LOOP_TAPS:
            for rr in range(r):
                accs = row_taps(b, w_ptr, x_ptr, accs, row_offset(rr), rr * s * tapstride)
        else:
            accs = counted_loop(b, fn, ir.Constant(I64, r), accs,
                                 lambda b2, i2, c2: window_row(b2, i2, c2, w_ptr, x_ptr), "r")
        return [step(b, w_ptr, r * s * tapstride), step(b, x_ptr, chanstep), *accs]

    carried = counted_loop(b, fn, ir.Constant(I64, c), [w, x] + [zero] * (kc * nv), channel,
                            "c")
    for k in range(kc):
        for j in range(nv):
            vstore(b, carried[2 + k * nv + j], t, (k * nv + j) * vw)
    b.ret_void()
    return fn
