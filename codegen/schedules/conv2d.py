"""conv2d NCHW / OIHW float32: the direct family of schedules, in the algorithm, tiles and blocks
its Conv2dConfig names (codegen.schedules.conv2d_config: the default configuration).

out[n, k, oh, ow] = sum_{c, r, s} x[n, g*Cg + c, oh*sh + r*dh - pt, ow*sw + s*dw - pl]
                                  * w[k, c, r, s]                 (g = k // Kg)

direct (any groups, stride, padding, dilation; conv2d_direct):

    pack weights Wp[g][Kg/KB][Cg][R][S][KB]          (zero padded channels; parallel; skipped
                                                     for a weight packed at compile time)
    for n:
      pad x[n] into Xp[C][Hp][Wp] (skipped when there is no padding; parallel over C)
      parallel for (g, pixel block, kb in Kg/KB):    (each task its own accumulator block)
        for pixel tile t (P consecutive flattened output pixels, any row crossing):
          x_j = &Xp[g*Cg, oh_j*sh, ow_j*sw]         (one base pointer per pixel)
          micro-kernel: P x KB accumulators (6 x 2 <8 x float> with AVX2), loop over c with
                        the R*S taps unrolled: KB/VW weight vector loads + P broadcasts;
                        prefetches its slice of the next weight block into L2
        tiles T[P][KB] -> out[n, k, oh_j, ow_j] with the fused epilogue (cache hot)

    With row_tile a tile is P pixels of one row, and the micro-kernel broadcasts each input
    value once for all the taps reading it; 1x1 convs onto many channels read a pixel-major
    copy of their input (pixel_major).
rows, pointwise_rows (packed weights; conv2d_rows): output pixels as vectors, channels
    broadcast; for short reductions and few output channels.
gemm (1x1, stride 1, unpadded): one GEMM per image and group over NCHW's pixel rows.

Depthwise convs (Cg == 1) have a schedule of their own (window.depthwise_conv2d_nchw).
"""
from __future__ import annotations

from dataclasses import replace

from .. import te
from ..options import CodegenOptions
from ..tir.expr import Load
from ..tir.ops import floordiv, floormod
from ..tir.stmt import Buffer, Stmt
from .common import F32, ceil_div, imm, mark_epilogue
from .conv2d_config import Conv2dConfig, conv_geometry, resolve_conv2d, rows_pay
from .conv2d_direct import direct_stmt
from .conv2d_rows import pointwise_rows_stmt, rows_stmt
from .gemm import gemm_stmt, in_place_applicable


def conv2d_nchw_packed(x: te.Tensor, wp: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0),
                       dilation=(1, 1), groups: int = 1, channels: int | None = None,
                       name: str = "T_conv2d", *, options: CodegenOptions,
                       config: Conv2dConfig | None = None) -> te.Tensor:
    """conv2d_nchw on a weight pre-packed per conv2d_pack_geometry in the configuration's
    channel blocks (no run-time packing). Like every schedule entry point it resolves a
    partial configuration (conv2d_config.resolve_conv2d); the block defaults to the weight's."""
    g_, nkb, cg, r, s, kb = wp.shape
    k = channels
    if g_ != groups or k is None or k % groups or ceil_div(k // groups, kb) != nkb:
        raise ValueError(f"conv2d_nchw_packed: packed weight {wp.shape} does not fit "
                         f"channels={k}, groups={groups}")
    config = replace(config or Conv2dConfig(), channel_block=(config and config.channel_block)
                     or kb)
    if kb != config.channel_block:
        raise ValueError(f"conv2d_nchw_packed: the weight is packed in blocks of {kb} output "
                         f"channels, the configuration reads blocks of {config.channel_block}")
    return _conv(x, wp, (k, cg, r, s), strides, padding, dilation, groups, name, options,
                 config, packed=True)


def conv2d_nchw(x: te.Tensor, w: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0),
                dilation=(1, 1), groups: int = 1, name: str = "T_conv2d", *,
                options: CodegenOptions, config: Conv2dConfig | None = None) -> te.Tensor:
    """NCHW conv2d with an OIHW weight (packed at run time); padding is (top, left, bottom,
    right)."""
    return _conv(x, w, w.shape, strides, padding, dilation, groups, name, options, config,
                 packed=False)


