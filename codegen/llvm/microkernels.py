"""Register-tiled micro-kernels emitted directly as LLVM IR with `<8 x float>` FMAs.

A schedule reaches them through a TIR call `Evaluate(Call("relayjit.ukr.<kind>...", args))`:
the emitter hands every call whose name starts with `relayjit.ukr.` to `emit_call`, which
emits (once per module) the specialised kernel function and calls it. An argument that is a
`Load` is passed as the *address* of the element (a pointer); any other argument is passed
as an i64 value.

Kernels (all accumulate in registers through the whole reduction loop, unrolled by hand;
functions are `noinline` so their register allocation stays isolated):

- `relayjit.ukr.gemm_<MR>x<NR>`: C[MR, NR] (+)= A_packed[kc][MR] * B_packed[kc][NR]
  args (kc, a, b, c, ldc, accumulate, b_next); `gemm_<MR>x<NR>_rows` reads A in place
  (row i at a + i*lda), args (kc, a, lda, b, c, ldc, accumulate, b_next), and
  `gemm_<MR>x<NR>_rows_pf` also prefetches the row tile read next, args (..., b_next,
  a_next). A row is two vectors of NR/2 floats (6x16 with <8 x float> on AVX2: 12
  accumulators + 2 B vectors + 1 broadcast = 15 of 16 ymm; 8x32 or 12x32 with <16 x float>
  when the host has AVX-512), or NR/VW vectors of VW floats in `gemm_<MR>x<NR>x<VW>` (8x48x16:
  24 zmm accumulators + 3 B vectors + 1 broadcast). b_next is the B panel the caller reads
  next: prefetched into L2 at the pace b is read (constant weights stream from memory).
- `relayjit.ukr.gemv_<NR>` (`gemv_<NR>x<VW>`, `..._<P>` for P panels a call): c[NR] =
  sum_k x[k] * B_packed[k][NR] for each of P consecutive panels (matrix-vector, M = 1 dense on
  pre-packed weight panels); args (k, x, b, c, panel_stride). Four k steps in flight, each
  with its own accumulators, so FMA latency is hidden while the panels stream from memory.
- `relayjit.ukr.conv_<KB>_<P>_<R>_<S>_<rowstep>_<chanstep>_<dh>_<dw>_<CM>_<PF>`: direct
  convolution, KB output channels (two vectors; `conv_<KB>x<VW>_...`: KB/VW vectors of VW,
  three of 16 for 48 channels) x P pixels: T[p][v] = sum_{c,r,s}
  x_p[c*chanstep + r*dh*rowstep + s*dw] * W[c][r][s][v]; args (w, t, acc, C, w_next, x_0,
  ..., x_{P-1}); each channel also prefetches PF lines from w_next on (into L2, 0: none):
  with acc != 0 the tile accumulates (T += ...: the accumulators start from a pixel-major
  T), so a schedule can block the reduction over input channels. With CM = 1 the tile is
  stored channel-major instead, T[v][p] with rows of VW >= P pixels (transposed in
  registers), so the schedule's epilogue reads a channel's pixels contiguously, as NCHW
  stores them; schedules ask for it on the last channel block. `conv_..._<PF>_<SW>`: a row
  tile, P consecutive pixels of one output row SW apart in the input, args (w, t, acc, C,
  w_next, x_0); each input value is broadcast once for all the taps that read it.
- `relayjit.ukr.convb_<KB>x<VW>_<P>_<R>_<S>_<rowstep>_<blockstep>_<dh>_<dw>_<CB>_<PF>_<SW>`:
  the same kernel over a channel-blocked input (NCHW[CB]c: CB channels one float apart, blocks
  blockstep apart; SW 0 for one pointer a pixel), its tile pixel-major (conv_blocked_kernel_name).
"""
from __future__ import annotations

from llvmlite import ir

from .textir import TextBlock, TextBuilder
from .types import F32, I64, PTR

PREFIX = "relayjit.ukr."
ROW_LOOP_TAPS = 16
I32 = ir.IntType(32)


def _fma_decl(module: ir.Module, vw: int) -> ir.Function:
    # declare_intrinsic fails for vector types in llvmlite 0.50: declare by name
    vt = ir.VectorType(F32, vw)
    fn = module.globals.get(f"llvm.fma.v{vw}f32")
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.v{vw}f32")
    return fn


