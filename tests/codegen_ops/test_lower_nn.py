"""nn ops lowered alone: conv2d (groups/strides/dilation/padding), conv2d_transpose, dense,
matmul, batch_matmul, softmax, normalisations, lrn, dropout, pooling."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.codegen_ops.lowering_harness import check_op, rand, run_op

OPS_TESTED = {"nn.conv2d", "nn.conv2d_transpose", "nn.dense", "nn.matmul", "nn.batch_matmul",
              "nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.instance_norm",
              "nn.group_norm", "nn.batch_norm", "nn.lrn", "nn.dropout", "nn.max_pool2d",
              "nn.avg_pool2d", "nn.global_max_pool2d", "nn.global_avg_pool2d",
              "nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d"}

_CONV = dict(channels=None, kernel_size=None, data_layout="NCHW", out_layout="")


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([1, 2]), st.sampled_from([(1, 1), (2, 1), (2, 3)]),
       st.sampled_from([(1, 1), (2, 1)]), st.tuples(*[st.integers(0, 2)] * 4),
       st.sampled_from([(1, 1), (3, 3), (2, 3)]))
def test_conv2d(groups, strides, dilation, padding, kernel):
    data = rand((1, 4, 7, 6), "float32", seed=1)
    weight = rand((6, 4 // groups) + kernel, "float32", seed=2)
    check_op("nn.conv2d", [data, weight], rtol=1e-4, atol=1e-4, strides=strides,
             padding=padding, dilation=dilation, groups=groups, kernel_layout="OIHW",
             out_dtype="", **_CONV)


def test_conv2d_depthwise_and_int8():
    data, weight = rand((2, 3, 5, 5), seed=3), rand((3, 1, 3, 3), seed=4)
    check_op("nn.conv2d", [data, weight], rtol=1e-4, atol=1e-4, strides=(1, 1),
             padding=(1, 1, 1, 1), dilation=(1, 1), groups=3, kernel_layout="OIHW",
             out_dtype="", **_CONV)
    di, wi = rand((1, 2, 4, 4), "int8", seed=5), rand((3, 2, 2, 2), "int8", seed=6)
    check_op("nn.conv2d", [di, wi], strides=(1, 1), padding=(0, 1, 1, 0), dilation=(1, 1),
             groups=1, kernel_layout="OIHW", out_dtype="int32", **_CONV)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([1, 2]), st.sampled_from([(1, 1), (2, 2), (3, 2)]),
       st.sampled_from([(1, 1), (2, 1)]), st.tuples(*[st.integers(0, 1)] * 4),
       st.sampled_from([(0, 0), (1, 0)]))
def test_conv2d_transpose(groups, strides, dilation, padding, output_padding):
    if any(op >= s for op, s in zip(output_padding, strides)):
        output_padding = (0, 0)
    data = rand((1, 4, 4, 3), "float32", seed=7)
    weight = rand((4, 3, 3, 2), "float32", seed=8)
    check_op("nn.conv2d_transpose", [data, weight], rtol=1e-4, atol=1e-4, channels=None,
             kernel_size=None, strides=strides, padding=padding, output_padding=output_padding,
             dilation=dilation, groups=groups, data_layout="NCHW", kernel_layout="IOHW",
             out_layout="", out_dtype="")


@pytest.mark.parametrize("dtype,out", [("float32", ""), ("int8", "int32"), ("float64", "")])
def test_dense_matmul(dtype, out):
    a, w = rand((2, 3, 7), dtype, seed=9), rand((5, 7), dtype, seed=10)
    check_op("nn.dense", [a, w], rtol=1e-5, atol=1e-5, units=None, out_dtype=out)
    for ta in (False, True):
        for tb in (False, True):
            x = rand((7, 4) if ta else (4, 7), dtype, seed=11)
            y = rand((5, 7) if tb else (7, 5), dtype, seed=12)
            check_op("nn.matmul", [x, y], rtol=1e-5, atol=1e-5, units=None, out_dtype=out,
                     transpose_a=ta, transpose_b=tb)
            xb = rand((3, 7, 4) if ta else (3, 4, 7), dtype, seed=13)
            yb = rand((1, 5, 7) if tb else (1, 7, 5), dtype, seed=14)
            check_op("nn.batch_matmul", [xb, yb], rtol=1e-5, atol=1e-5, out_dtype=out,
                     transpose_a=ta, transpose_b=tb)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis):
    x = rand((3, 5, 4), "float32", seed=15, lo=-30, hi=30)
    x[0, 0, 0] = 80.0  # exp overflows without the max shift
    check_op("nn.softmax", [x], rtol=1e-5, atol=1e-7, axis=axis)
    check_op("nn.log_softmax", [x], rtol=1e-5, atol=1e-5, axis=axis)


@pytest.mark.parametrize("center,scale", [(True, True), (False, True), (True, False)])
def test_norms(center, scale):
    x = rand((2, 6, 3, 4), "float32", seed=16)
    kw = dict(epsilon=1e-5, center=center, scale=scale)
    for axis in (-1, 1):
        c = x.shape[axis]
        g, b = rand((c,), seed=17), rand((c,), seed=18)
        check_op("nn.layer_norm", [x, g, b], rtol=1e-4, atol=1e-5, axis=axis, **kw)
    g, b = rand((6,), seed=19), rand((6,), seed=20)
    check_op("nn.instance_norm", [x, g, b], rtol=1e-4, atol=1e-5, axis=1, **kw)
    check_op("nn.group_norm", [x, g, b], rtol=1e-4, atol=1e-5, num_groups=3, axis=1, **kw)
    mean, var = rand((6,), seed=21), rand((6,), seed=22, lo=0.1, hi=2)
    check_op("nn.batch_norm", [x, g, b, mean, var], rtol=1e-5, atol=1e-6, axis=1, **kw)


def test_lrn_dropout():
    x = rand((2, 7, 3, 3), "float32", seed=23)
    check_op("nn.lrn", [x], rtol=1e-5, size=5, axis=1, bias=2.0, alpha=1e-2, beta=0.75)
    check_op("nn.lrn", [x], rtol=1e-5, size=2, axis=-1, bias=1.0, alpha=0.5, beta=0.5)
    check_op("nn.dropout", [x], rate=0.5)


_POOL = dict(dilation=(1, 1), out_layout="")


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([(2, 2), (3, 3), (3, 2)]), st.sampled_from([(1, 1), (2, 2), (2, 3)]),
       st.tuples(*[st.integers(0, 1)] * 4), st.booleans(), st.booleans(),
       st.sampled_from(["NCHW", "NHWC"]))
def test_pools(pool, strides, padding, ceil_mode, include_pad, layout):
    x = rand((1, 3, 7, 8) if layout == "NCHW" else (1, 7, 8, 3), "float32", seed=24)
    common = dict(pool_size=pool, strides=strides, dilation=(1, 1), padding=padding,
                  layout=layout, out_layout="", ceil_mode=ceil_mode)
    check_op("nn.max_pool2d", [x], **common)
    check_op("nn.avg_pool2d", [x], rtol=1e-5, count_include_pad=include_pad, **common)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_pools_dilation_int(dtype):
    x = rand((2, 2, 9, 9), dtype, seed=25)
    common = dict(pool_size=(3, 2), strides=(2, 1), dilation=(2, 3), padding=(1, 2, 2, 0),
                  layout="NCHW", out_layout="", ceil_mode=True)
    check_op("nn.max_pool2d", [x], **common)
    check_op("nn.avg_pool2d", [x], count_include_pad=False, **common)
    check_op("nn.avg_pool2d", [x], count_include_pad=True, **common)


@pytest.mark.parametrize("pool,strides,padding", [
    ((2, 2), (2, 2), (0, 1, 0, 0)),  # unrolled taps
    ((5, 5), (3, 2), (1, 2, 1, 0)),  # reduction loop
])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_avg_pool_ceil_mode_include_pad_partial_window(pool, strides, padding, layout):
    """A ceil-mode window divides by its taps inside input + pads, not the kernel size."""
    x = rand((1, 2, 7, 8), "float32", seed=27)
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = pool, strides, padding
    attrs = dict(pool_size=pool, strides=strides, dilation=(1, 1), padding=padding,
                 layout=layout, out_layout="", ceil_mode=True, count_include_pad=True)
    got, (ref,) = run_op("nn.avg_pool2d", [x if layout == "NCHW" else x.transpose(0, 2, 3, 1)],
                         **attrs)
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-6)
    out = got[0] if layout == "NCHW" else got[0].transpose(0, 3, 1, 2)
    want = np.zeros_like(out)
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            y0, x0 = sh * i - pt, sw * j - pl
            taps = (min(y0 + kh, 7 + pb) - y0) * (min(x0 + kw, 8 + pr) - x0)
            window = x[:, :, max(y0, 0):y0 + kh, max(x0, 0):x0 + kw]
            want[:, :, i, j] = window.sum(axis=(2, 3)) / taps
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pool", [(2, 2), (2, 9)])  # unrolled taps, reduction loop
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_max_pool_window_over_padding_only(pool, dtype):
    """A window whose taps all fall in the padding gives the lowest finite value, not -inf."""
    x = rand((1, 2, 2, 9), dtype, seed=28)
    attrs = dict(pool_size=pool, strides=(1, 1), dilation=(3, 1), padding=(1, 4, 2, 4),
                 layout="NCHW", out_layout="", ceil_mode=False)
    got, (ref,) = run_op("nn.max_pool2d", [x], **attrs)
    np.testing.assert_array_equal(got[0], ref)
    assert np.isfinite(got[0]).all()
    assert (got[0][:, :, 0] == np.finfo(dtype).min).all()  # row 0: taps at -1 and 2
    np.testing.assert_array_equal(got[0][:, :, 1], ref[:, :, 1])


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_global_adaptive(layout, dtype):
    x = rand((2, 3, 7, 5) if layout == "NCHW" else (2, 7, 5, 3), dtype, seed=26)
    for kind in ("max", "avg"):
        check_op(f"nn.global_{kind}_pool2d", [x], rtol=1e-5, layout=layout, out_layout="")
        for size in ((3, 2), (7, 5), (1, 1), (4, None), ()):
            check_op(f"nn.adaptive_{kind}_pool2d", [x], rtol=1e-5, output_size=size,
                     layout=layout, out_layout="")
