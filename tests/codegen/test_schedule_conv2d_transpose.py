"""conv2d_transpose as GEMM + gather (codegen.schedules.conv2d_transpose) vs a numpy scatter."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.schedules import conv2d_transpose_nchw

from tests.schedule_helpers import host

RNG = np.random.default_rng(21)


def ref_conv_transpose(x, w, strides, padding, dilation, out_shape):
    """Scatter every input pixel's products (the definition), float64."""
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl) = strides, dilation, padding[:2]
    full = np.zeros((n, o, out_shape[2] + kh * dh + pt, out_shape[3] + kw * dw + pl))
    for ky in range(kh):
        for kx in range(kw):
            contrib = np.einsum("nchw,co->nohw", x.astype("f8"), w[:, :, ky, kx])
            full[:, :, ky * dh: ky * dh + h * sh: sh, kx * dw: kx * dw + wd * sw: sw] += contrib
    return full[:, :, pt: pt + out_shape[2], pl: pl + out_shape[3]]


CASES = [  # x shape, w shape, strides, padding (t, l, b, r), dilation, output padding
    ((1, 64, 32, 32), (64, 32, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), (0, 0)),  # UNet up-conv
    ((2, 8, 7, 5), (8, 6, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1), (0, 0)),        # DCGAN-style
    ((1, 5, 6, 6), (5, 7, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1)),        # output padding
    ((1, 3, 5, 4), (3, 4, 3, 2), (3, 2), (0, 1, 1, 0), (2, 1), (0, 0)),        # dilation
    ((1, 4, 1, 1), (4, 9, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), (0, 0)),        # 1x1 input
    ((1, 17, 9, 11), (17, 33, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), (0, 0)),    # 1x1 kernel
]


@pytest.mark.parametrize("xs,ws,st,pad,dil,opad", CASES)
def test_conv2d_transpose(xs, ws, st, pad, dil, opad):
    n, c, h, wd = xs
    _, o, kh, kw = ws
    oh = (h - 1) * st[0] - pad[0] - pad[2] + dil[0] * (kh - 1) + 1 + opad[0]
    ow = (wd - 1) * st[1] - pad[1] - pad[3] + dil[1] * (kw - 1) + 1 + opad[1]
    out_shape = (n, o, oh, ow)
    x, w = te.placeholder(xs, name="x"), te.placeholder(ws, name="w")
    run = build_te([x, w], [conv2d_transpose_nchw(x, w, out_shape, st, pad, dil, options=host())])
    xa = RNG.standard_normal(xs).astype("f4")
    wa = RNG.standard_normal(ws).astype("f4")
    got = run(xa, wa)[0]
    np.testing.assert_allclose(got, ref_conv_transpose(xa, wa, st, pad, dil, out_shape),
                               rtol=1e-4, atol=1e-4)
