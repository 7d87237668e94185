"""The int8 dot-product micro-kernel (Int8Dot): unsigned 8-bit data times signed 8-bit weights
summed four at a time into int32 lanes, as `vpdpbusd` does (AVX512-VNNI, AVX-VNNI), or where
the target has no VNNI through `vpmaddwd` on 16-bit widened operands (AVX512BW, AVX2) or plain
widening multiplies; see codegen.llvm.microkernels."""
from __future__ import annotations

from llvmlite import ir

from ..textir import TextBlock, TextBuilder
from ..types import I8, I64
from .common import I32, counted_loop, new_function, prefetch_l2_decl, transpose
from .descriptors import DOT_NAMES, Int8Dot, Interleave4

# A window of more taps than this loops over its rows (one row's taps unrolled)
ROW_LOOP_TAPS = 16


def _vnni_decl(module: ir.Module, lanes: int) -> ir.Function:
    """llvm.x86.avx512.vpdpbusd.<bits>(acc, u8 quads, s8 quads): the same intrinsic selects
    the EVEX form (AVX512-VNNI) or the VEX one (AVX-VNNI, 256 bits)."""
    vt = ir.VectorType(I32, lanes)
    name = f"llvm.x86.avx512.vpdpbusd.{32 * lanes}"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(vt, [vt, vt, vt]), name)
    return fn