def _conv(x: te.Tensor, w: te.Tensor, wshape, strides, padding, dilation, groups: int,
          name: str, options: CodegenOptions, config: Conv2dConfig, packed: bool
          ) -> te.Tensor:
    geo = conv_geometry(x.shape, wshape, strides, padding, dilation, groups)
    config = resolve_conv2d(geo, packed, options, config)
    # in_place: the tile schedules store each output element once, from their tile through
    # the epilogue, so a residual the epilogue adds may share the output's storage; so does
    # the GEMM over one K block (over more it accumulates in the output)
    in_place = True
    if config.algorithm == "gemm":
        in_place = in_place_applicable(geo["cg"], config.gemm)

    def fcompute(ins, outs, epilogue=None):
        xb, wb, out = ins[0], ins[1], outs[0]
        if config.algorithm == "direct":
            return direct_stmt(xb, wb, out, geo, epilogue, name, options, config, packed)
        if config.algorithm == "rows":
            return rows_stmt(xb, wb, out, geo, epilogue, name, options, config)
        if config.algorithm == "pointwise_rows":
            return pointwise_rows_stmt(xb, wb, out, geo, epilogue, name, options, config)
        return _pointwise_gemm(xb, wb, out, geo, epilogue, name, options, config, packed,
                               in_place)

    # its padded copies, edge tiles and epilogue vectorise at the micro-kernel's width: LLVM
    # prefers 256-bit loops on AVX-512 CPUs, and 512 made MobileNet-v2 8-11% faster
    return te.extern((geo["n"], geo["k"], geo["oh"], geo["ow"]), [x, w],
                     mark_epilogue(fcompute, in_place), name=name,
                     kernel_attrs={"prefer_vector_width": 32 * config.vector_width})


def _pointwise_gemm(xb: Buffer, wb: Buffer, out: Buffer, g: dict, epilogue, name: str,
                    options: CodegenOptions, config: Conv2dConfig, packed: bool,
                    in_place: bool) -> Stmt:
    """A 1x1 conv through the GEMM schedule, one product per (image, group):
    C[Kg, pixels] = W[g][Kg, Cg] . x[n][g][Cg, pixels], whose rows are NCHW's channel planes,
    so tiles and their fused epilogue store whole vectors along the pixels (the direct
    schedule's tiles are channel vectors, stored a plane apart)."""
    kg, cg, ow = g["kg"], g["cg"], g["ow"]
    npix = g["oh"] * ow
    if packed:
        kb = wb.shape[-1]
        a_load = lambda b, i, j: Load(  # noqa: E731 - Wp[g, k // KB, c, 0, 0, k % KB]
            wb, (b[1], floordiv(i, kb), j, imm(0), imm(0), floormod(i, kb)), F32)
    else:
        a_load = lambda b, i, j: Load(  # noqa: E731 - w[g*Kg + k, c, 0, 0]
            wb, (b[1] * kg + i, j, imm(0), imm(0)), F32)
    b_load = lambda b, i, j: Load(  # noqa: E731 - x[n][g*Cg + c][pixel]
        xb, (b[0], b[1] * cg + j, floordiv(i, ow), floormod(i, ow)), F32)
    out_index = lambda b, i, j: (  # noqa: E731
        b[0], b[1] * kg + i, floordiv(j, ow), floormod(j, ow))
    return gemm_stmt(kg, npix, cg, (g["n"], g["g"]), a_load, b_load, out, "mk", "kn",
                     epilogue, name, options, config.gemm, out_index=out_index,
                     in_place=in_place)


def conv_rows_stmt(xb: Buffer, wb: Buffer, out: Buffer, g: dict, name: str,
                   options: CodegenOptions, given: Conv2dConfig | None = None) -> Stmt:
    """The output rows of geometry g (conv_geometry; a packed weight, groups 1, a window wider
    than one tap) through the rows or direct algorithm, with no epilogue: conv_pool computes
    the strips of a conv's output this way. `given` (partial) fields of the configuration are
    kept; the algorithm is rows where it pays (conv2d_config.rows_pay), else direct. Both
    read the input through their own padded copy, whose row offset -g["pt"] may then be an
    expression (the strip's first row); a strip that needs no copy (the whole unpadded input)
    must start at row 0 (a static pt of 0)."""
    if g["g"] != 1 or g["r"] * g["s"] == 1:
        raise ValueError(f"conv_rows_stmt: groups {g['g']} and a {g['r']}x{g['s']} window; "
                         f"expected groups 1 and a window wider than one tap")
    if (g["hp"], g["wp"]) == (g["h"], g["w"]) and not (isinstance(g["pt"], int) and g["pt"] == 0):
        raise ValueError("conv_rows_stmt: an unpadded strip of the whole input must start at row 0")
    given = given or Conv2dConfig()
    kb = wb.shape[-1]
    vw = given.vector_width or options.vector_width
    algorithm = given.algorithm or ("rows" if rows_pay(g, kb, vw) else "direct")
    if algorithm not in ("rows", "direct"):
        raise ValueError(f"conv_rows_stmt: algorithm {algorithm!r}; a strip runs rows or direct")
    config = resolve_conv2d(g, True, options, replace(given, algorithm=algorithm,
                                                      channel_block=kb, gemm=None))
    if algorithm == "rows":
        return rows_stmt(xb, wb, out, g, None, name, options, config)
    return direct_stmt(xb, wb, out, g, None, name, options, config, packed=True)
