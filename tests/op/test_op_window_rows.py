"""Depthwise convs and pools through codegen.schedules.window end to end (relay.build), vs numpy:
windows from the stride phases or in place, blocks of rows and the rows left over, rows in
whole vectors and a remainder, the bias + clip epilogue fused."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.transform import PassContext
from runtime import graph_executor

RNG = np.random.default_rng(7)


def _run(expr, inputs: dict, window: dict | None = None) -> np.ndarray:
    """Build and run expr; window: WindowConfig fields for its pools and depthwise convs."""
    func = relay.Function(relay.analysis.free_vars(expr), expr)
    overrides = {name: window for name in ("pool2d_nchw.window", "conv2d_nchw.depthwise")} \
        if window else {}
    with PassContext(config={"relayjit.schedule_config": overrides}):
        lib = relay.build(func, target="llvm")
    gmod = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    gmod.run(**inputs)
    return gmod.get_output(0).numpy()


def _depthwise_ref(x, w, bias, strides, padding, dilation):
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    mult = k // c
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilation, padding
    xp = np.pad(x.astype("f8"), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, k, oh, ow))
    for r in range(kh):
        for s in range(kw):
            patch = xp[:, :, r * dh:r * dh + sh * (oh - 1) + 1:sh,
                       s * dw:s * dw + sw * (ow - 1) + 1:sw]
            out += np.repeat(patch, mult, axis=1) * w[None, :, 0, r, s, None, None]
    return np.clip(out + bias[None, :, None, None], 0.0, 6.0)


DEPTHWISE = [
    # x shape, multiplier, kernel, strides, padding (t, l, b, r), dilation
    ((1, 5, 40, 40), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # wide, padded, odd channels
    ((1, 3, 66, 65), 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # wide stride 2, odd width
    ((2, 4, 35, 70), 2, (3, 3), (1, 2), (0, 1, 2, 1), (1, 1)),  # batch 2, multiplier 2
    ((1, 3, 40, 44), 1, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),  # dilation
    ((1, 2, 36, 38), 1, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1)),  # 5x5
    ((1, 3, 40, 40), 1, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),  # wide, unpadded: in place
    ((1, 3, 3, 80), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # wide, fewer rows than a block
    ((1, 3, 50, 100), 1, (3, 3), (3, 3), (2, 0, 1, 2), (1, 1)),  # stride 3, uneven padding
    ((1, 2, 30, 41), 1, (3, 3), (2, 2), (2, 2, 2, 2), (2, 2)),  # stride 2 with dilation 2
    ((1, 7, 14, 14), 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # 7 wide: the remainder alone
    ((2, 8, 12, 12), 2, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # 12 wide: vector + remainder
    ((1, 3, 3, 3), 1, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),  # output size 1
]


@pytest.mark.parametrize("xs,mult,kernel,strides,padding,dilation", DEPTHWISE)
def test_depthwise_bias_clip(xs, mult, kernel, strides, padding, dilation):
    c = xs[1]
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal((c * mult, 1) + kernel).astype("float32")
    bias = RNG.standard_normal(c * mult).astype("float32")
    xv = relay.var("x", shape=xs)
    conv = relay.nn.conv2d(xv, relay.const(w), strides=strides, padding=padding,
                           dilation=dilation, groups=c, channels=c * mult, kernel_size=kernel)
    expr = relay.clip(relay.nn.bias_add(conv, relay.const(bias)), 0.0, 6.0)
    got = _run(expr, {"x": x})
    np.testing.assert_allclose(got, _depthwise_ref(x, w, bias, strides, padding, dilation),
                               rtol=1e-4, atol=1e-4)


POOLS = [
    # x shape, pool, strides, padding
    ((1, 3, 41, 40), (3, 3), (1, 1), (1, 1, 1, 1)),  # wide, padded
    ((2, 3, 70, 69), (3, 3), (2, 2), (1, 1, 1, 1)),  # wide stride 2, batch 2
    ((1, 2, 64, 64), (2, 2), (2, 2), (0, 0, 0, 0)),  # UNet's 2x2/2 max pool
    ((1, 2, 9, 9), (3, 3), (2, 2), (1, 1, 0, 0)),  # narrow, one-sided padding
    ((1, 4, 11, 11), (3, 3), (1, 1), (1, 1, 1, 1)),  # 11 wide: a vector and a remainder
]


@pytest.mark.parametrize("xs,pool,strides,padding", POOLS)
def test_pools(xs, pool, strides, padding):
    x = RNG.standard_normal(xs).astype("float32")
    xv = relay.var("x", shape=xs)
    (pt, pl, pb, pr) = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=np.nan)
    oh = (xs[2] + pt + pb - pool[0]) // strides[0] + 1
    ow = (xs[3] + pl + pr - pool[1]) // strides[1] + 1
    wins = np.stack([xp[:, :, r:r + strides[0] * (oh - 1) + 1:strides[0],
                        s:s + strides[1] * (ow - 1) + 1:strides[1]]
                     for r in range(pool[0]) for s in range(pool[1])])
    mx = _run(relay.nn.max_pool2d(xv, pool, strides, padding=padding), {"x": x})
    np.testing.assert_allclose(mx, np.nanmax(wins, axis=0), rtol=0, atol=0)
    avg = _run(relay.nn.avg_pool2d(xv, pool, strides, padding=padding, count_include_pad=True),
               {"x": x})
    np.testing.assert_allclose(avg, np.nansum(wins, axis=0) / (pool[0] * pool[1]),
                               rtol=1e-5, atol=1e-6)
