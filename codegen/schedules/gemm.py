"""GEMM schedule (dense, batch_matmul, matmul): packed panels + a register micro-kernel (6x16 on
AVX2; 8x32 / 12x32 on AVX-512, and 8x48 for the dense family where it pads N no more).

C[b, m, n] = sum_k A(b, m, k) * B(b, n, k), float32, BLIS loop order:

    for b in batch:                              (parallel when there are >= 4 batches)
      pack B[b] into Bp[N/16][Kp][16]            (zero padded in n and k; parallel over N/16)
      for pc in K blocks (KC ~ 256; 1024 with AVX-512):
        for ic in M blocks (MC <= 144; 288 with AVX-512, fewer for deep KC):
          pack A block into Ap[MC/6][KC][6]      (zero padded in m and k; L2 resident;
                                                  parallel over MC/6. Not when A's rows are
                                                  contiguous in k (a_rows): whole row tiles
                                                  read A in place; only a partial one packed)
          parallel for jt in N/16:               (B micro-panel KC x 16: L1 resident (L2
                                                  with AVX-512); the M tiles instead
                                                  when there are more)
            for it in MC/6:
              full tile : micro-kernel writes/accumulates C directly (ldc = N), prefetching
                          the same K block of B panel jt + 1 into L2
              edge tile : micro-kernel writes a 6x16 scratch tile, guarded copy into C
              last K block: epilogue applied to the tile just written (cache hot)

K is split into nb equal blocks (KC = ceil(K / nb)), so the zero padding Kp - K < nb and
every micro-kernel call has the same static kc. Accumulators stay in 12 ymm registers
through the k loop (unrolled 4x inside the micro-kernel).
"""
from __future__ import annotations

from .. import te
from ..llvm.microkernels.descriptors import Gemm, GemmRows, Gemv
from ..options import CodegenOptions
from ..parallel import fused_parallel, parallel_loop
from ..tir.expr import Expr, Load
from ..tir.ops import cast, eq, floordiv, floormod, gt, if_then_else, logical_and, lt, select
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import (
    F32, I64, Epilogue, addr, ceil_div, imm, loop, mark_epilogue, ukr_call, var, zero,
)
from .gemm_config import (
    GemmConfig, GemvConfig, block_rows, dense_pack_geometry, k_blocks, resolve_gemm, resolve_gemv,
)


def dense_packed(x: te.Tensor, wp: te.Tensor, units: int, name: str = "T_dense", *,
                 options: CodegenOptions, config: GemmConfig | None = None) -> te.Tensor:
    """x[..., M, K] . w^T with w pre-packed by dense_pack_geometry ([N/NR][Kp][NR]) -> [..., M, N]
    through the GEMM tile (the run-time packing of B skipped). Like every entry point here it
    resolves a partial configuration (gemm_config.resolve_gemm: the dense family's tiles)."""
    *lead, k = x.shape
    n = units
    m = _rows(lead)
    config = resolve_gemm(m, n, k, True, options, config, wide=True)
    _check_packed(wp, n, k, config, "dense_packed")

    def fcompute(ins, outs, epilogue=None):
        xb, wb = ins
        # an epilogue of another dtype: every tile through the scratch tile (one K block)
        return gemm_stmt(
            m, n, k, (), lambda b, i, j: Load(xb, (*_unflatten(i, lead), j), F32),
            None, outs[0], "mk", "nk", epilogue, name, options, config,
            out_index=lambda b, i, j: (*_unflatten(i, lead), j), b_packed=wb,
            a_rows=(lambda b, i, j: addr(xb, *_unflatten(i, lead), j), k),
            in_place=outs[0].dtype != F32)

    return te.extern((*lead, n), [x, wp],
                     mark_epilogue(fcompute, casts=in_place_applicable(k, config)), name=name,
                     kernel_attrs=_vector_attrs(config.vector_width))


