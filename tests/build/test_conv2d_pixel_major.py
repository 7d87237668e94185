"""1x1 direct convs that read a pixel-major copy of their input
(codegen.schedules.conv2d_config.pixel_major_pays: from 128 input and 256 output channels a group,
writing at least as many as they read): against numpy through relay.build with bias + relu
fused, over padded channel blocks, batch 2, groups, output sizes no tile divides; written
over their residual (in place); and which convs take the copy."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.schedules import Conv2dConfig, conv2d_nchw_packed
from tests.build.test_conv2d_schedules import check_conv2d_bias_relu

from tests.schedule_helpers import conv_pack, host

RNG = np.random.default_rng(29)

CASES = [
    # x shape, w shape, groups
    ((1, 128, 5, 7), (256, 128, 1, 1), 1),
    ((2, 130, 3, 5), (270, 130, 1, 1), 1),  # odd channels, a padded block, batch 2
    ((1, 256, 4, 4), (512, 128, 1, 1), 2),  # groups
    ((1, 160, 13, 13), (1000, 160, 1, 1), 1),  # 169 pixels
]


@pytest.mark.parametrize("xs,ws,groups", CASES)
def test_pixel_major_end_to_end(xs, ws, groups, width):
    check_conv2d_bias_relu(xs, ws, groups=groups)


@pytest.mark.parametrize("xs,ws,groups,copied", [
    *((xs, ws, groups, True) for xs, ws, groups in CASES),
    ((1, 512, 13, 13), (64, 512, 1, 1), 1, False),  # writes fewer channels than it reads
    ((1, 128, 28, 28), (128, 128, 1, 1), 1, False),  # under 256 output channels
    ((1, 112, 14, 14), (448, 112, 1, 1), 1, False),  # under 128 input channels
])
def test_which_convs_copy_pixel_major(xs, ws, groups, copied, width):
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(*ws, groups), name="wp")
    y = conv2d_nchw_packed(x, wp, groups=groups, channels=ws[0], options=host())
    text = str(build_te([x, wp], [y], "conv_pixel_major").primfunc)
    assert ("xpix" in text) == copied
    assert "relayjit.ukr.conv_" in text


def test_pixel_major_switch(width):
    x = te.placeholder(CASES[0][0], name="x")
    wp = te.placeholder(conv_pack(*CASES[0][1]), name="wp")
    y = conv2d_nchw_packed(x, wp, channels=CASES[0][1][0], options=host(),
                           config=Conv2dConfig(pixel_major=False))
    assert "xpix" not in str(build_te([x, wp], [y], "conv_pixel_major").primfunc)
