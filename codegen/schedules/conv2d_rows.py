"""The rows algorithms of the NCHW conv2d schedules (codegen.schedules.conv2d): output pixels
as vectors and output channels broadcast (TVM's NCHW direct conv the other way round), through
the convrows micro-kernel; tiles of rows_channels channels x rows_vectors pixel vectors x
rows_stack output rows (Conv2dConfig), stored straight into NCHW rows (no transpose).
"""
from __future__ import annotations

from ..llvm.microkernels.descriptors import ConvRows
from ..options import CodegenOptions
from ..parallel import fused_parallel
from ..tir.expr import Load
from ..tir.ops import floordiv, floormod, ge, if_then_else, logical_and, lt
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import F32, addr, ceil_div, imm, ukr_call, var, zero
from .conv2d_config import Conv2dConfig
from .conv2d_direct import padded_plane_row


def store_tile(tile: Buffer, out: Buffer, index, k0, k: int, width: int, epilogue,
                name: str, column0: int = 0) -> Stmt:
    """A rows tile T[kc][span] (from column column0 on) into the output: channel k0 + v's
    first `width` pixels at index(v, j), through the epilogue; a static width, so the vector
    loop has no bounds test (one made the stores scalar)."""
    v, j = var(f"{name}_v"), var(f"{name}_j")
    idx = index(v, j)
    value = Load(tile, (v, column0 + j), F32)
    if epilogue is not None:
        value = epilogue(value, idx)
    row: Stmt = For(j, width, Store(out, idx, value), "vectorized")
    kc = tile.shape[0]
    if k % kc:
        row = IfThenElse(lt(k0 + v, k), row)
    return For(v, kc, row)


def rows_stmt(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str,
              options: CodegenOptions, config: Conv2dConfig) -> Stmt:
    """The rows algorithm: a tile is rows_channels channels x rows_vectors vectors of one
    output row, or x one vector of rows_stack rows (each broadcast weight then feeds a vector
    of each row). The padded input is first split into stride phases, so every tap reads
    contiguous pixels at any stride: Xph[c][py][px][i][j] = xpad[c][i*sh + py][j*sw + px]."""
    vw = config.vector_width
    c, r, s, k, kb = g["c"], g["r"], g["s"], g["k"], wb.shape[-1]
    sh, sw, dh, dw, oh, ow = g["sh"], g["sw"], g["dh"], g["dw"], g["oh"], g["ow"]
    kcn, stack = config.rows_channels, config.rows_stack
    span = config.rows_vectors * vw
    chunks = ceil_div(ow, span)
    nv = stack if stack > 1 else config.rows_vectors  # the micro-kernel's vectors
    groups = ceil_div(oh, stack)  # of output rows, a tile each per column chunk
    hq = groups * stack + (r - 1) * dh // sh
    wq = chunks * span + (s - 1) * dw // sw
    xph = Buffer(f"{name}_xph", (c, sh, sw, hq, wq), F32)
    ni = var(f"{name}_n")
    ci, qi = var(f"{name}_xc"), var(f"{name}_xi")
    phases = []
    for py in range(sh):  # the phases unrolled: each row's bounds are then static
        ih = qi * sh + py - g["pt"]
        for px in range(sw):
            phases.append(padded_plane_row(
                lambda q, v, py=py, px=px: Store(xph, (ci, imm(py), imm(px), qi, q), v),
                lambda col, ih=ih: Load(xb, (ni, ci, ih, col), F32),
                logical_and(ge(ih, 0), lt(ih, g["h"])), wq, sw, px - g["pl"], g["w"],
                f"{name}_x{py}_{px}"))
    fill = options.parallel.copy_loops([ci, qi], [c, hq], seq(*phases), c * sh * sw * hq * wq,
                                       f"{name}_fill")
    nkc = ceil_div(k, kcn)
    tile = Buffer(f"{name}_tile", (kcn, stack * span), F32)
    kc, oi = var(f"{name}_kc"), var(f"{name}_oh")
    k0 = kc * kcn
    kernel = ConvRows(kcn, nv, vw, c, r, s, 1, kb, sh, sw, dh, dw, hq, wq, stack > 1)

    def tile_of(ch, width: int, tag: str) -> Stmt:
        """The tile at column ch * span: the micro-kernel, then its first `width` columns
        (of each of its rows) stored through the epilogue."""
        call = ukr_call(kernel,
                        addr(wb, 0, floordiv(k0, kb), 0, 0, 0, floormod(k0, kb)),
                        addr(tile, 0, 0), addr(xph, 0, 0, 0, oi * stack, ch * span))
        stores = []
        for q in range(stack):
            row = oi * stack + q
            store = store_tile(tile, out,
                                lambda v, j, row=row: (ni, k0 + v, row, ch * span + j),
                                k0, k, width, epilogue, f"{name}_{tag}{q}", q * span)
            stores.append(IfThenElse(lt(row, oh), store) if oh % stack and q else store)
        return seq(call, *stores)

    ch = var(f"{name}_ch")
    last = ow - (chunks - 1) * span
    body = Allocate(tile, seq(For(ch, chunks - 1, tile_of(ch, span, "f")) if chunks > 1
                              else None, tile_of(imm(chunks - 1), last, "l")))
    threads = options.parallel.contraction(k * oh * ow * c * r * s,
                                           k * c * r * s + c * g["h"] * g["w"] + k * oh * ow)
    par = fused_parallel([kc, oi], [nkc, groups], body, name, threads) \
        if threads > 1 else For(kc, nkc, For(oi, groups, body))
    return Allocate(xph, For(ni, g["n"], seq(fill, par)))


