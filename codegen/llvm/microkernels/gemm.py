"""The GEMM micro-kernels (Gemm, GemmRows: an MR x NR register tile over a K block) and the
GEMV one (Gemv: one row times P packed panels); see codegen.llvm.microkernels."""
from __future__ import annotations

from llvmlite import ir

from ..textir import TextBlock, TextBuilder
from ..types import F32, I64
from .common import (I32, LINE_FLOATS, counted_loop, fma_decl, new_function,
                     prefetch_l2_decl, splat, vload, vstore)
from .descriptors import Gemm, GemmRows, Gemv

UNROLL = 4  # k steps an iteration of the main loop (the remainder loops one at a time)


def gemm_kernel(module: ir.Module, kernel: Gemm) -> ir.Function:
    """void gemm(i64 kc, ptr a, ptr b, ptr c, i64 ldc, i64 accumulate, ptr b_next), or with
    a_rows (`gemm_<MR>x<NR>_rows`) void gemm(i64 kc, ptr a, i64 lda, ptr b, ptr c, i64 ldc,
    i64 accumulate, ptr b_next): A read in place, row i at a + i*lda, instead of packed.

    Each unrolled k step also prefetches (read, L2: locality 2) the lines of b_next it reads
    of b: a transformer's weights stream from memory once per run, and the next N panel's
    first tile no longer waits on them (one thread: BERT-style encoder 1.01 -> 0.95x
    onnxruntime, GPT-2-style decoder 0.96 -> 0.92x).

    With a_next (`gemm_<MR>x<NR>_rows_pf`, a ninth argument ptr a_next, rows lda apart like
    a's) the kernel also prefetches the row tile read next, at the pace it reads its own:
    Winograd's U is read once per run in place, and each row tile's rows arrived cold."""
    mr, nr, vw, unroll = kernel.mr, kernel.nr, kernel.vw, UNROLL
    a_rows = isinstance(kernel, GemmRows)
    a_next = a_rows and kernel.prefetch_rows
    name = kernel.symbol
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    nv = nr // vw  # vectors per row: 6x16 = 6 x 2 <8 x float>; 8x32, 12x32, 8x48 <16 x float>
    fma = fma_decl(module, vw)
    prefetch = prefetch_l2_decl(module)
    fn = new_function(module, kernel)
    if a_rows:
        kc, a, lda, bp, c, ldc, accf, b_next = fn.args[:8]
    else:
        kc, a, bp, c, ldc, accf, b_next = fn.args
    for arg in (a, bp, c):
        arg.add_attribute("noalias")
    b = TextBuilder(TextBlock(fn, "entry"))
    zero = ir.Constant(ir.VectorType(F32, vw), [0.0] * vw)
    # where A(row i, step u) is from the A pointer of an unrolled step: packed [k][mr], or rows
    if a_rows:
        row_offsets = [b.mul(lda, ir.Constant(I64, i)) for i in range(mr)]
        a_offset = lambda i, u: b.add(row_offsets[i], ir.Constant(I64, u)) \
            if i else ir.Constant(I64, u)  # noqa: E731
        a_step = 1
    else:
        a_offset = lambda i, u: ir.Constant(I64, u * mr + i)  # noqa: E731
        a_step = mr

    def step(b, a_ptr, b_ptr, accs, u):
        bv = [vload(b, b_ptr, u * nr + vw * j, vw) for j in range(nv)]
        out = list(accs)
        for i in range(mr):
            ap = b.gep(a_ptr, [a_offset(i, u)], inbounds=True, source_etype=F32)
            av = splat(b, ap, vw)
            for j in range(nv):
                out[i * nv + j] = b.call(fma, [av, bv[j], out[i * nv + j]])
        return out

    line_floats = LINE_FLOATS

    def prefetch_l2(b, p):
        b.call(prefetch, [p, ir.Constant(I32, 0), ir.Constant(I32, 2), ir.Constant(I32, 1)])

    # a_next: a pointer advancing with a's; every line_floats / unroll turns of the unrolled
    # loop (when the k loop enters a new 64-byte line of each row) it prefetches that line of
    # each of the next tile's rows, addressed like a's (the row offsets' registers are shared:
    # a rotating row index of its own made LLVM spill general registers)
    phases = line_floats // unroll

    def prefetch_next_rows(b, it, an_ptr):
        new_line = b.icmp_signed("==", b.and_(it, ir.Constant(I64, phases - 1)),
                                 ir.Constant(I64, 0))
        fetch, rest = TextBlock(fn, "pf.a"), TextBlock(fn, "pf.a.end")
        b.cbranch(new_line, fetch, rest)
        b.position_at_end(fetch)
        for i in range(mr):
            prefetch_l2(b, b.gep(an_ptr, [row_offsets[i]], source_etype=F32) if i else an_ptr)
        b.branch(rest)
        b.position_at_end(rest)

    def make_body(u_count):
        def body(b, it, carried):
            a_ptr, b_ptr, pf_ptr = carried[:3]
            an_ptr, accs = (carried[3] if a_next else None), carried[n_ptrs:]
            if u_count == unroll:  # the remainder steps (< unroll) go unprefetched
                for line in range(0, u_count * nr, line_floats):
                    prefetch_l2(b, b.gep(pf_ptr, [ir.Constant(I64, line)], source_etype=F32)
                                if line else pf_ptr)
                if a_next:
                    prefetch_next_rows(b, it, an_ptr)
            for u in range(u_count):
                accs = step(b, a_ptr, b_ptr, accs, u)
            step_floats = [ir.Constant(I64, u_count * x) for x in (a_step, nr)]
            a_ptr = b.gep(a_ptr, [step_floats[0]], inbounds=True, source_etype=F32)
            b_ptr = b.gep(b_ptr, [step_floats[1]], inbounds=True, source_etype=F32)
            pf_ptr = b.gep(pf_ptr, [step_floats[1]], source_etype=F32)
            an = [b.gep(an_ptr, [step_floats[0]], source_etype=F32)] if a_next else []
            return [a_ptr, b_ptr, pf_ptr, *an, *accs]
        return body

    n_ptrs = 4 if a_next else 3  # carried: a, b, b_next (, a_next) pointers, accumulators
    carried = [a, bp, b_next, *fn.args[8:]] + [zero] * (mr * nv)
    main = b.ashr(kc, ir.Constant(I64, {1: 0, 2: 1, 4: 2, 8: 3}[unroll]))
    carried = counted_loop(b, fn, main, carried, make_body(unroll), "k4")
    rem = b.and_(kc, ir.Constant(I64, unroll - 1))
    carried = counted_loop(b, fn, rem, carried, make_body(1), "k1")
    accs = carried[n_ptrs:]
    # store: C = acc (+ C when accumulating)
    add_bb = TextBlock(fn, "store.acc")
    set_bb = TextBlock(fn, "store.set")
    end_bb = TextBlock(fn, "store.end")
    b.cbranch(b.icmp_signed("!=", accf, ir.Constant(I64, 0)), add_bb, set_bb)
    for bb, adding in ((add_bb, True), (set_bb, False)):
        b.position_at_end(bb)
        for i in range(mr):
            row = b.mul(ldc, ir.Constant(I64, i)) if i else ir.Constant(I64, 0)
            for j in range(nv):
                off = b.add(row, ir.Constant(I64, vw * j)) if j else row
                v = accs[i * nv + j]
                if adding:
                    p = b.gep(c, [off], inbounds=True, source_etype=F32)
                    v = b.fadd(v, b.load(p, typ=v.type, align=4))
                vstore(b, v, c, off)
        b.branch(end_bb)
    b.position_at_end(end_bb)
    b.ret_void()
    return fn