def dense_gemv(x: te.Tensor, wp: te.Tensor, units: int, name: str = "T_dense", *,
               options: CodegenOptions, config: GemvConfig | None = None) -> te.Tensor:
    """dense_packed for few rows: a matrix-vector micro-kernel per row (vectorised over N,
    streaming the packed panels) instead of the MRxNR tile."""
    *lead, k = x.shape
    n = units
    m = _rows(lead)
    config = resolve_gemv(n, options, config)
    _check_packed(wp, n, k, config, "dense_gemv")

    def fcompute(ins, outs, epilogue=None):
        xb, wb = ins
        out_index = lambda b, i, j: (*_unflatten(i, lead), j)  # noqa: E731
        return gemv_stmt(m, n, k, xb, lead, wb, outs[0], epilogue, name, out_index, options,
                         config)

    # each output element stored once, from the tile through the epilogue: it may cast
    return te.extern((*lead, n), [x, wp], mark_epilogue(fcompute, casts=True), name=name,
                     kernel_attrs=_vector_attrs(config.vector_width))


def _rows(lead) -> int:
    m = 1
    for d in lead:
        m *= d
    return m


def _check_packed(wp: te.Tensor, n: int, k: int, config, where: str) -> None:
    """The packed weight has the layout the configuration reads."""
    expected = dense_pack_geometry(n, k, config)
    if tuple(wp.shape) != expected:
        raise ValueError(f"{where}: packed weight {tuple(wp.shape)} does not match N={n}, "
                         f"K={k}: the configuration ({config.tile_columns}-wide panels, K "
                         f"blocks of at most {config.k_block}) reads {expected}")


def gemv_stmt(m: int, n: int, k: int, xb: Buffer, lead: list, wp: Buffer, out: Buffer,
              epilogue: Epilogue | None, name: str, out_index, options: CodegenOptions,
              config: GemvConfig) -> Stmt:
    """Per group of config.panels N panels and row i: tile = x[i, :] . Bp[group] (one
    micro-kernel call; the last group may hold fewer), then the guarded epilogue copy into
    out[i, the group's columns]."""
    nt, kp, nr = wp.shape
    vw = config.vector_width
    group = min(config.panels, nt)
    groups = ceil_div(nt, group)
    last = nt - (groups - 1) * group  # panels in the last group
    cols = group * nr
    tile = Buffer(f"{name}_vtile", (cols,), F32)
    ii, jg, vv = var(f"{name}_gi"), var(f"{name}_gj"), var(f"{name}_gv")
    nn = jg * cols + vv
    idx = out_index((), ii, nn)
    val = Load(tile, (vv,), F32)
    if epilogue is not None:
        val = epilogue(val, idx)
    st: Stmt = Store(out, idx, val)
    if n % cols:
        st = IfThenElse(lt(nn, n), st)
    args = (k, addr(xb, *_unflatten(ii, lead), 0), addr(wp, jg * group, 0, 0), addr(tile, 0),
            kp * nr)
    call = ukr_call(Gemv(nr, vw, group), *args)
    if last != group:
        call = IfThenElse(lt(jg, groups - 1), call, ukr_call(Gemv(nr, vw, last),
                                                              *args))
    # groups of N panels in parallel (each streams its own slice of the weight), rows inside
    per_group = Allocate(tile, loop(ii, m, seq(call, For(vv, cols, st, "vectorized"
                                                         if not n % cols else "serial"))))
    return options.parallel.loop(jg, groups, per_group, 2 * m * n * k,
                                 4 * (n * k + m * k + m * n))


