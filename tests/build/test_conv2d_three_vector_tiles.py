"""Direct conv tiles of three 16-float vectors (48 channels, codegen.schedules.conv2d_config
channel_block, the conv_<KB>x<VW> micro-kernel) where they pad a group's output channels to
at most THREE_VECTOR_PADDING of what two-vector tiles do. Against numpy through relay.build
(bias + relu fused) over padded channels, groups, batch 2 with stride, input channels in many
blocks (the accumulating tile), a pixel-major 1x1, a tail tile; written over a residual; and
which convs take them, at both vector widths."""
from __future__ import annotations

import re

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.llvm.microkernels import Conv
from codegen.schedules import Conv2dConfig, conv2d_nchw_packed
from codegen.schedules.conv2d_config import channel_block
from tests.build.test_conv2d_schedules import check_conv2d_bias_relu

from tests.schedule_helpers import conv_pack, host, microkernels_in

RNG = np.random.default_rng(37)

CASES = [
    # x shape, w shape, strides, padding (t, l, b, r), groups
    ((1, 384, 13, 13), (48, 384, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # 169 pixels: a tail tile
    ((1, 64, 27, 27), (40, 64, 3, 3), (1, 1), (1, 1, 1, 1), 1),  # 40 of 48
    ((1, 64, 9, 9), (96, 32, 3, 3), (1, 1), (1, 1, 1, 1), 2),  # groups of 48
    ((2, 32, 15, 15), (48, 32, 3, 3), (2, 2), (1, 1, 1, 1), 1),  # batch 2, stride 2
    ((1, 320, 10, 10), (48, 320, 3, 3), (1, 1), (1, 1, 1, 1), 1),  # 16 input channel blocks
    ((1, 128, 6, 6), (240, 128, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # pixel-major (see below)
]


def _kernel_text(xs, ws, strides, padding, groups, config=None) -> str:
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(*ws, groups), name="wp")
    y = conv2d_nchw_packed(x, wp, strides, padding, groups=groups, channels=ws[0],
                           options=host(), config=config)
    return str(build_te([x, wp], [y], "conv_three_vectors").primfunc)


def _conv_tiles(xs, ws, strides, padding, groups, config=None) -> set[tuple[int, int]]:
    """(channels, vector width) of the conv micro-kernels' tiles."""
    return {(k.kb, k.vw) for k in microkernels_in(
        _kernel_text(xs, ws, strides, padding, groups, config), Conv)}


@pytest.mark.parametrize("pixel_major", [None, True], ids=["default", "pixel_major"])
@pytest.mark.parametrize("xs,ws,strides,padding,groups", CASES)
def test_three_vector_tiles_end_to_end(xs, ws, strides, padding, groups, pixel_major, width):
    """Also with 1x1 convs onto 128+ channels through the pixel-major copy (240 channels)."""
    pointwise = ws[2:] == (1, 1) and strides == (1, 1) and not any(padding)
    overrides = {"conv2d_nchw.direct": {"pixel_major": True}} \
        if pixel_major and pointwise and ws[0] >= ws[1] else None
    check_conv2d_bias_relu(xs, ws, strides, padding, groups=groups, schedule_config=overrides)


@pytest.mark.parametrize("xs,ws,strides,padding,groups", CASES)
def test_which_kernel(xs, ws, strides, padding, groups, width):
    tiles = _conv_tiles(xs, ws, strides, padding, groups)
    assert tiles == ({(48, 16)} if width == 16 else {(16, 8)})


@pytest.mark.parametrize("kg,wide", [(40, 48), (48, 48), (144, 48), (232, 48), (240, 48),
                                     (96, 32), (80, 32), (336, 32), (1000, 32), (16, 16)])
def test_channel_block(kg, wide, width):
    assert channel_block(kg, width) == (wide if width == 16 else 16 if kg <= 16 else 2 * width)


def test_pixel_major_three_vector_tiles(width):
    assert "xpix" not in _kernel_text(*CASES[-1])
    assert "xpix" in _kernel_text(*CASES[-1], config=Conv2dConfig(pixel_major=True))


def test_two_vector_tiles_by_configuration(width):
    """channel_block 32 on AVX-512 (two vectors, where the default takes three), in a packed
    weight of that block."""
    x, ws = te.placeholder(CASES[0][0], name="x"), CASES[0][1]
    config = Conv2dConfig(channel_block=2 * width)
    wp = te.placeholder((1, -(-ws[0] // (2 * width)), *ws[1:], 2 * width), name="wp")
    y = conv2d_nchw_packed(x, wp, channels=ws[0], options=host(), config=config)
    text = str(build_te([x, wp], [y], "conv_two_vectors").primfunc)
    assert set(re.findall(r"relayjit\.ukr\.(conv_[0-9x]+)_", text)) == \
        {"conv_32" if width == 16 else "conv_16"}