def _splat(b: TextBuilder, ptr: ir.Value, vw: int) -> ir.Value:
    vt = ir.VectorType(F32, vw)
    s = b.load(ptr, typ=F32, align=4)
    v = b.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(I32, 0))
    return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, vw), [0] * vw))


def _vload(b: TextBuilder, base: ir.Value, offset: int, vw: int) -> ir.Value:
    p = b.gep(base, [ir.Constant(I64, offset)], inbounds=True, source_etype=F32) \
        if offset else base
    return b.load(p, typ=ir.VectorType(F32, vw), align=4)


def _vstore(b: TextBuilder, val: ir.Value, base: ir.Value, offset: ir.Value | int) -> None:
    off = ir.Constant(I64, offset) if isinstance(offset, int) else offset
    p = b.gep(base, [off], inbounds=True, source_etype=F32)
    b.store(val, p, align=4)


def _new_function(module: ir.Module, name: str, args: list[ir.Type]) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    return fn


def _counted_loop(b: TextBuilder, fn: ir.Function, count: ir.Value, carried: list[ir.Value],
                  body, tag: str) -> list[ir.Value]:
    """for it in [0, count): carried = body(b, it, carried); guarded for count == 0."""
    pre = b.block
    loop = TextBlock(fn, f"{tag}.body")
    done = TextBlock(fn, f"{tag}.end")
    b.cbranch(b.icmp_signed(">", count, ir.Constant(I64, 0)), loop, done)
    b.position_at_end(loop)
    it = b.phi(I64, name=f"{tag}.i")
    it.add_incoming(ir.Constant(I64, 0), pre)
    phis = []
    for k, v in enumerate(carried):
        p = b.phi(v.type, name=f"{tag}.c{k}")
        p.add_incoming(v, pre)
        phis.append(p)
    new = body(b, it, phis)
    nxt = b.add(it, ir.Constant(I64, 1), flags=("nuw", "nsw"))
    last = b.block
    it.add_incoming(nxt, last)
    for p, v in zip(phis, new):
        p.add_incoming(v, last)
    b.cbranch(b.icmp_signed("<", nxt, count), loop, done)
    b.position_at_end(done)
    out = []
    for k, (v0, v1) in enumerate(zip(carried, new)):
        p = b.phi(v0.type, name=f"{tag}.out{k}")
        p.add_incoming(v0, pre)
        p.add_incoming(v1, last)
        out.append(p)
    return out


# ---------------------------------------------------------------------- GEMM
def _prefetch_l2_decl(module: ir.Module) -> ir.Function:
    fn = module.globals.get("llvm.prefetch.p0")
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]),
                         "llvm.prefetch.p0")
    return fn


def gemm_kernel_name(mr: int, nr: int, vw: int, a_rows: bool = False,
                     a_next: bool = False) -> str:
    """`gemm_<MR>x<NR>` for rows of two vectors (vw = NR/2), else `gemm_<MR>x<NR>x<VW>`; then
    the `_rows` / `_rows_pf` suffixes (without PREFIX)."""
    shape = f"{mr}x{nr}" if nr == 2 * vw else f"{mr}x{nr}x{vw}"
    return f"gemm_{shape}" + ("_rows" if a_rows else "") + ("_pf" if a_next else "")


def gemm_kernel(module: ir.Module, mr: int, nr: int, unroll: int = 4,
                a_rows: bool = False, a_next: bool = False, vw: int | None = None
                ) -> ir.Function:
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
    assert a_rows or not a_next, "a_next prefetches rows read in place"
    vw = nr // 2 if vw is None else vw
    name = PREFIX + gemm_kernel_name(mr, nr, vw, a_rows, a_next)
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    nv = nr // vw  # vectors per row: 6x16 = 6 x 2 <8 x float>; 8x32, 12x32, 8x48 <16 x float>
    assert vw in (4, 8, 16) and nv * vw == nr and nv >= 1
    fma = _fma_decl(module, vw)
    prefetch = _prefetch_l2_decl(module)
    if a_rows:
        fn = _new_function(module, name, [I64, PTR, I64, PTR, PTR, I64, I64, PTR]
                           + ([PTR] if a_next else []))
        kc, a, lda, bp, c, ldc, accf, b_next = fn.args[:8]
    else:
        fn = _new_function(module, name, [I64, PTR, PTR, PTR, I64, I64, PTR])
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
        bv = [_vload(b, b_ptr, u * nr + vw * j, vw) for j in range(nv)]
        out = list(accs)
        for i in range(mr):
            ap = b.gep(a_ptr, [a_offset(i, u)], inbounds=True, source_etype=F32)
            av = _splat(b, ap, vw)
            for j in range(nv):
                out[i * nv + j] = b.call(fma, [av, bv[j], out[i * nv + j]])
        return out

    line_floats = 16  # 64-byte cache lines

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
    carried = _counted_loop(b, fn, main, carried, make_body(unroll), "k4")
    rem = b.and_(kc, ir.Constant(I64, unroll - 1))
    carried = _counted_loop(b, fn, rem, carried, make_body(1), "k1")
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
                _vstore(b, v, c, off)
        b.branch(end_bb)
    b.position_at_end(end_bb)
    b.ret_void()
    return fn


