"""Unpadded windows with strided columns (codegen.schedules.window): a plane of at most
PHASES_MAX_BYTES (with its phases) goes through the phase split, a larger one through a strip
of column phases per block of output rows (the rows left over included); both against numpy,
with NaNs on even and odd columns and rows (a max's NaN must survive the row-by-row
reduction), odd and even widths, and windows that end one column short of the plane. Each
shape runs with the threshold forced both ways, so both paths are tested on the same input."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.lower import lower
from codegen.schedules import window
from compiler import relay

from tests.op.test_op_window_rows import _run

from tests.schedule_helpers import host

RNG = np.random.default_rng(11)


def _windows(x: np.ndarray, pool, strides) -> np.ndarray:
    """The taps of every window of an unpadded pool: [taps, n, c, oh, ow]."""
    oh = (x.shape[2] - pool[0]) // strides[0] + 1
    ow = (x.shape[3] - pool[1]) // strides[1] + 1
    return np.stack([x[:, :, r:r + strides[0] * (oh - 1) + 1:strides[0],
                       s:s + strides[1] * (ow - 1) + 1:strides[1]]
                     for r in range(pool[0]) for s in range(pool[1])])


SHAPES = [
    # x shape, pool, strides
    ((1, 3, 27, 27), (3, 3), (2, 2)),  # SqueezeNet's last pool (13x13 out)
    ((1, 2, 55, 55), (3, 3), (2, 2)),  # SqueezeNet's second pool
    ((1, 2, 111, 111), (3, 3), (2, 2)),  # SqueezeNet's first pool (strips by default)
    ((2, 3, 20, 21), (3, 3), (2, 2)),  # even rows, batch 2; the last column unread
    ((1, 2, 25, 25), (3, 3), (2, 2)),  # 12 output rows: whole strips, no rows left over
    ((1, 2, 17, 30), (2, 2), (2, 2)),  # 2x2/2 on an odd number of rows
    ((1, 2, 19, 25), (3, 3), (1, 2)),  # strided columns only
    ((1, 2, 23, 23), (3, 3), (3, 3)),  # stride 3
]


@pytest.fixture(params=["phases", "strips"])
def path(request):
    """The phase split forced on (any plane size) or off (phases_max_bytes 0: strips): the
    WindowConfig fields to build with."""
    return {"phases_max_bytes": 1 << 40 if request.param == "phases" else 0}


@pytest.mark.parametrize("xs,pool,strides", SHAPES)
def test_strided_unpadded_pools(xs, pool, strides, path):
    x = RNG.standard_normal(xs).astype("float32")
    x[0, 0, 0, 0] = np.nan  # first tap of the first window
    x[0, 1 % xs[1], 3, 4] = np.nan  # an even column: a middle tap of two windows
    x[-1, -1, 4, 5] = np.nan  # an odd column and row
    xv = relay.var("x", shape=xs)
    wins = _windows(x, pool, strides)
    mx = _run(relay.nn.max_pool2d(xv, pool, strides), {"x": x}, path)
    want = np.max(wins, axis=0)  # NaN wherever a window holds one
    assert np.isnan(want).any()
    np.testing.assert_array_equal(mx, want)
    avg = _run(relay.nn.avg_pool2d(xv, pool, strides), {"x": x}, path)
    np.testing.assert_allclose(avg, wins.sum(axis=0) / (pool[0] * pool[1]),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("xs,stride", [((1, 6, 29, 29), 2), ((2, 4, 16, 19), 2)])
def test_strided_unpadded_depthwise(xs, stride, path):
    """A depthwise conv (+ bias) without padding goes through the same window statement."""
    c = xs[1]
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal((c, 1, 3, 3)).astype("float32")
    b = RNG.standard_normal(c).astype("float32")
    xv = relay.var("x", shape=xs)
    y = relay.nn.bias_add(relay.nn.conv2d(xv, relay.const(w), strides=(stride, stride),
                                          groups=c, channels=c, kernel_size=(3, 3)),
                          relay.const(b))
    got = _run(y, {"x": x}, path)
    wins = _windows(x.astype("f8"), (3, 3), (stride, stride))
    want = np.einsum("tnchw,ct->nchw", wins, w.reshape(c, 9).astype("f8")) + b[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _scratch(c: int, h: int, stride: int) -> set[str]:
    """The scratch buffers ("phases", "strip") the 3x3 max pool of a c@hxh plane lowers to."""
    x = te.placeholder((1, c, h, h), name="x")
    o = (h - 3) // stride + 1
    y = window.pool2d_nchw(x, "max", (3, 3), (stride, stride), (1, 1), (0, 0, 0, 0), (o, o),
                           lambda v, i, j: v, "pool", options=host())
    text = str(lower("pool", [x], [y]))
    return {kind for kind in ("phases", "strip") if f"pool_{kind}" in text}


def test_squeezenet_planes_pick_their_path():
    """By default SqueezeNet's 55x55 and 27x27 pools split into phases, 111x111 into strips,
    and a stride-1 window reads in place."""
    assert _scratch(128, 55, 2) == {"phases"} and _scratch(256, 27, 2) == {"phases"}
    assert _scratch(64, 111, 2) == {"strip"}
    assert _scratch(4, 20, 1) == set()