def dense(x: te.Tensor, w: te.Tensor, name: str = "T_dense", *, options: CodegenOptions,
          config: GemmConfig | None = None) -> te.Tensor:
    """x[..., M, K] . w[N, K]^T -> [..., M, N] (leading dims of x are flattened into M)."""
    *lead, k = x.shape
    n = w.shape[0]
    m = _rows(lead)
    config = resolve_gemm(m, n, k, True, options, config, wide=True)
    shape = (*lead, n)

    def fcompute(ins, outs, epilogue=None):
        xb, wb = ins
        return gemm_stmt(
            m, n, k, (), lambda b, i, j: Load(xb, (*_unflatten(i, lead), j), F32),
            lambda b, i, j: Load(wb, (i, j), F32), outs[0], "mk", "nk", epilogue, name,
            options, config, out_index=lambda b, i, j: (*_unflatten(i, lead), j),
            a_rows=(lambda b, i, j: addr(xb, *_unflatten(i, lead), j), k))

    return te.extern(shape, [x, w], mark_epilogue(fcompute), name=name,
                     kernel_attrs=_vector_attrs(config.vector_width))


def batch_matmul(x: te.Tensor, y: te.Tensor, transpose_a: bool = False,
                 transpose_b: bool = True, name: str = "T_batch_matmul", *,
                 options: CodegenOptions, config: GemmConfig | None = None) -> te.Tensor:
    """x[B, M, K] (or [B, K, M]) times y[B, N, K] (or [B, K, N]) -> [B, M, N]; batch 1 broadcasts."""
    bx, *xs = x.shape
    by, *ys = y.shape
    m, k = (xs[1], xs[0]) if transpose_a else (xs[0], xs[1])
    n = ys[1] if not transpose_b else ys[0]
    config = resolve_gemm(m, n, k, not transpose_a, options, config, wide=True)
    batch = max(bx, by)
    shape = (batch, m, n)

    def fcompute(ins, outs, epilogue=None):
        xb, yb = ins
        bxi = (lambda b: b) if bx != 1 else (lambda b: imm(0))
        byi = (lambda b: b) if by != 1 else (lambda b: imm(0))
        a_load = (lambda b, i, j: Load(xb, (bxi(b[0]), j, i), F32)) if transpose_a else \
            (lambda b, i, j: Load(xb, (bxi(b[0]), i, j), F32))
        b_load = (lambda b, i, j: Load(yb, (byi(b[0]), i, j), F32)) if transpose_b else \
            (lambda b, i, j: Load(yb, (byi(b[0]), j, i), F32))
        a_rows = None if transpose_a else (lambda b, i, j: addr(xb, bxi(b[0]), i, j), k)
        return gemm_stmt(m, n, k, (batch,), a_load, b_load, outs[0],
                         "km" if transpose_a else "mk", "nk" if transpose_b else "kn",
                         epilogue, name, options, config, a_rows=a_rows)

    return te.extern(shape, [x, y], mark_epilogue(fcompute), name=name,
                     kernel_attrs=_vector_attrs(config.vector_width))


