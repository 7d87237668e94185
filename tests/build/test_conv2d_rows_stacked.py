"""rows tiles stacked over output rows (Conv2dConfig.rows_stack, conv2d_config.ROWS_STACK): a row
tile would be 16 channels x one pixel vector over at least ROWS_STACK_MIN_TAPS taps, it is 8
channels x the same vector on 3 consecutive output rows. Against numpy through relay.build
(bias + relu fused) over output heights 3 does not divide, widths a vector does not divide,
stride, dilation, a 7x7 window (a loop over its rows), batch 2, asymmetric padding; and which
convs stack, at both vector widths."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.llvm.microkernels import ConvRows
from codegen.schedules import Conv2dConfig, conv2d_nchw_packed
from tests.build.test_conv2d_schedules import check_conv2d_bias_relu

from tests.schedule_helpers import conv_pack, host, microkernels_in

RNG = np.random.default_rng(31)

CASES = [
    # x shape, w shape, strides, padding (t, l, b, r), dilation
    ((1, 16, 20, 20), (16, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # 20 rows, 4-pixel tail
    ((2, 32, 18, 33), (32, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # batch 2, 18 rows
    ((1, 8, 23, 40), (16, 8, 3, 3), (2, 1), (1, 0, 1, 2), (1, 1)),  # stride, asymmetric pad
    ((1, 16, 22, 21), (32, 16, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),  # dilated
    ((1, 3, 40, 38), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),  # 7x7/2: window row loop
]


def _rows_kernels(xs, ws, strides, padding, dilation, config=None) -> list[ConvRows]:
    """The convrows micro-kernels the conv calls."""
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(*ws), name="wp")
    y = conv2d_nchw_packed(x, wp, strides, padding, dilation, channels=ws[0], options=host(),
                           config=config)
    text = str(build_te([x, wp], [y], "conv_rows_stacked").primfunc)
    return microkernels_in(text, ConvRows)


@pytest.mark.parametrize("xs,ws,strides,padding,dilation", CASES)
def test_stacked_rows_end_to_end(xs, ws, strides, padding, dilation, width):
    check_conv2d_bias_relu(xs, ws, strides, padding, dilation)


@pytest.mark.parametrize("xs,ws,strides,padding,dilation", CASES)
def test_which_rows_tiles_stack(xs, ws, strides, padding, dilation, width):
    kernels = _rows_kernels(xs, ws, strides, padding, dilation)
    assert kernels
    if width == 16:  # 8 channels x 3 rows, flagged stacked
        assert all((k.kc, k.nv) == (8, 3) and k.stacked for k in kernels)
    else:  # 8 channels a tile already: no stacking
        assert not any(k.stacked for k in kernels)


@pytest.mark.parametrize("xs,ws,strides,padding", [
    ((1, 3, 37, 41), (32, 3, 3, 3), (2, 2), (1, 1, 1, 1)),  # 27 taps: 16 channels x 1 row
    ((1, 16, 20, 20), (24, 16, 3, 3), (1, 1), (1, 1, 1, 1)),  # 24 channels: 8 a tile
])
def test_short_or_narrow_rows_tiles_do_not_stack(xs, ws, strides, padding, width):
    kernels = _rows_kernels(xs, ws, strides, padding, (1, 1))
    assert kernels and not any(k.stacked for k in kernels)


def test_rows_stack_switch(width):
    kernels = _rows_kernels(*CASES[0], config=Conv2dConfig(rows_stack=1))
    assert kernels and not any(k.stacked for k in kernels)
