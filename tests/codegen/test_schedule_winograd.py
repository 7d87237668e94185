"""Winograd conv2d schedule: the GEMMs read U's rows in place (u_in_place) or pack them,
against direct convolution, at both micro-kernel widths (rows tiles of 6 or 8 output
channels, partial last tiles, several K blocks of input channels)."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_te
from codegen.schedules import winograd

from .test_schedule_conv2d import _f32, ref_conv

from tests.schedule_helpers import host

CASES = [
    # x shape, output channels, padding (t, l, b, r), tile size m
    ((1, 20, 9, 11), 13, (1, 1, 1, 1), 4),    # partial row tile and output tiles
    ((1, 300, 6, 6), 7, (1, 1, 1, 1), 2),     # 300 channels: two K blocks of 256 with AVX2
    ((2, 16, 8, 8), 24, (0, 1, 2, 1), 4),     # batch 2, asymmetric padding
]


@pytest.mark.parametrize("in_place", [True, False], ids=["u_in_place", "u_packed"])
@pytest.mark.parametrize("xs,k,pad,m", CASES)
def test_winograd_matches_convolution(xs, k, pad, m, in_place, width) -> None:
    w = (_f32(k, xs[1], 3, 3) / np.sqrt(9 * xs[1])).astype("f4")
    a = m + 2
    oh, ow = xs[2] + pad[0] + pad[2] - 2, xs[3] + pad[1] + pad[3] - 2
    x, u = te.placeholder(xs, name="x"), te.placeholder((a, a, k, xs[1]), name="u")
    conv = winograd.conv2d_winograd(x, u, (xs[0], k, oh, ow), pad, options=host(),
                                    config=winograd.WinogradConfig(u_in_place=in_place))
    run = build_te([x, u], [conv], "winograd")
    assert ("_rows" in str(run.primfunc)) == in_place, "U not read as the GEMM's rows"
    xa = _f32(*xs)
    want = ref_conv(xa, w, (1, 1), pad, (1, 1), 1)
    got = run(xa, winograd.transform_weight(w, m))[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
