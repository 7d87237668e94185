"""conv2d through relay.build (AlterOpLayout packs the constant weight, bias + relu fused) vs
numpy, over the shapes where the schedule choice changes (codegen.schedules.conv2d): 1x1 convs
onto few output channels run the rows micro-kernel (_pointwise_rows) whatever their input
channels, with the pixel chunks as the outer loop when they read more channels than they write
or their output stays in L2 (POINTWISE_HOT_OUTPUT_BYTES); their neighbours (grouped, strided,
padded, output size 1, 32+ output channels) keep the other schedules. The _rows tiles of short
reductions hold 16 output channels on AVX-512 where 16 divide the channels (8 otherwise); the
direct tiles over at most SHORT_REDUCTION taps hold 8 pixels on AVX-512 (12 otherwise), and
tiles of at most half a vector of pixels transpose two channels a vector (conv micro-kernel).
Padded copies of the input copy each row's inside columns as one plain loop (common.padded_row)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import runtime
from codegen import te
from codegen.jit import build_te
from codegen.lower import lower
from codegen.schedules import conv2d_nchw_packed
from codegen.schedules import conv2d_config
from codegen.schedules.conv2d_config import PB, channel_block, pixels_per_tile
from compiler import relay
from compiler.transform import PassContext
from runtime import graph_executor

from tests.schedule_helpers import conv_pack, eager, host

RNG = np.random.default_rng(5)


def reference(x, w, bias, strides, padding, dilation, groups):
    """relu(conv2d(x, w) + bias) in float64, padding (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x.astype("f8"), ((0, 0), (0, 0), (padding[0], padding[2]),
                                 (padding[1], padding[3])))
    oh = (xp.shape[2] - dilation[0] * (r - 1) - 1) // strides[0] + 1
    ow = (xp.shape[3] - dilation[1] * (s - 1) - 1) // strides[1] + 1
    out = np.zeros((n, k, oh, ow))
    kg = k // groups
    for g in range(groups):
        for rr in range(r):
            for ss in range(s):
                y0, x0 = rr * dilation[0], ss * dilation[1]
                patch = xp[:, g * cg:(g + 1) * cg,
                           y0:y0 + strides[0] * (oh - 1) + 1:strides[0],
                           x0:x0 + strides[1] * (ow - 1) + 1:strides[1]]
                out[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch, w[g * kg:(g + 1) * kg, :, rr, ss])
    return np.maximum(out + bias.reshape(1, k, 1, 1), 0)