def batch_matmul_axes(x: te.Tensor, y: te.Tensor, a_axes: str, b_axes: str, out_axes: str,
                      out_shape: tuple, a_window: tuple | None = None,
                      b_window: tuple | None = None, name: str = "T_batch_matmul", *,
                      options: CodegenOptions, config: GemmConfig | None = None
                      ) -> te.Tensor:
    """C[b, m, n] = sum_k A[b, m, k] B[b, n, k] with x's axes in a_axes order (letters B, M, K),
    y's in b_axes (B, N, K) and the result's in out_axes (B, M, N; N last), viewed as
    out_shape (out_axes' shape with adjacent axes merged: compiler.op.nn_batch_matmul_axes).
    a_window / b_window = (begin, shape): the operand is that window of x / y (default whole).

    A is read in place when K is its last axis (rows lda = the stride of M in x apart); C's
    rows are ldc = the stride of M apart in the output."""
    (a0, xs), (b0, ys) = (a_window or ((0, 0, 0), x.shape)), (b_window or ((0, 0, 0), y.shape))
    ext = {**dict(zip(a_axes, xs)), **dict(zip(b_axes, ys))}
    batch, m, n, k = ext["B"], ext["M"], ext["N"], ext["K"]
    config = resolve_gemm(m, n, k, a_axes[-1] == "K", options, config, wide=True)
    perm_shape = tuple(ext[c] for c in out_axes)
    groups = merge_groups(perm_shape, tuple(out_shape))
    if groups is None:
        raise ValueError(f"{name}: out_shape {out_shape} does not merge adjacent axes of "
                         f"{out_axes} {perm_shape}")

    def order(axes: str, begin=(0, 0, 0), **index):
        return tuple(index[c] + b if b else index[c] for c, b in zip(axes, begin))

    def out_index(b, i, j):
        flat = order(out_axes, B=b[0], M=i, N=j)
        out = []
        for group in groups:
            idx = imm(0)
            for g in group:
                idx = idx * perm_shape[g] + flat[g] if group[0] != g else flat[g]
            out.append(idx)
        return tuple(out)

    def fcompute(ins, outs, epilogue=None):
        xb, yb = ins
        a_load = lambda b, i, j: Load(xb, order(a_axes, a0, B=b[0], M=i, K=j), F32)  # noqa: E731
        b_load = lambda b, i, j: Load(yb, order(b_axes, b0, B=b[0], N=i, K=j), F32)  # noqa: E731
        a_rows = None
        if a_axes[-1] == "K":
            lda = _stride(x.shape, a_axes.index("M"))
            a_rows = (lambda b, i, j: addr(xb, *order(a_axes, a0, B=b[0], M=i, K=j)), lda)
        return gemm_stmt(m, n, k, (batch,), a_load, b_load, outs[0],
                         "mk" if a_axes.index("K") > a_axes.index("M") else "km",
                         "kn" if b_axes[-1] == "N" else "nk", epilogue, name, options,
                         config, out_index=out_index, a_rows=a_rows,
                         ldc=_stride(perm_shape, out_axes.index("M")))

    return te.extern(tuple(out_shape), [x, y], mark_epilogue(fcompute), name=name,
                     kernel_attrs=_vector_attrs(config.vector_width))


def _stride(shape, axis: int) -> int:
    """Elements between neighbours along `axis` of a row-major shape."""
    stride = 1
    for d in shape[axis + 1:]:
        stride *= d
    return stride


def merge_groups(inner: tuple, outer: tuple) -> list[list[int]] | None:
    """For each axis of `outer`, the consecutive axes of `inner` it merges (axes of 1 may be
    inserted or dropped); None when `outer` is not such a merge of `inner`."""
    groups: list[list[int]] = []
    i = 0
    for extent in outer:
        group, size = [], 1
        while size < extent and i < len(inner):
            group.append(i)
            size *= inner[i]
            i += 1
        if size != extent:
            return None
        groups.append(group)
    while i < len(inner) and inner[i] == 1:
        i += 1
    return groups if i == len(inner) else None


def matmul(a: te.Tensor, b: te.Tensor, transpose_a: bool = False, transpose_b: bool = False,
           name: str = "T_matmul", *, options: CodegenOptions,
           config: GemmConfig | None = None) -> te.Tensor:
    """2-d a[M, K] (or [K, M]) times b[K, N] (or [N, K]) -> [M, N]."""
    m, k = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    n = b.shape[0] if transpose_b else b.shape[1]
    config = resolve_gemm(m, n, k, not transpose_a, options, config, wide=True)

    def fcompute(ins, outs, epilogue=None):
        ab, bb = ins
        a_load = (lambda _, i, j: Load(ab, (j, i), F32)) if transpose_a else \
            (lambda _, i, j: Load(ab, (i, j), F32))
        b_load = (lambda _, i, j: Load(bb, (i, j), F32)) if transpose_b else \
            (lambda _, i, j: Load(bb, (j, i), F32))
        return gemm_stmt(m, n, k, (), a_load, b_load, outs[0], "km" if transpose_a else "mk",
                         "nk" if transpose_b else "kn", epilogue, name, options, config,
                         a_rows=None if transpose_a else (lambda _, i, j: addr(ab, i, j), k))

    return te.extern((m, n), [a, b], mark_epilogue(fcompute), name=name,
                     kernel_attrs=_vector_attrs(config.vector_width))