# ---------------------------------------------------------------------- GEMV
def gemv_kernel_name(nr: int, vw: int, panels: int = 1) -> str:
    """`gemv_<NR>` for panels of two vectors (vw = NR/2), else `gemv_<NR>x<VW>`; `_<P>` when
    one call computes P consecutive panels."""
    return (f"gemv_{nr}" if nr == 2 * vw else f"gemv_{nr}x{vw}") + \
        (f"_{panels}" if panels > 1 else "")


def gemv_kernel(module: ir.Module, nr: int, unroll: int = 4, vw: int | None = None,
                panels: int = 1) -> ir.Function:
    """void gemv(i64 k, ptr x, ptr b, ptr c, i64 panel_stride): for the `panels` panels p at
    b + p*panel_stride floats, c[p*nr : p*nr + nr] = sum_kk x[kk] * b_p[kk*nr : kk*nr + nr].

    Each k step loads panels x NR/VW vectors per broadcast of x (codegen.schedules.gemm's
    GEMV_PANELS: two panels a call took an LSTM's steps 0.9x the time of one). No prefetch of
    the next panel: the panels are one contiguous stream the hardware already prefetches
    (prefetching the next panel into L2: ResNet-50 0.998x, VGG-19 1.06x)."""
    vw = nr // 2 if vw is None else vw
    name = PREFIX + gemv_kernel_name(nr, vw, panels)
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    nv = nr // vw
    assert vw in (4, 8, 16) and nv * vw == nr and panels >= 1
    fma = _fma_decl(module, vw)
    fn = _new_function(module, name, [I64, PTR, PTR, PTR, I64])
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
                xv = _splat(b, xp, vw)
                for p in range(panels):
                    for j in range(nv):
                        bv = _vload(b, b_ptrs[p], u * nr + vw * j, vw)
                        slot = (u % unroll) * width + p * nv + j
                        accs[slot] = b.call(fma, [xv, bv, accs[slot]])
            x_next = b.gep(x_ptr, [ir.Constant(I64, u_count)], inbounds=True, source_etype=F32)
            b_next = [b.gep(ptr, [ir.Constant(I64, u_count * nr)], inbounds=True,
                            source_etype=F32) for ptr in b_ptrs]
            return [x_next, *b_next, *accs]
        return body

    carried = [x, *starts] + [zero] * (unroll * width)
    main = b.ashr(kk, ir.Constant(I64, {1: 0, 2: 1, 4: 2, 8: 3}[unroll]))
    carried = _counted_loop(b, fn, main, carried, make_body(unroll), "k4")
    rem = b.and_(kk, ir.Constant(I64, unroll - 1))
    carried = _counted_loop(b, fn, rem, carried, make_body(1), "k1")
    accs = carried[1 + panels:]
    for q in range(width):
        total = accs[q]
        for u in range(1, unroll):
            total = b.fadd(total, accs[u * width + q])
        _vstore(b, total, c, vw * q)
    b.ret_void()
    return fn


# ---------------------------------------------------------------------- conv
def conv_kernel_name(kb: int, vw: int) -> str:
    """`conv_<KB>` for tiles of two vectors (vw = KB/2), else `conv_<KB>x<VW>` (without
    PREFIX; the geometry fields follow)."""
    return f"conv_{kb}" if kb == 2 * vw else f"conv_{kb}x{vw}"