def gemv_kernel(module: ir.Module, kernel: Gemv) -> ir.Function:
    """void gemv(i64 k, ptr x, ptr b, ptr c, i64 panel_stride): for the `panels` panels p at
    b + p*panel_stride floats, c[p*nr : p*nr + nr] = sum_kk x[kk] * b_p[kk*nr : kk*nr + nr].

    Each k step loads panels x NR/VW vectors per broadcast of x (codegen.schedules.gemm's
    GEMV_PANELS: two panels a call took an LSTM's steps 0.9x the time of one). No prefetch of
    the next panel: the panels are one contiguous stream the hardware already prefetches
    (prefetching the next panel into L2: ResNet-50 0.998x, VGG-19 1.06x)."""
    nr, vw, panels, unroll = kernel.nr, kernel.vw, kernel.panels, UNROLL
    name = kernel.symbol
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    nv = nr // vw
    fma = fma_decl(module, vw)
    fn = new_function(module, kernel)
    kk, x, bp, c, panel_stride = fn.args
    for arg in (x, bp, c):
        arg.add_attribute("noalias")
    b = TextBuilder(TextBlock(fn, "entry"))
    zero = ir.Constant(ir.VectorType(F32, vw), [0.0] * vw)
    width = panels * nv  # vectors a k step
    starts = [bp] + [b.gep(bp, [b.mul(panel_stride, ir.Constant(I64, p))], inbounds=True,
                           source_etype=F32) for p in range(1, panels)]

    def make_body(u_count):
        def body(b, it, carried):
            x_ptr, b_ptrs, accs = carried[0], carried[1:1 + panels], list(carried[1 + panels:])
            for u in range(u_count):
                xp = b.gep(x_ptr, [ir.Constant(I64, u)], inbounds=True, source_etype=F32) \
                    if u else x_ptr
                xv = splat(b, xp, vw)
                for p in range(panels):
                    for j in range(nv):
                        bv = vload(b, b_ptrs[p], u * nr + vw * j, vw)
                        slot = (u % unroll) * width + p * nv + j
                        accs[slot] = b.call(fma, [xv, bv, accs[slot]])
            x_next = b.gep(x_ptr, [ir.Constant(I64, u_count)], inbounds=True, source_etype=F32)
            b_next = [b.gep(ptr, [ir.Constant(I64, u_count * nr)], inbounds=True,
                            source_etype=F32) for ptr in b_ptrs]
            return [x_next, *b_next, *accs]
        return body

    carried = [x, *starts] + [zero] * (unroll * width)
    main = b.ashr(kk, ir.Constant(I64, {1: 0, 2: 1, 4: 2, 8: 3}[unroll]))
    carried = counted_loop(b, fn, main, carried, make_body(unroll), "k4")
    rem = b.and_(kk, ir.Constant(I64, unroll - 1))
    carried = counted_loop(b, fn, rem, carried, make_body(1), "k1")
    accs = carried[1 + panels:]
    for q in range(width):
        total = accs[q]
        for u in range(1, unroll):
            total = b.fadd(total, accs[u * width + q])
        vstore(b, total, c, vw * q)
    b.ret_void()
    return fn
