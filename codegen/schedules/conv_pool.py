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

Neighbouring strips share kh - ps conv rows. The strips run bottom up, so a strip's shared
rows are the first rows of the strip computed before it: they are moved to the end of the
scratch and the conv computes only the rows above them (carry_rows; one row of 9 for
ResNet-50's stem, whose 7x7 conv rows cost the most: 0.98x -> 0.93x of conv + pool).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .. import te
from ..options import CodegenOptions
from ..tir.expr import Load
from ..tir.ops import const, ge, logical_or, lt
from ..tir.ops import min as tir_min
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from .common import F32, ceil_div, imm, mark_epilogue, var
from .config import ScheduleConfig, pick
from .conv2d import conv_rows_stmt
from .conv2d_config import Conv2dConfig
from .window import WindowConfig, max_with_nan, resolve_window, window_stmt

# Bytes of conv output a strip computes (per image) at most: an eighth of a 2 MB L2, so the
# strip, the input rows it reads and the weights stay there (one thread, CPU time, with
# carry_rows, against conv + pool: 256 KB: SqueezeNet's stem 0.856x, ResNet-50's 0.930x,
# 3->24 3x3/2 at 224 0.851x; 512 KB: 0.860x, 0.930x, 0.874x; 768 KB: 0.889x, 0.933x)
SCRATCH_BYTES = 256 * 1024
# Strips a parallel task runs in turn, carrying rows (the tasks split the output's rows)
GROUP_STRIPS = 2


@dataclass(frozen=True)
class ConvPoolConfig(ScheduleConfig):
    """The strips of conv2d_max_pool_nchw; conv: fields of each strip's conv configuration
    (the rest resolved per strip), pool: the pool's window configuration."""

    nested: ClassVar[dict[str, type]] = {"conv": Conv2dConfig, "pool": WindowConfig}

    scratch_bytes: int | None = None  # conv output a strip computes (per image), at most
    carry_rows: bool | None = None    # a strip takes the rows it shares from the one below
    group_strips: int | None = None   # strips a parallel task runs in turn
    conv: Conv2dConfig | None = None
    pool: WindowConfig | None = None


def resolve_conv_pool(given: ConvPoolConfig | None = None) -> ConvPoolConfig:
    """Given fields, the rest by default (the strips' conv configurations are resolved per
    strip, by conv2d.conv_rows_stmt)."""
    c = given or ConvPoolConfig()
    return ConvPoolConfig(pick(c.scratch_bytes, lambda: SCRATCH_BYTES),
                          pick(c.carry_rows, lambda: True),
                          pick(c.group_strips, lambda: GROUP_STRIPS),
                          pick(c.conv, Conv2dConfig), resolve_window(c.pool))


def strip_pool_rows(k: int, ow_conv: int, pool_rows: int, kh: int, ps: int,
                    scratch_bytes: int) -> int:
    """Pool rows a strip: the most whose conv rows ((m-1)*ps + kh of K x OWc floats) fit
    scratch_bytes, at least one."""
    rows = scratch_bytes // (4 * k * ow_conv)
    return max(1, min(pool_rows, (rows - kh) // ps + 1))


def conv2d_max_pool_nchw(x: te.Tensor, wp: te.Tensor, strides, padding, dilation,
                         channels: int, pool_size, pool_strides, pool_padding,
                         name: str = "T_conv2d_max_pool", *, options: CodegenOptions,
                         config: ConvPoolConfig | None = None) -> te.Tensor:
    """max_pool2d(conv2d_nchw_packed(x, wp)) in strips (module docstring); groups 1; the
    pool's padding smaller than its window, no dilation, no ceil mode."""
    config = resolve_conv_pool(config)
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
    m = strip_pool_rows(k, owc, oh, kh, psh, config.scratch_bytes)
    full, tail = oh // m, oh % m
    # the rows a strip may hold past the conv's output: the pool's top and bottom padding
    masked = qt > 0 or (oh - 1) * psh - qt + kh > ohc
    low = const(float("-inf"), F32)
    # conv rows a strip shares with the strip below it, which computed them first
    shared = max(0, kh - psh) if config.carry_rows else 0
    scratch = Buffer(f"{name}_conv", (n, k, (m - 1) * psh + kh, owc), F32)

    def strip(first_pool_row, rows: int, carried: int, tag: str, xb: Buffer, wb: Buffer,
              out: Buffer, epilogue) -> Stmt:
        """Pool rows [first_pool_row, + rows) from a strip of conv rows in scratch, whose last
        `carried` rows are the first ones of the strip below (moved there first)."""
        conv_rows = (rows - 1) * psh + kh
        fresh = conv_rows - carried
        c0 = first_pool_row * psh - qt
        carry = None
        if carried:  # last rows first: a row moves only onto rows already moved
            ni, ki, ii, j = (var(f"{name}_{tag}_c{v}") for v in "nkij")
            src = carried - 1 - ii
            carry = For(ni, n, For(ki, k, For(ii, carried, For(j, owc, Store(
                scratch, (ni, ki, fresh + src, j), Load(scratch, (ni, ki, src, j), F32)),
                "vectorized"))))
        geo = dict(n=n, c=c, h=h, w=w, k=k, cg=cg, r=r, s=s, sh=sh, sw=sw, dh=dh, dw=dw,
                   pt=pt - c0 * sh, pl=pl, hp=(fresh - 1) * sh + (r - 1) * dh + 1,
                   wp=w + pl + pr, oh=fresh, ow=owc, g=1, kg=k)
        conv = conv_rows_stmt(xb, wb, scratch, geo, f"{name}_{tag}", options, config.conv)
        mask = None
        if masked:
            ni, ki, ri, j = (var(f"{name}_{tag}_m{v}") for v in "nkrj")
            row = c0 + ri
            fill = For(j, owc, Store(scratch, (ni, ki, ri, j), low), "vectorized")
            mask = For(ni, n, For(ki, k, For(ri, fresh, IfThenElse(
                logical_or(lt(row, 0), lt(ohc - 1, row)), fill))))
        pool_geo = dict(n=n, k=k, h=conv_rows, w=owc, kh=kh, kw=kw, sh=psh, sw=psw, dh=1, dw=1,
                        pt=0, pl=ql, oh=rows, ow=ow)
        pool = window_stmt(scratch, out, pool_geo, low,
                           lambda taps, _k: max_with_nan(taps, F32, kw),
                           lambda acc, _k, _oi, _oj: acc, epilogue, f"{name}_{tag}_p",
                           options, config.pool, out_row0=first_pool_row)
        return seq(carry, conv, mask, pool)

    group_strips = config.group_strips
    groups = ceil_div(full, group_strips)

    def fcompute(ins, outs, epilogue=None):
        """The tail strip (fewer rows) first; then groups of group_strips whole strips in
        parallel, each with its own scratch, bottom up: a group's last strip computes all
        its conv rows, each strip above takes `shared` rows from it. (The strips' own conv
        and pool loops, nested in a task, run serially: a serial strip loop left one thread
        idle, 0.50 -> 0.53 ms for SqueezeNet's stem at two threads.)"""
        args = (ins[0], ins[1], outs[0], epilogue)
        gi, j = var(f"{name}_group"), var(f"{name}_strip")
        tail_strip = Allocate(scratch, strip(full * m, tail, 0, "t", *args)) if tail else None
        if groups == 1:  # static rows (a strip of the whole unpadded input needs no offset)
            last, first = full - 1, 0
        else:
            last = tir_min((gi + 1) * group_strips, imm(full)) - 1  # the group's bottom strip
            first = gi * group_strips
        above = last - 1 - j
        group = Allocate(scratch, seq(
            strip(last * m, m, 0, "l", *args),
            For(j, min(group_strips, full) - 1, IfThenElse(
                ge(above, first), strip(above * m, m, shared, "s", *args)))
            if min(group_strips, full) > 1 else None))
        return seq(tail_strip, For(gi, groups, group, "parallel") if groups > 1 else group)

    return te.extern((n, k, oh, ow), [x, wp], mark_epilogue(fcompute), name=name,
                     kernel_attrs={"prefer_vector_width": 32 * options.vector_width})
