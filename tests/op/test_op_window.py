"""The sliding-window helpers every conv/pool op shares (compiler/op/window.py)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op._opcheck import infer
from compiler.errors import TypeInferenceError
from compiler.ir.expr import var
from compiler.op import nn, nn3d
from compiler.op.window import (conv_ref, has_empty_window, lowest_value, ntuple,
                                pad_tuple, pool_counts)


def test_attribute_normalisation_is_the_same_for_every_rank():
    assert ntuple(3, 2) == (3, 3) and ntuple(np.int64(2), 3) == (2, 2, 2)
    assert ntuple([1, 2], 2) == (1, 2)
    assert pad_tuple(1, 2) == (1,) * 4 and pad_tuple((1, 2), 2) == (1, 2, 1, 2)
    assert pad_tuple((1, 2, 3), 3) == (1, 2, 3, 1, 2, 3) and pad_tuple([4], 3) == (4,) * 6
    with pytest.raises(ValueError, match="1, 3 or 6 values"):
        pad_tuple((1, 2), 3)


@pytest.mark.parametrize("make,shape,wshape", [
    (nn.conv2d, (1, 3, 8, 8), (4, 3, 3, 3)),
    (nn3d.conv3d, (1, 3, 4, 8, 8), (4, 3, 3, 3, 3)),
])
def test_conv2d_and_conv3d_share_their_checks(make, shape, wshape):
    x, w = var("x", shape=shape), var("w", shape=wshape)
    op = make.__name__
    with pytest.raises(TypeInferenceError, match=f"nn.{op}: channels do not match"):
        infer(make(x, var("w", shape=(4, 2) + wshape[2:])))
    with pytest.raises(TypeInferenceError, match=f"nn.{op}: strides .* must be >= 1"):
        infer(make(x, w, strides=0))
    with pytest.raises(TypeInferenceError, match=f"nn.{op}: output (depth|height) would be"):
        infer(make(x, w, dilation=4))


def test_conv_reference_matches_a_direct_sum():
    rng = np.random.default_rng(0)
    data, weight = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    attrs = nn.conv2d(var("x", shape=data.shape), var("w", shape=weight.shape),
                      padding=1).attrs
    expect = np.zeros((1, 3, 5, 5))
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(5):
        for j in range(5):
            expect[0, :, i, j] = np.einsum("chw,ochw->o", padded[0, :, i:i + 3, j:j + 3], weight)
    np.testing.assert_allclose(conv_ref([data, weight], attrs), expect, rtol=1e-12)


def test_pool_counts_stop_at_the_end_padding():
    # size 5, kernel 2, stride 2, no pads, 3 ceil-mode outputs: the last window has one tap
    assert pool_counts(5, 2, 2, 1, 0, 0, 3, True).tolist() == [2, 2, 1]
    # begin pad 1, end pad 1, kernel 3, stride 2: taps in [-1, 6)
    assert pool_counts(5, 3, 2, 1, 1, 1, 3, True).tolist() == [3, 3, 3]
    assert pool_counts(5, 3, 2, 1, 1, 1, 3, False).tolist() == [2, 3, 2]
    assert has_empty_window(2, 2, 1, 3, 1, 1) and not has_empty_window(5, 2, 2, 1, 0, 3)


def test_lowest_value_is_finite():
    assert lowest_value("float32") == float(np.finfo(np.float32).min)
    assert lowest_value("float16") == -65504.0 and lowest_value("int8") == -128