def conv_blocked_kernel_name(kb: int, vw: int, p: int, r: int, s: int, rowstep: int,
                             blockstep: int, dh: int, dw: int, chan_block: int,
                             prefetch_lines: int, row_stride: int) -> str:
    """`convb_<KB>x<VW>_<P>_<R>_<S>_<rowstep>_<blockstep>_<dh>_<dw>_<CB>_<PF>_<SW>`: conv_kernel
    over a channel-blocked input (chan_block CB; SW 0: one pointer a pixel), without PREFIX."""
    return (f"convb_{kb}x{vw}_{p}_{r}_{s}_{rowstep}_{blockstep}_{dh}_{dw}_{chan_block}_"
            f"{prefetch_lines}_{row_stride}")


def conv_kernel(module: ir.Module, kb: int, p: int, r: int, s: int, rowstep: int,
                chanstep: int, dh: int, dw: int, channel_major: int,
                prefetch_lines: int = 0, row_stride: int = 0, vw: int | None = None,
                chan_block: int = 0) -> ir.Function:
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

    With chan_block > 0 the input is channel-blocked (NCHW[x]c, `convb_...`, see
    conv_blocked_kernel_name): channel c at (c // chan_block) * chanstep + c % chan_block, so
    the channel loop is two-level, chan_block channels one float apart, then a block step of
    chanstep; rowstep, dw and row_stride are then in floats (a pixel is chan_block floats).
    c must be a multiple of chan_block; the tile is pixel-major (channel_major 0)."""
    vw = kb // 2 if vw is None else vw
    nv = kb // vw  # vectors a pixel: two, or three (48 channels of 16-float vectors)
    assert nv * vw == kb and nv in (2, 3)
    assert not (chan_block and channel_major), "a channel-blocked tile is pixel-major"
    if chan_block:
        name = PREFIX + conv_blocked_kernel_name(kb, vw, p, r, s, rowstep, chanstep, dh, dw,
                                                 chan_block, prefetch_lines, row_stride)
    else:
        name = (f"{PREFIX}{conv_kernel_name(kb, vw)}_{p}_{r}_{s}_{rowstep}_{chanstep}_{dh}_"
                f"{dw}_{channel_major}_{prefetch_lines}"
                + (f"_{row_stride}" if row_stride else ""))
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fma = _fma_decl(module, vw)
    prefetch = _prefetch_l2_decl(module)
    nx = 1 if row_stride else p  # pixel pointers passed
    fn = _new_function(module, name, [PTR, PTR, I64, I64, PTR] + [PTR] * nx)
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
    loaded = [_vload(b, t, kb * j + vw * h, vw) for j in range(p) for h in range(nv)]
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
            ws = [_vload(b, w_ptr, wbase + vw * h, vw) for h in range(nv)]
            for j in range(p):
                xo = off + cc * cstep
                xp = b.gep(x_ptrs[j], [i64(xo)], inbounds=True, source_etype=F32) \
                    if xo else x_ptrs[j]
                xv = _splat(b, xp, vw)
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
            ws = [_vload(b, w_ptr, wbase + ss * kb + h * vw, vw) for ss in range(s)
                  for h in range(nv)]
            for off, pairs in sorted(uses.items()):
                xo = cc * cstep + rr * dh * rowstep + off
                xp = b.gep(x_ptrs[0], [i64(xo)], inbounds=True, source_etype=F32) \
                    if xo else x_ptrs[0]
                xv = _splat(b, xp, vw)
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
        carried = _counted_loop(b, fn, i64(r), carried, row_body, "r")
        return advance(b, carried, 0, cstep - r * dh * rowstep, 1)

    def channel_block(b, it, carried):
        """One block of chan_block channels one float apart, then on to the next block."""
        if rows > 1:
            carried = _counted_loop(b, fn, i64(chan_block), carried, channel_of_rows, "cb")
        else:
            carried = _counted_loop(b, fn, i64(chan_block // cu), carried, make_body(cu), "cb")
        return advance(b, carried, 0, chanstep - chan_block)

    carried = [w, *xs] + ([w_next] if npf else []) + init
    if chan_block:
        carried = _counted_loop(b, fn, b.udiv(c, i64(chan_block)), carried, channel_block, "c")
    elif rows > 1:
        carried = _counted_loop(b, fn, c, carried, channel_of_rows, "c")
    else:
        carried = _counted_loop(b, fn, b.udiv(c, i64(cu)), carried, make_body(cu), "c")
        if cu > 1:
            carried = _counted_loop(b, fn, b.urem(c, i64(cu)), carried, make_body(1), "c1")
    accs = carried[na:]
    if not channel_major:
        for j in range(p):
            for h in range(nv):
                _vstore(b, accs[nv * j + h], t, kb * j + vw * h)
    half = vw // 2
    for h in range(nv if channel_major else 0):  # T[v][j], pixel rows padded to vw
        if p <= half:
            # two channels a vector: half the rows, a quarter of the shuffles (AVX-512's
            # 8-pixel tiles: 16->64 3x3 at 55x55 0.371 -> 0.358 ms, 64->1280 1x1 at 14x14
            # 0.236 -> 0.230)
            rows_ = [accs[nv * j + h] for j in range(p)] + [zero] * (half - p)
            for v, col in enumerate(_transpose(b, rows_, lanes=vw)):
                for q in range(2):  # lanes [q*half, (q+1)*half): channel q*half + v
                    part = b.shuffle_vector(col, ir.Constant(col.type, ir.Undefined),
                                            ir.Constant(ir.VectorType(I32, half),
                                                        list(range(q * half, (q + 1) * half))))
                    _vstore(b, part, t, (h * vw + q * half + v) * vw)
            continue
        rows_ = [accs[nv * j + h] for j in range(p)] + [zero] * (vw - p)
        for v, col in enumerate(_transpose(b, rows_)):
            _vstore(b, col, t, (h * vw + v) * vw)
    b.ret_void()
    return fn


def conv_rows_kernel(module: ir.Module, kc: int, nv: int, vw: int, c: int, r: int, s: int,
                     kstride: int, tapstride: int, sh: int, sw: int, dh: int, dw: int,
                     hq: int, wq: int, stacked: int = 0) -> ir.Function:
    """void conv_rows(ptr w, ptr t, ptr x): kc output channels x nv vectors of vw consecutive
    output pixels of one row, T[k][j] = sum_{c,r,s} w(k, c, r, s) * x(c, r, s)[j]; with
    stacked = 1, vector j holds the same vw pixels of output row j (from the tile's row on),
    so a row of a single vector still gives each broadcast weight nv FMAs.

    x points at the phase planes X[c][py][px][hq][wq] of the padded input (X[c][py][px][i][j]
    = xpad[c][i*sh + py][j*sw + px]) at the tile's first output pixel, so every tap's pixels
    are one contiguous vector load whatever the stride; w(k, c, r, s) is the scalar at
    w[k*kstride + ((c*r_ + r)*s_ + s)*tapstride], broadcast. Windows of more than
    ROW_LOOP_TAPS taps loop over their rows (see conv_kernel)."""
    name = (f"{PREFIX}convrows_{kc}_{nv}_{vw}_{c}_{r}_{s}_{kstride}_{tapstride}_{sh}_{sw}_"
            f"{dh}_{dw}_{hq}_{wq}" + ("_1" if stacked else ""))
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fma = _fma_decl(module, vw)
    fn = _new_function(module, name, [PTR, PTR, PTR])
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
            xs = [_vload(b, x_row, xo + vector_step * j, vw) for j in range(nv)]
            for k in range(kc):
                wv = _splat(b, step(b, w_row, k * kstride + wo), vw)
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
            accs = _counted_loop(b, fn, ir.Constant(I64, r), accs,
                                 lambda b2, i2, c2: window_row(b2, i2, c2, w_ptr, x_ptr), "r")
        return [step(b, w_ptr, r * s * tapstride), step(b, x_ptr, chanstep), *accs]

    carried = _counted_loop(b, fn, ir.Constant(I64, c), [w, x] + [zero] * (kc * nv), channel,
                            "c")
    for k in range(kc):
        for j in range(nv):
            _vstore(b, carried[2 + k * nv + j], t, (k * nv + j) * vw)
    b.ret_void()
    return fn


def _transpose(b: TextBuilder, rows: list[ir.Value], lanes: int | None = None
               ) -> list[ir.Value]:
    """Transpose an n x n block held as n vectors (n a power of two): log2(n) stages of
    two-source shuffles, each swapping the off-diagonal halves of blk x blk blocks. With
    vectors of more lanes than rows (lanes = 2n), each n-lane half transposes on its own:
    row i comes out holding column i of the low halves, then column i of the high halves."""
    n = len(rows)
    lanes = n if lanes is None else lanes
    rows = list(rows)
    blk = n // 2
    while blk >= 1:
        lo = ir.Constant(ir.VectorType(I32, lanes), [j if not j & blk else lanes + j - blk
                                                    for j in range(lanes)])
        hi = ir.Constant(ir.VectorType(I32, lanes), [j + blk if not j & blk else lanes + j
                                                    for j in range(lanes)])
        new = list(rows)
        for i in range(n):
            if not i & blk:
                new[i] = b.shuffle_vector(rows[i], rows[i + blk], lo)
                new[i + blk] = b.shuffle_vector(rows[i], rows[i + blk], hi)
        rows = new
        blk //= 2
    return rows


# ---------------------------------------------------------------------- TIR hook
KINDS = ("gemm", "gemv", "conv", "convb", "convrows")


def define(module: ir.Module, name: str) -> ir.Function | None:
    """Emit the micro-kernel called `name` (PREFIX + kind + params) into module; None when
    no micro-kernel has that name."""
    kind, *params = name[len(PREFIX):].split("_")
    if kind == "gemm":
        mr, nr, *vw = (int(x) for x in params[0].split("x"))
        if params[1:] not in ([], ["rows"], ["rows", "pf"]) or len(vw) > 1:
            return None
        return gemm_kernel(module, mr, nr, a_rows="rows" in params, a_next="pf" in params,
                           vw=vw[0] if vw else None)
    if kind == "gemv":
        nr, *vw = (int(x) for x in params[0].split("x"))
        if len(vw) > 1 or len(params) > 2:
            return None
        return gemv_kernel(module, nr, vw=vw[0] if vw else None,
                           panels=int(params[1]) if len(params) > 1 else 1)
    if kind == "conv":
        kb, *vw = (int(x) for x in params[0].split("x"))
        if len(vw) > 1:
            return None
        return conv_kernel(module, kb, *(int(x) for x in params[1:]),
                           vw=vw[0] if vw else None)
    if kind == "convb":
        kb, vw = (int(x) for x in params[0].split("x"))
        if len(params) != 11:
            return None
        p, r, s, rowstep, blockstep, dh, dw, cb, pf, sw = (int(x) for x in params[1:])
        return conv_kernel(module, kb, p, r, s, rowstep, blockstep, dh, dw, 0, pf, sw, vw=vw,
                           chan_block=cb)
    if kind == "convrows":
        return conv_rows_kernel(module, *(int(x) for x in params))
    return None


def declare(module: ir.Module, name: str, arg_types: list[ir.Type]) -> ir.Function:
    """An external declaration of micro-kernel `name` in a kernel's module.

    Why not the definition: codegen.jit compiles each micro-kernel in a module of its own,
    once per target CPU (cached in memory and on disk), and links it into the kernel
    modules that call it; emitting and optimising it with every kernel set (and in every
    parallel compile job) was most of a CNN's LLVM time. argmemonly lets the optimiser keep
    values in registers across the call, as it did when it could see the body.
    """
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), arg_types), name)
        for attr in ("argmemonly", "nounwind", "norecurse"):
            fn.attributes.add(attr)
    return fn


def emit_call(emitter, e) -> ir.Value:
    """Emit a `relayjit.ukr.*` TIR call: Load args become addresses, others i64 values."""
    from ..tir.expr import Load

    kind = e.name[len(PREFIX):].split("_")[0]
    if kind not in KINDS:
        raise emitter.fail(f"unknown micro-kernel {e.name}")
    arg_types = [PTR if type(a) is Load else I64 for a in e.args]
    fn = declare(emitter.builder.module, e.name, arg_types)
    bld = emitter.builder
    args = []
    for a, ty in zip(e.args, fn.function_type.args):
        if type(a) is Load:
            args.append(emitter.address(a.buffer, a.indices))
        else:
            v = emitter.expr(a)
            if v.type != I64:
                v = bld.zext(v, I64) if v.type.width == 1 else bld.sext(v, I64)
            args.append(v)
        if args[-1].type != ty:
            raise emitter.fail(f"micro-kernel {e.name}: argument type {args[-1].type} != {ty}")
    if len(args) != len(fn.function_type.args):
        raise emitter.fail(f"micro-kernel {e.name}: expected {len(fn.function_type.args)} "
                           f"arguments, got {len(e.args)}")
    bld.call(fn, args)
    for scope in emitter.memo:  # the kernel wrote memory: loads emitted before are stale
        scope.clear()
    return ir.Constant(I32, 0)