class _Pairs:
    """vpmaddwd arithmetic: both operands widened to 16 bits, an output vector kept as two
    accumulators of pair sums (the low and high halves of its lanes, lane i of a half in
    elements 2i and 2i + 1), added into lane sums only at the end; exact, as every product
    and pair sum fits, and the int32 sums wrap as vpdpbusd's do."""

    def __init__(self, module: ir.Module, b: TextBuilder, lanes: int):
        self.b, self.lanes = b, lanes
        half = ir.VectorType(ir.IntType(16), 2 * lanes)
        self.half = half
        out = ir.VectorType(I32, lanes)
        name = {16: "llvm.x86.avx512.pmaddw.d.512", 8: "llvm.x86.avx2.pmadd.wd",
                4: "llvm.x86.sse2.pmadd.wd"}[lanes]
        self.madd = module.globals.get(name) or ir.Function(
            module, ir.FunctionType(out, [half, half]), name)

    def weights(self, w):
        """A vector of lanes x 4 signed bytes as its two halves, sign-extended."""
        b, lanes = self.b, self.lanes
        quads = b.bitcast(w, ir.VectorType(I8, 4 * lanes))
        undef = ir.Constant(quads.type, ir.Undefined)
        return [b.sext(b.shuffle_vector(quads, undef, ir.Constant(
            ir.VectorType(I32, 2 * lanes), list(range(q * 2 * lanes, (q + 1) * 2 * lanes)))),
            self.half) for q in range(2)]

    def data(self, scalar):
        """Four unsigned bytes (an i32) zero-extended to 16 bits, repeated across a half."""
        b, lanes = self.b, self.lanes
        wide = b.bitcast(b.zext(b.bitcast(scalar, ir.VectorType(I8, 4)),
                                ir.VectorType(ir.IntType(16), 4)), I64)
        qt = ir.VectorType(I64, lanes // 2)
        v = b.insert_element(ir.Constant(qt, ir.Undefined), wide, ir.Constant(I32, 0))
        splat = b.shuffle_vector(v, ir.Constant(qt, ir.Undefined),
                                 ir.Constant(ir.VectorType(I32, lanes // 2), [0] * (lanes // 2)))
        return b.bitcast(splat, self.half)

    def accumulate(self, accs, x, ws):
        return [self.b.add(acc, self.b.call(self.madd, [w, x])) for acc, w in zip(accs, ws)]

    def start(self, lane_sums):
        """Accumulators whose final lane sums are `lane_sums`."""
        b, lanes = self.b, self.lanes
        zero = ir.Constant(lane_sums.type, [0] * lanes)
        return [b.shuffle_vector(lane_sums, zero, ir.Constant(
            ir.VectorType(I32, lanes), [q * lanes // 2 + e // 2 if e % 2 == 0 else lanes
                                        for e in range(lanes)])) for q in range(2)]

    def finish(self, accs):
        b, lanes = self.b, self.lanes
        even, odd = ([e for e in range(0, 2 * lanes, 2)], [e for e in range(1, 2 * lanes, 2)])
        mask = lambda idx: ir.Constant(ir.VectorType(I32, lanes), idx)  # noqa: E731
        return b.add(b.shuffle_vector(accs[0], accs[1], mask(even)),
                     b.shuffle_vector(accs[0], accs[1], mask(odd)))


def _widening_dot(b: TextBuilder, acc, a, w, lanes: int):
    """acc + the four-byte dot products of u8 a and s8 w lane by lane, exactly, with plain
    integer vector operations (targets without VNNI): widen to i32, multiply, add the four
    products of each lane (shuffles), add."""
    bytes_t = ir.VectorType(I8, 4 * lanes)
    wide = ir.VectorType(I32, 4 * lanes)
    a32 = b.zext(b.bitcast(a, bytes_t), wide)
    w32 = b.sext(b.bitcast(w, bytes_t), wide)
    prod = b.mul(a32, w32)
    undef = ir.Constant(wide, ir.Undefined)
    total = acc
    for q in range(4):
        part = b.shuffle_vector(prod, undef, ir.Constant(ir.VectorType(I32, lanes),
                                                         [4 * i + q for i in range(lanes)]))
        total = b.add(total, part)
    return total


def int8_dot_kernel(module: ir.Module, kernel: Int8Dot) -> ir.Function:
    """void dot8(ptr w, ptr t, i64 acc, i64 groups, ptr w_next, ptr x_0 .. x_{p-1}): for each
    of p rows, nv vectors of `lanes` int32 columns

        T[j][col] (+)= sum_{g < groups} sum_{taps} sum_{q < 4}
                       x_j[g*chanstep + tap + q] * W[g][tap][col][q]

    x_j bytes unsigned, W bytes signed, tap = rr*dh*rowstep + ss*dw (bytes). The four bytes
    of x a (row, group, tap) are broadcast to every lane (one 32-bit load); W is read as
    whole vectors of lanes x 4 bytes, [group][tap][nv*lanes][4]. With acc != 0 the
    accumulators start from the pixel-major T (the reduction split over calls); the tile is
    stored pixel-major (T[j][nv*lanes]) or, channel_major, transposed: T[col][tile_stride]
    holding the p rows in a row's first p lanes (the schedules' epilogues then store a
    channel's pixels as one contiguous run; consecutive tiles side by side make it long).
    Each loop trip also prefetches prefetch_lines 64-byte lines from w_next on, into L2: the
    caller points it at the weights it reads next, which then stream in from memory while
    this tile computes."""
    name = kernel.symbol
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    p, nv, lanes, r, s = kernel.p, kernel.nv, kernel.lanes, kernel.r, kernel.s
    vt = ir.VectorType(I32, lanes)
    instruction = DOT_NAMES[kernel.dot]
    prefetch = prefetch_l2_decl(module)
    fn = new_function(module, kernel)
    w, t, accf, groups, w_next, *xs = fn.args
    w.add_attribute("noalias")
    t.add_attribute("noalias")
    entry = TextBlock(fn, "entry")
    load_bb, start_bb = TextBlock(fn, "init.load"), TextBlock(fn, "init.done")
    b = TextBuilder(entry)
    zero = ir.Constant(vt, [0] * lanes)
    cols = nv * lanes
    pairs = _Pairs(module, b, lanes) if instruction == "vpmaddwd" else None
    if instruction == "vpdpbusd":
        vnni = _vnni_decl(module, lanes)
        dot = lambda acc, x, w: b.call(vnni, [acc, x, w])  # noqa: E731
    else:
        dot = lambda acc, x, w: _widening_dot(b, acc, x, w, lanes)  # noqa: E731

    def i64(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def at(ptr, offset: int):
        return b.gep(ptr, [i64(offset)], inbounds=True, source_etype=I8) if offset else ptr

    def vload(ptr, offset_bytes: int):
        return b.load(at(ptr, offset_bytes), typ=vt, align=4)

    b.cbranch(b.icmp_signed("!=", accf, i64(0)), load_bb, start_bb)
    b.position_at_end(load_bb)
    loaded = [vload(t, 4 * (cols * j + lanes * h)) for j in range(p) for h in range(nv)]
    if pairs:  # the loaded lane sums in pair form (the zero branch is zero either way)
        loaded = [acc for v in loaded for acc in pairs.start(v)]
    b.branch(start_bb)
    b.position_at_end(start_bb)
    init = []
    for v in loaded:
        phi = b.phi(vt)
        phi.add_incoming(zero, entry)
        phi.add_incoming(v, load_bb)
        init.append(phi)

    rows = r if r * s > ROW_LOOP_TAPS else 1  # window rows a loop trip
    window_rows = r // rows
    taps = [(rr * s + ss, rr * kernel.dh * kernel.rowstep + ss * kernel.dw)
            for rr in range(window_rows) for ss in range(s)]
    tap_bytes = cols * 4  # weights a (group, tap)
    unroll = kernel.unroll

    def splat(ptr, offset: int):
        scalar = b.load(at(ptr, offset), typ=I32, align=1)
        v = b.insert_element(ir.Constant(vt, ir.Undefined), scalar, ir.Constant(I32, 0))
        return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def group(b_, w_ptr, x_ptrs, accs, u: int):
        """Group u (of a trip) over the window's taps: nv weight vectors a tap, one broadcast
        a (row, tap)."""
        accs = list(accs)
        for tap, off in taps:
            wbase = (u * r * s + tap) * tap_bytes
            ws = [vload(w_ptr, wbase + 4 * lanes * h) for h in range(nv)]
            if pairs:
                ws = [pairs.weights(wv) for wv in ws]
            for j in range(p):
                if pairs:
                    xv = pairs.data(b.load(at(x_ptrs[j], u * kernel.chanstep + off), typ=I32,
                                           align=1))
                    for h in range(nv):
                        at_ = 2 * (nv * j + h)
                        accs[at_:at_ + 2] = pairs.accumulate(accs[at_:at_ + 2], xv, ws[h])
                    continue
                xv = splat(x_ptrs[j], u * kernel.chanstep + off)
                for h in range(nv):
                    accs[nv * j + h] = dot(accs[nv * j + h], xv, ws[h])
        return accs

    lines = kernel.prefetch_lines
    na = 2 + p  # carried: w, w_next, x_0 .. x_{p-1}, then the accumulators

    def ahead(ptr, offset: int):  # not inbounds: w_next may run past the weights
        return b.gep(ptr, [i64(offset)], source_etype=I8) if offset else ptr

    def advance(carried, w_step: int, x_step: int, prefetched: int = 0):
        return [at(carried[0], w_step), ahead(carried[1], 64 * prefetched),
                *(at(x, x_step) for x in carried[2:na]), *carried[na:]]

    def prefetch_next(carried) -> None:
        """The trip's lines of w_next (read, into L2): the weights the caller reads next
        stream in while this tile computes."""
        for line in range(lines):
            b.call(prefetch, [ahead(carried[1], 64 * line), ir.Constant(I32, 0),
                              ir.Constant(I32, 2), ir.Constant(I32, 1)])

    def make_trip(count: int):
        def trip(b_, it, carried):
            prefetch_next(carried)
            accs = carried[na:]
            for u in range(count):
                accs = group(b, carried[0], carried[2:na], accs, u)
            return advance([*carried[:na], *accs], count * r * s * tap_bytes,
                           count * kernel.chanstep, lines)
        return trip

    def row_trip(b_, it, carried):
        accs = group(b, carried[0], carried[2:na], carried[na:], 0)
        return advance([*carried[:na], *accs], s * tap_bytes, kernel.dh * kernel.rowstep)

    def group_of_rows(b_, it, carried):
        prefetch_next(carried)
        carried = counted_loop(b, fn, i64(r), carried, row_trip, "r")
        return advance(carried, 0, kernel.chanstep - r * kernel.dh * kernel.rowstep, lines)

    carried = [w, w_next, *xs] + init
    if rows > 1:
        carried = counted_loop(b, fn, groups, carried, group_of_rows, "g")
    else:
        if unroll > 1:
            trips = b.udiv(groups, i64(unroll))
            carried = counted_loop(b, fn, trips, carried, make_trip(unroll), "gu")
            groups = b.urem(groups, i64(unroll))
        carried = counted_loop(b, fn, groups, carried, make_trip(1), "g")
    accs = carried[na:]
    if pairs:
        accs = [pairs.finish(accs[i:i + 2]) for i in range(0, len(accs), 2)]
    if not kernel.channel_major:
        for j in range(p):
            for h in range(nv):
                b.store(accs[nv * j + h], at(t, 4 * (cols * j + lanes * h)), align=4)
    else:
        stride = kernel.tile_stride or lanes
        half = lanes // 2
        for h in range(nv):
            if p <= half:
                # half the rows, each lane half transposed on its own: a quarter of the
                # shuffles; column v of the low halves is channel v, of the high halves
                # channel half + v, stored as vectors of `half` lanes
                rows_ = [accs[nv * j + h] for j in range(p)] + [zero] * (half - p)
                for v, col in enumerate(transpose(b, rows_, lanes=lanes)):
                    for q in range(2):
                        part = b.shuffle_vector(col, ir.Constant(vt, ir.Undefined), ir.Constant(
                            ir.VectorType(I32, half), list(range(q * half, (q + 1) * half))))
                        b.store(part, at(t, 4 * (h * lanes + q * half + v) * stride), align=4)
                continue
            rows_ = [accs[nv * j + h] for j in range(p)] + [zero] * (lanes - p)
            for v, col in enumerate(transpose(b, rows_)):
                b.store(col, at(t, 4 * (h * lanes + v) * stride), align=4)
    b.ret_void()
    return fn


def interleave4_kernel(module: ir.Module, kernel: Interleave4) -> ir.Function:
    """void interleave4(ptr out, ptr in_0, ptr in_1, ptr in_2, ptr in_3): out[4w + q] =
    in_q[w], 64 pixels (four loads of 64 bytes, two rounds of byte and 16-bit interleaving
    shuffles, 256 bytes stored) a step, then 16 at a time, then one. As a TIR loop it was a
    byte load and insert per channel and pixel."""
    name = kernel.symbol
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = new_function(module, kernel)
    out, *ins = fn.args
    for arg in fn.args:
        arg.add_attribute("noalias")
    b = TextBuilder(TextBlock(fn, "entry"))

    def step(pixels: int, w0: int) -> None:
        bt = ir.VectorType(I8, pixels)
        rows = [b.load(b.gep(x, [ir.Constant(I64, w0)], inbounds=True, source_etype=I8)
                       if w0 else x, typ=bt, align=1) for x in ins]

        def zip_(a, c, n: int):  # a0 c0 a1 c1 ... of two n-element vectors
            mask = ir.Constant(ir.VectorType(I32, 2 * n), [e // 2 + (e % 2) * n
                                                            for e in range(2 * n)])
            return b.shuffle_vector(a, c, mask)

        low, high = zip_(rows[0], rows[1], pixels), zip_(rows[2], rows[3], pixels)
        words = ir.VectorType(ir.IntType(16), pixels)
        quads = zip_(b.bitcast(low, words), b.bitcast(high, words), pixels)
        b.store(quads, b.gep(out, [ir.Constant(I64, 4 * w0)], inbounds=True, source_etype=I8)
                if w0 else out, align=1)

    w0 = 0
    for pixels in (64, 16, 1):
        while kernel.width - w0 >= pixels:
            step(pixels, w0)
            w0 += pixels
    b.ret_void()
    return fn
