"""The phase split of strided windows (codegen.schedules.window._phase_rows, and the strips of
_column_phases) copies the columns every phase has in whole vectors (phase_rows_rounded): the
extra columns read the next input row and are overwritten by the row's own copies and fills
or by the next row; the last row copies exactly, so nothing reads past the plane or writes
past its phase. Against numpy,
with the switch on and off on the same input: max pools with NaNs on the copied columns, a
padded stride-2 depthwise conv with its bias and clip fused, batch 2, odd channels and widths,
phases of two rows; and rows shorter than a vector keep the exact copy."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.lower import lower
from codegen.schedules import window
from compiler import relay

from tests.op.test_op_window_rows import _depthwise_ref, _run

from tests.schedule_helpers import host

RNG = np.random.default_rng(23)


@pytest.fixture(params=[True, False], ids=["rounded", "exact"])
def rounded(request):
    return request.param


def _max_pool_ref(x: np.ndarray, pool, strides) -> np.ndarray:
    oh = (x.shape[2] - pool[0]) // strides[0] + 1
    ow = (x.shape[3] - pool[1]) // strides[1] + 1
    return np.max(np.stack([x[:, :, r:r + strides[0] * (oh - 1) + 1:strides[0],
                              s:s + strides[1] * (ow - 1) + 1:strides[1]]
                            for r in range(pool[0]) for s in range(pool[1])]), axis=0)


@pytest.mark.parametrize("xs,pool,strides", [
    ((2, 3, 27, 27), (3, 3), (2, 2)),  # SqueezeNet's last pool: 13 common columns -> 16
    ((1, 5, 21, 35), (3, 3), (2, 2)),  # 17 common columns -> 24, odd rows and channels
    ((1, 2, 5, 41), (3, 3), (2, 2)),  # phase rows of two and three: one rounded row each
    ((1, 2, 19, 52), (2, 3), (1, 3)),  # stride 3 columns, stride 1 rows
])
@pytest.mark.parametrize("phases", [True, False], ids=["phases", "strips"])
def test_max_pool_phases(xs, pool, strides, phases, rounded):
    # the phase split at any size, or strips of column phases (_column_phases) at any size
    x = RNG.standard_normal(xs).astype("float32")
    x[0, 0, 2, 18] = np.nan  # a copied column of the first rounded row
    x[-1, -1, 3, 1] = np.nan
    got = _run(relay.nn.max_pool2d(relay.var("x", shape=xs), pool, strides), {"x": x},
               {"phases_max_bytes": 1 << 40 if phases else 0, "phase_rows_rounded": rounded})
    want = _max_pool_ref(x, pool, strides)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("xs", [(2, 3, 28, 28), (1, 5, 30, 37)])
def test_depthwise_padded_stride2(xs, rounded):
    c = xs[1]
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal((c, 1, 3, 3)).astype("float32")
    b = RNG.standard_normal(c).astype("float32")
    xv = relay.var("x", shape=xs)
    y = relay.nn.conv2d(xv, relay.const(w), strides=(2, 2), padding=(1, 1), groups=c,
                        channels=c, kernel_size=(3, 3))
    y = relay.clip(relay.nn.bias_add(y, relay.const(b)), 0.0, 6.0)
    want = _depthwise_ref(x, w, b, (2, 2), (1, 1, 1, 1), (1, 1))
    np.testing.assert_allclose(_run(y, {"x": x}, {"phase_rows_rounded": rounded}), want,
                               rtol=1e-4, atol=1e-4)


def _pool_text(h: int, rounded: bool) -> str:
    x = te.placeholder((1, 4, h, h), name="x")
    o = (h - 3) // 2 + 1
    y = window.pool2d_nchw(x, "max", (3, 3), (2, 2), (1, 1), (0, 0, 0, 0), (o, o),
                           lambda v, i, j: v, "pool", options=host(), config=window.WindowConfig(
                               phases_max_bytes=1 << 40, phase_rows_rounded=rounded))
    return str(lower("pool", [x], [y]))


@pytest.mark.parametrize("h,changes", [(27, True), (55, True), (13, False)])
def test_rounded_copy_only_for_rows_of_a_vector(h, changes):
    """13 and 27 common columns round up; 6 (a 13x13 plane) keep their exact copy."""
    assert (_pool_text(h, True) != _pool_text(h, False)) == changes