CASES = [
    # x shape, w shape, strides, padding (t, l, b, r), dilation, groups
    ((1, 96, 9, 11), (24, 96, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # rows, tail tile
    ((2, 67, 8, 8), (13, 67, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # odd, batch 2
    ((1, 40, 16, 16), (16, 40, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # no tail tile
    ((1, 20, 7, 9), (24, 20, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # writes more than reads
    ((2, 24, 9, 11), (40, 24, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # tail per image
    ((1, 16, 64, 72), (64, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # output > L2 budget
    ((1, 64, 1, 1), (16, 64, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # output size 1
    ((1, 64, 3, 5), (16, 64, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # fewer pixels than a vector
    ((1, 64, 12, 12), (16, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4),  # grouped
    ((2, 48, 11, 13), (20, 48, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),  # strided
    # strided 1x1 direct convs read a subsampled copy (SUBSAMPLE_STRIDED); padded ones do not
    ((1, 130, 9, 7), (70, 130, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ((2, 40, 8, 9), (48, 40, 1, 1), (2, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 40, 10, 10), (48, 40, 1, 1), (3, 3), (1, 1, 1, 1), (1, 1), 1),
    ((1, 48, 10, 10), (20, 48, 1, 1), (1, 1), (1, 0, 1, 2), (1, 1), 1),  # padded
    ((1, 64, 9, 9), (40, 64, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 40 channels: direct
    ((1, 24, 13, 17), (20, 24, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilated 3x3
    # short reductions through the _rows tiles: 16 channels a tile where 16 divide them
    ((2, 3, 37, 41), (32, 3, 3, 3), (2, 2), (0, 1, 1, 0), (1, 1), 1),
    ((1, 3, 20, 33), (48, 3, 5, 5), (2, 1), (2, 2, 2, 2), (1, 2), 1),
    ((1, 3, 19, 35), (24, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),  # 8 a tile
    ((1, 16, 18, 19), (16, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    # the direct tile over short reductions: 8 pixels (143 of them), 7 (a 7x7 output)
    ((1, 16, 13, 11), (40, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 20, 7, 7), (36, 20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 40, 9, 9), (72, 40, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 360 taps: 12 pixels
    ((2, 20, 2, 2), (24, 20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 4-pixel tiles
    # padded copies (common.padded_row): padding wider than the input, stride-3 phases
    ((1, 5, 1, 2), (8, 5, 3, 3), (1, 1), (2, 2, 2, 2), (1, 1), 1),
    ((1, 3, 5, 80), (16, 3, 3, 3), (3, 3), (2, 2, 1, 3), (1, 1), 1),
]


def check_conv2d_bias_relu(xs, ws, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                           groups=1, schedule_config=None) -> None:
    """relu(conv2d + bias) through relay.build at opt_level 3 (weights packed) vs reference;
    weights scaled by 1/sqrt(fan-in), as trained ones are, so outputs are O(1) whatever the
    reduction's length and float32 rounding stays within the tolerance. schedule_config:
    overrides of the implementations' configurations (PassContext relayjit.schedule_config)."""
    x = RNG.standard_normal(xs).astype("float32")
    w = (RNG.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype("float32")
    bias = RNG.standard_normal(ws[0]).astype("float32")
    xv = relay.var("x", shape=xs)
    conv = relay.nn.conv2d(xv, relay.const(w), strides=strides, padding=padding,
                           dilation=dilation, groups=groups, channels=ws[0],
                           kernel_size=ws[2:])
    y = relay.nn.relu(relay.nn.bias_add(conv, relay.const(bias)))
    config = {"relayjit.disable_disk_cache": True}
    if schedule_config:
        config["relayjit.schedule_config"] = schedule_config
    with PassContext(opt_level=3, config=config):
        factory = relay.build(relay.Function([xv], y), target="llvm")
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.run(x=x)
    np.testing.assert_allclose(gmod.get_output(0).numpy(),
                               reference(x, w, bias, strides, padding, dilation, groups),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,strides,padding,dilation,groups", CASES)
def test_conv2d_bias_relu_end_to_end(xs, ws, strides, padding, dilation, groups, width):
    check_conv2d_bias_relu(xs, ws, strides, padding, dilation, groups)


@pytest.mark.parametrize("xs,ws,rows", [
    ((1, 96, 9, 11), (24, 96, 1, 1), True),
    ((2, 67, 8, 8), (13, 67, 1, 1), True),
    ((1, 64, 3, 5), (16, 64, 1, 1), True),  # 15 pixels: rows only with 8-float vectors
    ((1, 64, 9, 9), (40, 64, 1, 1), False),
])
def test_pointwise_onto_few_channels_runs_rows(xs, ws, rows, width):
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(*ws), name="wp")
    y = conv2d_nchw_packed(x, wp, channels=ws[0], options=host())
    run = build_te([x, wp], [y], "conv_pointwise")
    assert ("convrows" in str(run.primfunc)) == (rows and xs[2] * xs[3] >= width)


@pytest.mark.parametrize("xs,ws,chunks_outer", [
    ((1, 96, 9, 11), (24, 96, 1, 1), True),  # reads more channels than it writes
    ((1, 16, 55, 55), (64, 16, 1, 1), True),  # writes more, but its output stays in L2
    ((1, 16, 64, 72), (64, 16, 1, 1), False),  # an output over POINTWISE_HOT_OUTPUT_BYTES
])
def test_pointwise_rows_loop_order(xs, ws, chunks_outer, width):
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(*ws), name="wp")
    y = conv2d_nchw_packed(x, wp, channels=ws[0], options=eager())
    text = str(build_te([x, wp], [y], "conv_pointwise").primfunc)
    outer = "ch" if chunks_outer else "kc"
    assert f"T_conv2d_{outer}: int64 = floordiv(T_conv2d_par" in text


@pytest.mark.parametrize("k,wide", [(32, True), (48, True), (24, False)])
def test_rows_tile_channels(k, wide, width):
    x = te.placeholder((1, 3, 37, 41), name="x")
    wp = te.placeholder(conv_pack(k, 3, 3, 3), name="wp")
    y = conv2d_nchw_packed(x, wp, (2, 2), (1, 1, 1, 1), channels=k, options=host())
    text = str(build_te([x, wp], [y], "conv_rows_tile").primfunc)
    tile = 16 if wide and width == 16 else 8
    assert f"relayjit.ukr.convrows_{tile}_" in text


@pytest.mark.parametrize("npix,reduction,pixels", [
    (3025, 144, 8), (196, 64, 8), (49, 180, 7), (169, 512, 10), (3025, 432, 12)])
def test_direct_tile_pixels(npix, reduction, pixels, width):
    kb = channel_block(64, width)
    if width == 16:
        assert pixels_per_tile(kb, width, npix, reduction) == pixels
    else:  # 16-channel tiles of 8-float vectors: the reduction changes nothing
        assert pixels_per_tile(kb, width, npix, reduction) \
            == pixels_per_tile(kb, width, npix) <= PB


@pytest.mark.parametrize("k,npix", [(48, 13), (32, 27), (256, 56)])
def test_direct_convs_split_into_tasks(k, npix, width):
    """A conv with few channel blocks and one pixel block splits its pixels so that it has
    MIN_TASKS parallel tasks (a squeeze 1x1 onto 48 channels was one task and did not speed
    up on two threads)."""
    x = te.placeholder((1, 384, npix, npix), name="x")
    wp = te.placeholder(conv_pack(k, 384, 1, 1), name="wp")
    text = str(lower("conv_tasks", [x, wp],
                     [conv2d_nchw_packed(x, wp, channels=k, options=host())]))
    extents = [int(m) for m in re.findall(r"for \(\w+_par, 0, (\d+)\) parallel", text)]
    assert extents and extents[0] >= 4 == conv2d_config.MIN_TASKS
    check_conv2d_bias_relu((1, 384, npix, npix), (k, 384, 1, 1))