def _unflatten(i: Expr, lead: list[int]) -> tuple:
    """Indices of the leading dims from a flat row index (0 <= i < prod(lead)): dims of 1 are
    index 0 and the outermost other dim takes the quotient unreduced, so a [1, M] lead costs
    no division (in a fused epilogue it is evaluated per element)."""
    out: list = []
    outer = next((d for d, ext in enumerate(lead) if ext != 1), len(lead))
    for d in range(len(lead) - 1, -1, -1):
        if lead[d] == 1:
            out.append(imm(0))
        elif d == outer:
            out.append(i)
        else:
            out.append(i % lead[d])
            i = i // lead[d]
    return tuple(reversed(out))


def gemm_stmt(m: int, n: int, k: int, batch: tuple, a_load, b_load, out: Buffer,
              a_layout: str, b_layout: str, epilogue: Epilogue | None, name: str,
              options: CodegenOptions, config: GemmConfig, out_index=None,
              b_packed: Buffer | None = None, a_rows=None, prefetch_a: int = 0,
              in_place: bool = False, ldc: int | None = None) -> Stmt:
    """The TIR of C[*b, m, n] = sum_k a(b, m, k) * b(b, n, k) with an optional epilogue, in
    config's tiles and blocks (resolved: gemm_config.resolve_gemm).

    a_layout ("mk" / "km") orders the A packing loops; b_layout ("nk" / "kn") no longer
    changes anything (B is packed a vector across NR columns per k either way), kept for the
    callers in the conv schedules.

    a_rows = (address(b, i, kk), lda) says A's rows lie lda floats apart with k contiguous:
    whole row tiles then read A in place (the `_rows` micro-kernel) and only the last,
    partial row tile is packed (once per K block, zero padded). Packing A cost 4-9% of a
    128 x 768 (3072) @ 768 (3072) x 768 product. prefetch_a > 0 (with a_rows): each row
    tile also prefetches into L2 the one read prefetch_a tiles later (`_rows_pf`,
    next_row_tile), for an A that arrives cold (constant weights read once a run); on a
    BERT-style encoder's activations, already in cache, it cost 3%.

    in_place (one K block only: in_place_applicable): every tile goes through the scratch
    tile and the epilogue writes each element of C once, never reading C, so an epilogue
    input may share C's storage (mark_epilogue's in_place); otherwise whole tiles land in
    C and the epilogue rereads them there.

    ldc: the distance in floats between rows of C (n unless out_index spreads them, as an
    output whose heads are merged back into the hidden axis does)."""
    if m == 0 or n == 0:
        return seq()
    vw = config.vector_width
    MR, NR = config.tile()  # noqa: N806
    if MR == 12:  # rows_per_tile: the 12-row tile reads packed A only
        a_rows = None
    nt = ceil_div(n, NR)
    nb, kc = k_blocks(k, config.k_block)
    kp = nb * kc
    mtb = min(block_rows(kc, MR, config) // MR, ceil_div(m, MR))
    mc = mtb * MR
    mb = ceil_div(m, mc)
    bp = b_packed if b_packed is not None else Buffer(f"{name}_bpack", (nt, kp, NR), F32)
    if b_packed is not None and tuple(b_packed.shape) != (nt, kp, NR):
        raise ValueError(f"gemm: packed B {b_packed.shape} != expected {(nt, kp, NR)}")
    ap = Buffer(f"{name}_apack", (mtb, kc, MR) if a_rows is None else (1, kc, MR), F32)
    tile = Buffer(f"{name}_tile", (MR, NR), F32)
    bvars = [var(f"{name}_b{d}") for d in range(len(batch))]
    bidx = tuple(bvars)
    nbatch = 1
    for ext in batch:
        nbatch *= ext
    # batches in parallel when there are enough of them (each task packs its own panels);
    # else the loops inside one product split
    threads = options.parallel.contraction(nbatch * m * n * k, nbatch * (m * k + n * k + m * n))
    parallel_batch = nbatch >= config.parallel_batches and threads > 1
    pack_threads = 1 if parallel_batch or b_packed is not None else \
        options.parallel.threads(nbytes=8 * n * k)
    if out_index is None:
        out_index = lambda b, i, j: (*b, i, j)  # noqa: E731
    ldc = n if ldc is None else ldc

    # ---- pack B: Bp[jt, kk, v] = B(n = jt*16 + v, kk), zero padded
    jt, kk, vv = var(f"{name}_pj"), var(f"{name}_pk"), var(f"{name}_pv")
    nn = jt * NR + vv
    if k == 0 or b_packed is not None:
        pack_b = seq()
    else:  # per k, NR consecutive n: contiguous when B is [K, N]; when B's rows are
        # contiguous along k ("nk") a vector gather down NR rows, with contiguous stores. (The
        # other loop order, along each row, stored scalars NR floats apart: one thread, CPU
        # time, [12, 128, 64] @ [12, 128, 64]^T 0.224 -> 0.203 ms, [128, 768] @ [3072, 768]^T
        # 5.39 -> 4.56 ms, [7, 33, 40] @ [7, 50, 40]^T 0.029 -> 0.023 ms.)
        val = b_load(bidx, nn, kk)
        if n % NR:
            val = if_then_else(lt(nn, n), val, zero())
        pack_b = parallel_loop(jt, nt, For(kk, k, For(vv, NR, Store(bp, (jt, kk, vv), val),
                                              "vectorized")), pack_threads)
    if kp > k and b_packed is None:
        kt = var(f"{name}_pkt")
        pack_b = seq(pack_b, For(jt, nt, For(kt, kp - k, For(vv, NR, Store(
            bp, (jt, kt + k, vv), zero()), "vectorized"))))

    # ---- per (pc, ic): pack A block
    pc, ic = var(f"{name}_pc"), var(f"{name}_ic")
    it, rr, ka = var(f"{name}_ai"), var(f"{name}_ar"), var(f"{name}_ak")
    mm = ic * mc + it * MR + rr
    kg = pc * kc + ka
    aval = a_load(bidx, mm, kg)
    conds = []
    if kp > k:
        conds.append(lt(kg, k))
    if mb * mc > m:
        conds.append(lt(mm, m))
    if conds:
        c = conds[0] if len(conds) == 1 else logical_and(conds[0], conds[1])
        aval = if_then_else(c, aval, zero())
    if a_layout == "mk":
        pack_a = For(it, mtb, For(rr, MR, For(ka, kc, Store(ap, (it, ka, rr), aval))))
    else:
        pack_a = For(it, mtb, For(ka, kc, For(rr, MR, Store(ap, (it, ka, rr), aval))))

    # ---- micro tiles
    jt2, it2 = var(f"{name}_jt"), var(f"{name}_it")
    m0 = ic * mc + it2 * MR
    n0 = jt2 * NR
    accumulate = cast(gt(pc, 0), I64) if nb > 1 else imm(0)
    last = eq(pc, nb - 1) if nb > 1 else None
    kern = Gemm(MR, NR, vw)
    a_ptr = addr(ap, it2, 0, 0)
    b_ptr = addr(bp, jt2, pc * kc, 0)
    # the micro-kernel prefetches the next N panel's block into L2 as it reads this one
    b_next = addr(bp, select(lt(jt2, nt - 1), jt2 + 1, jt2) if nt > 1 else jt2, pc * kc, 0)

    ti, tj = var(f"{name}_ti"), var(f"{name}_tj")
    cidx = out_index(bidx, m0 + ti, n0 + tj)
    c_ptr = addr(out, *out_index(bidx, m0, n0))
    if a_rows is None:
        full = ukr_call(kern, kc, a_ptr, b_ptr, c_ptr, ldc, accumulate, b_next)
    else:  # A in place: the K block's real depth (B's zero padding rows are skipped)
        row_addr, lda = a_rows
        depth = imm(kc) if kp == k else select(lt(pc, nb - 1), imm(kc), imm(k - (nb - 1) * kc))
        kern_rows = GemmRows(MR, NR, vw, prefetch_rows=bool(prefetch_a))
        a_next = (next_row_tile(row_addr, bidx, batch, m0, pc * kc, m, MR, nb, prefetch_a),) \
            if prefetch_a else ()
        full = ukr_call(kern_rows, depth, row_addr(bidx, m0, pc * kc), lda, b_ptr, c_ptr, ldc,
                        accumulate, b_next, *a_next)
        # the partial row tile (rows m_full..m-1, if any) packed once per K block, zero padded
        m_full = m // MR * MR
        rt, kt = var(f"{name}_er"), var(f"{name}_ek")
        kg_t = pc * kc + kt
        conds_t = [lt(m_full + rt, m)] + ([lt(kg_t, k)] if kp > k else [])
        c_t = conds_t[0] if len(conds_t) == 1 else logical_and(*conds_t)
        pack_partial = seq() if m == m_full else For(rt, MR, For(kt, kc, Store(
            ap, (imm(0), kt, rt), if_then_else(c_t, a_load(bidx, m_full + rt, kg_t), zero()))))
    if in_place:
        if nb > 1:
            raise ValueError(f"gemm {name}: in place needs one K block, k={k} takes {nb}")
        to_tile = ukr_call(kern, kc, a_ptr, b_ptr, addr(tile, 0, 0), NR, 0, b_next) \
            if a_rows is None else ukr_call(kern_rows, depth, row_addr(bidx, m0, pc * kc),
                                            lda, b_ptr, addr(tile, 0, 0), NR, 0, b_next,
                                            *a_next)
        value = Load(tile, (ti, tj), F32)
        full = seq(to_tile, For(ti, MR, For(tj, NR, Store(
            out, cidx, value if epilogue is None else epilogue(value, cidx)), "vectorized")))
    elif epilogue is not None:
        cur = Load(out, cidx, F32)
        epi = For(ti, MR, For(tj, NR, Store(out, cidx, epilogue(cur, cidx)), "vectorized"))
        full = seq(full, epi if last is None else IfThenElse(last, epi))
    # edge: scratch tile, guarded merge
    tval = Load(tile, (ti, tj), F32)
    if nb > 1:
        tval = tval + select(gt(pc, 0), Load(out, cidx, F32), zero())
    store = Store(out, cidx, tval)
    if epilogue is not None:
        fin = Store(out, cidx, epilogue(tval, cidx))
        store = fin if last is None else IfThenElse(last, fin, store)
    # the edge tile's rows and columns inside C: the columns a static count in each branch, so
    # the store loop vectorises (a bounds test per element made edge tiles scalar)
    def edge_rows(cols: int) -> Stmt:
        return For(ti, MR, IfThenElse(lt(m0 + ti, m), For(tj, cols, store, "vectorized")))

    edge_store = edge_rows(NR) if n % NR == 0 else \
        IfThenElse(lt(n0 + (NR - 1), n), edge_rows(NR), edge_rows(n % NR))
    edge_call = ukr_call(kern, kc, a_ptr, b_ptr, addr(tile, 0, 0), NR, 0, b_next)
    if a_rows is not None:  # whole rows at a column edge read A in place, the partial tile ap
        rows_call = ukr_call(kern_rows, depth, row_addr(bidx, m0, pc * kc), lda, b_ptr,
                             addr(tile, 0, 0), NR, 0, b_next, *a_next)
        edge_call = rows_call if m == m_full else IfThenElse(
            lt(m0 + (MR - 1), m), rows_call, ukr_call(kern, kc, addr(ap, 0, 0, 0), b_ptr,
                                                      addr(tile, 0, 0), NR, 0, b_next))
    edge = seq(edge_call, edge_store)
    is_full = []
    if m % MR or mb * mc > m:
        is_full.append(lt(m0 + (MR - 1), m))
    if n % NR:
        is_full.append(lt(n0 + (NR - 1), n))
    if not is_full:
        tile_stmt = full
    else:
        cond = is_full[0] if len(is_full) == 1 else logical_and(*is_full)
        tile_stmt = IfThenElse(cond, full, edge)
    if mb * mc > m:  # the last M block has tiles past the end
        tile_stmt = IfThenElse(lt(m0, m), tile_stmt)
    # parallel: the N panels of the micro tiles (or the M tiles when there are more), each
    # task with its own edge tile; A and B packing split the same way
    # (one parallel region a block: its threads from the block's work)
    rows = min(mc, m)
    par = 1 if parallel_batch else options.parallel.contraction(
        rows * n * kc, rows * kc + n * kc + rows * n)
    tiles_in = lambda body: Allocate(tile, body)  # noqa: E731
    if nt >= mtb:
        micro = parallel_loop(jt2, nt, tiles_in(For(it2, mtb, tile_stmt)), par)
    else:
        micro = parallel_loop(it2, mtb, tiles_in(For(jt2, nt, tile_stmt)), par)
    pack_a = parallel_loop(it, pack_a.extent, pack_a.body, par) if a_rows is None else pack_partial
    body = For(pc, nb, For(ic, mb, seq(pack_a, micro)))
    if k == 0:  # C = epilogue(0)
        ci, cj = var(f"{name}_zi"), var(f"{name}_zj")
        zidx = out_index(bidx, ci, cj)
        val = zero() if epilogue is None else epilogue(zero(), zidx)
        body = For(ci, m, For(cj, n, Store(out, zidx, val), "vectorized"))
    stmt = seq(pack_b, body)
    scratch = (ap,) + ((bp,) if b_packed is None else ())
    if parallel_batch:  # per-task packing buffers
        for buf in scratch:
            stmt = Allocate(buf, stmt)
        return fused_parallel(bvars, list(batch), stmt, f"{name}_b", threads)
    for bv, ext in reversed(list(zip(bvars, batch))):
        stmt = loop(bv, ext, stmt)
    for buf in scratch:
        stmt = Allocate(buf, stmt)
    return stmt


def in_place_applicable(k: int, config: GemmConfig) -> bool:
    """Whether gemm_stmt can run in place over a reduction of k (one K block)."""
    return k_blocks(k, config.k_block)[0] == 1


def next_row_tile(row_addr, bidx: tuple, batch: tuple, m0: Expr, k0: Expr, m: int, mr: int,
                  nb: int, ahead: int = 1) -> Load:
    """Where the row tile `ahead` whole tiles after rows m0..m0+mr-1 (columns from k0) starts,
    counting on into the next batches (one batch dim, one K block) and stopping at the last
    whole tile. Every address stays inside A's rows and read columns."""
    tiles = m // mr  # whole row tiles a product (the partial one is packed, never read here)
    t = floordiv(m0, imm(mr)) + ahead
    if len(batch) != 1 or batch[0] < 2 or nb != 1:
        return row_addr(bidx, select(lt(t, tiles), t, imm(tiles - 1)) * mr, k0)
    t = bidx[0] * tiles + t
    t = select(lt(t, batch[0] * tiles), t, imm(batch[0] * tiles - 1))
    return row_addr((floordiv(t, imm(tiles)),), floormod(t, imm(tiles)) * mr, k0)


def _vector_attrs(vw: int) -> dict:
    """LLVM's loops (fused epilogues, packing, edge tiles) at the micro-kernel's vector width:
    at its default 256 bits on AVX-512 a GRU's gate epilogue ran in half vectors (one thread,
    CPU time, same-process A/B: GRU 0.93-0.96x, GPT-2-style decoder 0.99x, MLP at batch 1
    0.92x, BERT-style encoder, LSTM, MLP at batch 32 level)."""
    return {"prefer_vector_width": 32 * vw}
