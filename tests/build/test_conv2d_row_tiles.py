"""The direct conv's row tiles (codegen.schedules.conv2d_config.row_tile_pixels): where a tile size
from 8 up divides the output row, a tile is that many consecutive pixels of one row and the
micro-kernel broadcasts each input value a window row reads once for all the taps on it.
Checked against numpy through relay.build (bias + relu fused) over the edges: dilation,
5x5 and 7x7 windows (the 7x7 loops over its window rows), vertical stride, padded channel
blocks, input channels in several blocks with a tail, groups, batch 2, asymmetric padding;
and which convs take row tiles, at which size, at both vector widths."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.llvm.microkernels import Conv
from codegen.schedules import Conv2dConfig, conv2d_nchw_packed
from codegen.schedules.conv2d_config import channel_block, row_tile_pixels
from tests.build.test_conv2d_schedules import check_conv2d_bias_relu

from tests.schedule_helpers import conv_pack, host, microkernels_in

RNG = np.random.default_rng(23)

CASES = [
    # x shape, w shape, strides, padding (t, l, b, r), dilation, groups; row tile at width 16
    ((1, 16, 22, 22), (64, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, 11),
    ((1, 12, 20, 24), (72, 12, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, 12),  # 72 of 96
    ((1, 8, 20, 20), (64, 8, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1, 10),
    ((1, 8, 16, 16), (64, 8, 7, 7), (1, 1), (3, 3, 3, 3), (1, 1), 1, 8),  # window row loop
    ((1, 16, 20, 18), (64, 16, 3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 1, 9),
    ((1, 160, 10, 10), (32, 160, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, 10),  # 4 blocks
    ((1, 83, 9, 9), (32, 83, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, 9),  # block + tail
    ((1, 32, 12, 12), (64, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2, 12),  # groups
    ((2, 8, 11, 10), (64, 8, 3, 3), (1, 1), (1, 0, 1, 2), (1, 1), 1, 10),  # batch 2
    ((1, 48, 10, 16), (16, 48, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, 8),  # 16-channel tile
]


def _conv_kernels(xs, ws, strides, padding, dilation, groups, config=None) -> list[Conv]:
    """The conv micro-kernels the conv calls."""
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(*ws, groups), name="wp")
    y = conv2d_nchw_packed(x, wp, strides, padding, dilation, groups, channels=ws[0],
                           options=host(), config=config)
    text = str(build_te([x, wp], [y], "conv_row_tiles").primfunc)
    return microkernels_in(text, Conv)


@pytest.mark.parametrize("xs,ws,strides,padding,dilation,groups,pixels", CASES)
def test_row_tiles_end_to_end(xs, ws, strides, padding, dilation, groups, pixels, width):
    check_conv2d_bias_relu(xs, ws, strides, padding, dilation, groups)


@pytest.mark.parametrize("xs,ws,strides,padding,dilation,groups,pixels", CASES)
def test_row_tile_kernels(xs, ws, strides, padding, dilation, groups, pixels, width):
    kernels = _conv_kernels(xs, ws, strides, padding, dilation, groups)
    assert kernels
    if width == 16:  # row tiles of `pixels`, the input's column stride apart
        assert all(k.p == pixels and k.row_stride == strides[1] for k in kernels)
    else:  # 16 registers: two vectors a pixel for 8 pixels do not fit beside the weights
        assert all(k.row_stride == 0 for k in kernels)


@pytest.mark.parametrize("ow,s,sw,pixels", [
    (55, 3, 1, 11), (27, 3, 1, 9), (56, 3, 1, 8), (13, 3, 1, None), (28, 3, 1, None),
    (55, 1, 1, None), (55, 3, 2, None), (24, 5, 1, 8), (20, 7, 1, None), (16, 7, 1, 8)])
def test_row_tile_pixels(ow, s, sw, pixels, width):
    kb = channel_block(64, width)
    got = row_tile_pixels(kb, width, dict(ow=ow, s=s, sw=sw))
    assert got == (pixels if width == 16 else None)


def test_row_tiles_switch(width):
    kernels = _conv_kernels(*CASES[0][:6], config=Conv2dConfig(row_tile=False))
    assert kernels and all(k.row_stride == 0 for k in kernels)
