"""conv2d (packed weight, NCHW) then a max pool of its output, in strips of output rows: each
strip of conv rows goes into scratch that stays in the core's L2 and is pooled right away.

A CNN stem (SqueezeNet's 3->64 3x3/2 conv, ResNet-50's 7x7/2) writes a 3.2 MB activation that
its 3x3/2 max pool reads back from L3; pooled strip by strip, neither the conv's stores nor the
pool's loads leave L2. Per strip of m pool rows starting at pool row a:

    conv rows c0 = a*ps - pt_pool ... c0 + (m-1)*ps + kh - 1  ->  scratch S[n][K][R][OWc]
        (conv2d.conv_rows_stmt: the _rows or _direct schedule with its input offset by c0)
    rows of S outside the conv's output (the pool's top/bottom padding) = -inf
    out[n, k, a + i, j] = max over the window of S at (i, j), through the epilogue
        (window.window_stmt, its columns padded as the pool's)

Neighbouring strips share kh - ps conv rows, which each computes again (one row of 19 for a
3x3/2 pool over SCRATCH_BYTES of 64@111 rows).
"""
from __future__ import annotations

from .. import te
from ..tir.ops import const, logical_or, lt
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import F32, mark_epilogue, var, vector_width
from .conv2d import conv_rows_stmt
from .window import _max_with_nan, window_stmt

# Bytes of conv output a strip computes (per image) at most: about a quarter of a 2 MB L2, so
# the strip, the input rows it reads and the weights stay there
SCRATCH_BYTES = 512 * 1024


def strip_pool_rows(k: int, ow_conv: int, pool_rows: int, kh: int, ps: int) -> int:
    """Pool rows a strip: the most whose conv rows ((m-1)*ps + kh of K x OWc floats) fit
    SCRATCH_BYTES, at least one."""
    rows = SCRATCH_BYTES // (4 * k * ow_conv)
    return max(1, min(pool_rows, (rows - kh) // ps + 1))


def conv2d_max_pool_nchw(x: te.Tensor, wp: te.Tensor, strides, padding, dilation,
                         channels: int, pool_size, pool_strides, pool_padding,
                         name: str = "T_conv2d_max_pool") -> te.Tensor:
    """max_pool2d(conv2d_nchw_packed(x, wp)) in strips (module docstring); groups 1; the
    pool's padding smaller than its window, no dilation, no ceil mode."""
    n, c, h, w = x.shape
    groups, _, cg, r, s, _kb = wp.shape
    k = channels
    if groups != 1 or cg != c or r * s == 1:
        raise ValueError(f"conv2d_max_pool_nchw: packed weight {wp.shape} for {c} input "
                         f"channels; expected groups 1, Cg = {c} and a window wider than 1x1")
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    kh, kw = pool_size
    psh, psw = pool_strides
    qt, ql, qb, qr = pool_padding
    ohc = (h + pt + pb - dh * (r - 1) - 1) // sh + 1
    owc = (w + pl + pr - dw * (s - 1) - 1) // sw + 1
    oh = (ohc + qt + qb - kh) // psh + 1
    ow = (owc + ql + qr - kw) // psw + 1
    m = strip_pool_rows(k, owc, oh, kh, psh)
    full, tail = oh // m, oh % m
    # the rows a strip may hold past the conv's output: the pool's top and bottom padding
    masked = qt > 0 or (oh - 1) * psh - qt + kh > ohc
    low = const(float("-inf"), F32)

    def strip(first_pool_row, rows: int, tag: str, xb: Buffer, wb: Buffer, out: Buffer,
              epilogue) -> Stmt:
        """Pool rows [first_pool_row, + rows) from a strip of conv rows in scratch."""
        conv_rows = (rows - 1) * psh + kh
        c0 = first_pool_row * psh - qt
        scratch = Buffer(f"{name}_{tag}_conv", (n, k, conv_rows, owc), F32)
        geo = dict(n=n, c=c, h=h, w=w, k=k, cg=cg, r=r, s=s, sh=sh, sw=sw, dh=dh, dw=dw,
                   pt=pt - c0 * sh, pl=pl, hp=(conv_rows - 1) * sh + (r - 1) * dh + 1,
                   wp=w + pl + pr, oh=conv_rows, ow=owc, g=1, kg=k)
        conv = conv_rows_stmt(xb, wb, scratch, geo, f"{name}_{tag}")
        mask = None
        if masked:
            ni, ki, ri, j = (var(f"{name}_{tag}_m{v}") for v in "nkrj")
            row = c0 + ri
            fill = For(j, owc, Store(scratch, (ni, ki, ri, j), low), "vectorized")
            mask = For(ni, n, For(ki, k, For(ri, conv_rows, IfThenElse(
                logical_or(lt(row, 0), lt(ohc - 1, row)), fill))))
        pool_geo = dict(n=n, k=k, h=conv_rows, w=owc, kh=kh, kw=kw, sh=psh, sw=psw, dh=1, dw=1,
                        pt=0, pl=ql, oh=rows, ow=ow)
        pool = window_stmt(scratch, out, pool_geo, low,
                           lambda taps, _k: _max_with_nan(taps, F32, kw),
                           lambda acc, _k, _oi, _oj: acc, epilogue, f"{name}_{tag}_p",
                           out_row0=first_pool_row)
        return Allocate(scratch, seq(conv, mask, pool))

    def fcompute(ins, outs, epilogue=None):
        xb, wb, out = ins[0], ins[1], outs[0]
        si = var(f"{name}_strip")
        # static first rows where there is no strip loop: the whole input needs no offset then
        body = [For(si, full, strip(si * m, m, "s", xb, wb, out, epilogue)) if full > 1
                else strip(0, m, "s", xb, wb, out, epilogue) if full else None]
        if tail:
            body.append(strip(full * m, tail, "t", xb, wb, out, epilogue))
        return seq(*body)

    return te.extern((n, k, oh, ow), [x, wp], mark_epilogue(fcompute), name=name,
                     kernel_attrs={"prefer_vector_width": 32 * vector_width()})