def pointwise_rows_stmt(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str,
                        options: CodegenOptions, config: Conv2dConfig) -> Stmt:
    """A 1x1 stride-1 unpadded conv through the rows micro-kernel over the flattened pixels:
    its input planes are read in place (no phase copy, no GEMM packing of the activations);
    only the last, partial tile's pixels are copied into zero-padded scratch, once per image
    before the channel blocks read it, so no vector load passes the end of the input.
    (8 channels a tile by default: 16 measured worse here, 16->96 at 112x112: 0.32 -> 0.36
    ms, 128->16 at 55x55 0.108 -> 0.117.)"""
    vw, kcn, nv = config.vector_width, config.rows_channels, config.rows_vectors
    c, k, kb, npix = g["c"], g["k"], wb.shape[-1], g["oh"] * g["ow"]
    span = nv * vw
    chunks = ceil_div(npix, span)
    last = npix - (chunks - 1) * span
    nkc = ceil_div(k, kcn)
    tile = Buffer(f"{name}_tile", (kcn, span), F32)
    tail = Buffer(f"{name}_tail", (c, span), F32)
    ni, kc, ch = var(f"{name}_n"), var(f"{name}_kc"), var(f"{name}_ch")
    k0 = kc * kcn
    w_ptr = addr(wb, 0, floordiv(k0, kb), 0, 0, 0, floormod(k0, kb))

    def pixel(p):
        return floordiv(p, g["ow"]), floormod(p, g["ow"])

    def tile_at(x_ptr, plane: int, width: int, tag: str) -> Stmt:
        kernel = ConvRows(kcn, nv, vw, c, 1, 1, 1, kb, 1, 1, 1, 1, 1, plane)
        return seq(ukr_call(kernel, w_ptr, addr(tile, 0, 0), x_ptr),
                   store_tile(tile, out, lambda v, j: (ni, k0 + v, *pixel(ch * span + j)),
                               k0, k, width, epilogue, f"{name}_{tag}"))

    full = tile_at(addr(xb, ni, 0, *pixel(ch * span)), npix, span, "f")
    copy = None
    if last < span:
        cc, jj = var(f"{name}_tc"), var(f"{name}_tj")
        p = (chunks - 1) * span + jj
        copy = For(cc, c, For(jj, span, Store(tail, (cc, jj), if_then_else(
            lt(p, npix), Load(xb, (ni, cc, *pixel(p)), F32), zero())), "vectorized"))
        body: Stmt = IfThenElse(lt(ch, chunks - 1), full,
                                tile_at(addr(tail, 0, 0), span, last, "l"))
    else:
        body = full
    body = Allocate(tile, body)
    loops, extents = ([ch, kc], [chunks, nkc]) if config.chunks_outer \
        else ([kc, ch], [nkc, chunks])
    threads = options.parallel.contraction(k * npix * c, k * c + c * npix + k * npix)
    par = fused_parallel(loops, extents, body, name, threads) if threads > 1 \
        else For(loops[0], extents[0], For(loops[1], extents[1], body))
    stmt = For(ni, g["n"], seq(copy, par))
    return Allocate(tail, stmt) if copy is not None else stmt

