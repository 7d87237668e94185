"""The channel-blocked (NCHW[x]c) conv path: the schedule (codegen.schedules.conv2d_nchwc)
against numpy over its edges (stride 2, padding, 1x1 and 3x3, batch 2, output size 1, channel
blocks KB not dividing the output channels, residual add in the epilogue, several input-channel
blocks), at both micro-kernel widths (x = 8 and 16)."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.schedules import conv2d_pack_geometry
from codegen.schedules.conv2d_nchwc import conv2d_nchwc_packed, nchwc_applicable
from codegen.tir.ops import max as tir_max
from compiler.op.nn_packed import _conv_pack_ref

RNG = np.random.default_rng(61)


def blocked(a: np.ndarray, x: int) -> np.ndarray:
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // x, x, h, w).transpose(0, 1, 3, 4, 2))


def conv_reference(x, w, stride, pad, dilation=1):
    """NCHW conv2d in float64, padding (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oh = (xp.shape[2] - dilation * (r - 1) - 1) // stride + 1
    ow = (xp.shape[3] - dilation * (s - 1) - 1) // stride + 1
    out = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dilation:i * dilation + stride * oh:stride,
                       j * dilation:j * dilation + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.float64))
    return out


class Attrs:
    def __init__(self, **kw):
        self.__dict__.update(kw)


# (N, C, H, W), K, R, stride, padding (t, l, b, r), dilation; C and K are in units of the
# block x (the width), so every case is valid at both widths
CASES = [
    ((1, 2, 9, 9), 4, 3, 1, (1, 1, 1, 1), 1),     # 3x3 same padding, row tiles (9 a row)
    ((2, 1, 7, 5), 2, 1, 1, (0, 0, 0, 0), 1),     # 1x1, batch 2, 35 pixels
    ((1, 4, 14, 14), 3, 3, 2, (1, 1, 1, 1), 1),   # 3x3 stride 2; KB may not divide K
    ((1, 4, 8, 8), 10, 1, 2, (0, 0, 0, 0), 1),    # strided 1x1 read in place
    ((1, 2, 1, 1), 1, 1, 1, (0, 0, 0, 0), 1),     # output size 1
    ((1, 2, 3, 3), 2, 3, 1, (0, 0, 0, 0), 1),     # 3x3 valid: one output pixel
    ((1, 2, 9, 10), 2, 3, 1, (2, 1, 0, 3), 2),    # asymmetric padding, dilation 2
    ((1, 64, 6, 6), 4, 3, 1, (1, 1, 1, 1), 1),    # several input-channel blocks
]


def build_conv(xs, k, r, stride, pad, dilation, x, residual):
    n, c, h, w = xs
    geo = conv2d_pack_geometry(k, c, r, r, 1)
    data = te.placeholder((n, c // x, h, w, x), name="x")
    wp = te.placeholder(geo, name="wp")
    y = conv2d_nchwc_packed(data, wp, (stride, stride), pad, (dilation, dilation), channels=k)
    bias = te.placeholder((k // x, 1, 1, x), name="b")
    res = te.placeholder(y.shape, name="res")

    def value(i, kb, oh, ow, v):
        s = y[i, kb, oh, ow, v] + bias[kb, 0, 0, v]
        return tir_max(s + res[i, kb, oh, ow, v] if residual else s, 0.0)
    z = te.compute(y.shape, value, name="z")
    inputs = [data, wp, bias] + ([res] if residual else [])
    return build_te(inputs, [z], "conv_nchwc"), geo


@pytest.mark.parametrize("residual", [False, True], ids=["bias_relu", "bias_add_relu"])
@pytest.mark.parametrize("xs,kblocks,r,stride,pad,dilation", CASES)
def test_nchwc_conv_matches_numpy(xs, kblocks, r, stride, pad, dilation, residual, width):
    x = width
    xs = (xs[0], xs[1] * x, xs[2], xs[3])
    k = kblocks * x
    run, geo = build_conv(xs, k, r, stride, pad, dilation, x, residual)
    assert "relayjit.ukr.convb_" in str(run.primfunc)
    data = RNG.standard_normal(xs).astype(np.float32)
    w = (RNG.standard_normal((k, xs[1], r, r)) / np.sqrt(xs[1] * r * r)).astype(np.float32)
    b = RNG.standard_normal(k).astype(np.float32)
    expected = conv_reference(data, w, stride, pad, dilation) + b[None, :, None, None]
    args = [blocked(data, x), _conv_pack_ref([w], Attrs(groups=1, block=geo[-1])),
            b.reshape(k // x, 1, 1, x)]
    if residual:
        res = RNG.standard_normal(expected.shape).astype(np.float32)
        expected = expected + res
        args.append(blocked(res, x))
    (got,) = run(*args)
    np.testing.assert_allclose(got, blocked(np.maximum(expected, 0).astype(np.float32), x),
                               rtol=1e-4, atol=1e-4)


def test_nchwc_rejects_channels_not_in_whole_blocks(width):
    x = width
    assert not nchwc_applicable(x + 1, 2 * x, 1, 2 * x)
    assert not nchwc_applicable(2 * x, 2 * x + 3, 1, 2 * x)
    assert not nchwc_applicable(2 * x, 2 * x, 2, 2 * x)
    data = te.placeholder((1, 1, 5, 5, x + 1), name="x")
    wp = te.placeholder(conv2d_pack_geometry(2 * x, x + 1, 1, 1, 1), name="wp")
    with pytest.raises(ValueError, match="blocks of"):
        conv2d_nchwc_packed(data, wp, channels=2 * x)
