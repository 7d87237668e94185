"""3-D conv/pool ops: attrs as TVM stores them, references against naive loops, and the
lowered kernels against the references."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.codegen_ops.lowering_harness import run_op
from tests.op._opcheck import check
from compiler.errors import TypeInferenceError
from compiler.ir.expr import var
from compiler.op import nn3d

OPS_TESTED = ["nn.conv3d", "nn.conv3d_transpose", "nn.max_pool3d", "nn.avg_pool3d"]
RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def naive_conv3d(x, w, stride, pad, dil, groups):
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    ks = w.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(zip(pad[:3], pad[3:])))
    outs = [(xp.shape[2 + a] - dil[a] * (ks[a] - 1) - 1) // stride[a] + 1 for a in range(3)]
    out = np.zeros([n, o] + outs)
    og = o // groups
    for b, oc, *pos in itertools.product(range(n), range(o), *(range(s) for s in outs)):
        g = oc // og
        for ic, *tap in itertools.product(range(i), *(range(k) for k in ks)):
            src = tuple(p * s + t * d for p, s, t, d in zip(pos, stride, tap, dil))
            out[(b, oc) + tuple(pos)] += xp[(b, g * i + ic) + src] * w[(oc, ic) + tuple(tap)]
    return out


def test_conv3d_attrs_as_tvm():
    call = nn3d.conv3d(var("x", shape=(1, 2, 4, 4, 4)), var("w", shape=(3, 2, 3, 3, 3)),
                       padding=1, strides=(1, 2, 1))
    assert call.attrs.type_key == "relay.attrs.Conv3DAttrs"
    assert call.attrs.padding == (1,) * 6 and call.attrs.strides == (1, 2, 1)
    assert nn3d.pad_tuple3d((1, 2, 3)) == (1, 2, 3, 1, 2, 3)


@pytest.mark.parametrize("stride,pad,dil,groups", [
    ((1, 1, 1), (0,) * 6, (1, 1, 1), 1),
    ((2, 1, 2), (1, 0, 1, 0, 1, 1), (1, 2, 1), 1),
    ((1, 1, 1), (1,) * 6, (1, 1, 1), 2),
])
def test_conv3d_reference_and_kernel(stride, pad, dil, groups):
    x, w = rand(1, 4, 5, 6, 5), rand(4, 4 // groups, 2, 3, 2)
    call = nn3d.conv3d(var("x", shape=x.shape), var("w", shape=w.shape), strides=stride,
                       padding=pad, dilation=dil, groups=groups)
    ref = check(call, x, w)
    np.testing.assert_allclose(ref, naive_conv3d(x, w, stride, pad, dil, groups), rtol=1e-5,
                               atol=1e-5)
    got, (expected,) = run_op("nn.conv3d", [x, w], strides=stride, padding=pad, dilation=dil,
                              groups=groups)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-5)


def test_conv3d_errors_name_the_op():
    with pytest.raises(TypeInferenceError, match="nn.conv3d.*channels"):
        check(nn3d.conv3d(var("x", shape=(1, 3, 4, 4, 4)), var("w", shape=(2, 2, 1, 1, 1))),
              np.zeros((1, 3, 4, 4, 4), "f4"), np.zeros((2, 2, 1, 1, 1), "f4"))


def test_conv3d_transpose_is_the_adjoint_of_conv3d():
    """<conv(x), y> == <x, conv_transpose(y)> for the same weight (no output padding)."""
    x, w = rand(1, 2, 4, 5, 4), rand(3, 2, 2, 3, 2)
    stride, pad = (2, 1, 2), (1, 0, 1, 0, 1, 1)
    y = naive_conv3d(x, w, stride, pad, (1, 1, 1), 1).astype("float32")
    yt = rand(*y.shape)
    attrs = dict(strides=stride, padding=pad, output_padding=(1, 0, 0))
    # conv3d's OIDHW weight read as IODHW is the adjoint's weight
    call = nn3d.conv3d_transpose(var("y", shape=yt.shape), var("w", shape=w.shape), **attrs)
    back = check(call, yt, w)
    assert back.shape[2:] == x.shape[2:]
    np.testing.assert_allclose(np.sum(y * yt), np.sum(x * back), rtol=1e-4)
    got, (expected,) = run_op("nn.conv3d_transpose", [yt, w], **attrs)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-5)


def naive_pool(x, kind, k, s, d, pad, include_pad):
    outs = [(x.shape[2 + a] + pad[a] + pad[3 + a] - d[a] * (k[a] - 1) - 1) // s[a] + 1
            for a in range(3)]
    out = np.zeros(list(x.shape[:2]) + outs)
    for pos in itertools.product(*(range(o) for o in outs)):
        vals, count = [], 0
        for tap in itertools.product(*(range(kk) for kk in k)):
            src = [p * ss - pp + t * dd for p, ss, pp, t, dd in zip(pos, s, pad, tap, d)]
            if all(0 <= i < n for i, n in zip(src, x.shape[2:])):
                vals.append(x[(slice(None), slice(None)) + tuple(src)])
                count += 1
            elif include_pad:
                count += 1
        total = np.max(vals, axis=0) if kind == "max" else np.sum(vals, axis=0) / count
        out[(slice(None), slice(None)) + pos] = total
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("include_pad", [False, True])
def test_pool3d_reference_and_kernel(kind, include_pad):
    x = rand(2, 3, 5, 6, 7)
    k, s, d, pad = (2, 3, 2), (2, 1, 2), (1, 1, 2), (1, 1, 0, 0, 1, 1)
    extra = {} if kind == "max" else {"count_include_pad": include_pad}
    ctor = nn3d.max_pool3d if kind == "max" else nn3d.avg_pool3d
    ref = check(ctor(var("x", shape=x.shape), pool_size=k, strides=s, dilation=d, padding=pad,
                     **extra), x)
    np.testing.assert_allclose(ref, naive_pool(x, kind, k, s, d, pad, include_pad), rtol=1e-5)
    got, (expected,) = run_op(f"nn.{kind}_pool3d", [x], pool_size=k, strides=s, dilation=d,
                              padding=pad, **extra)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)


def test_pool3d_ceil_mode_adds_a_partial_window():
    x = rand(1, 1, 5, 5, 5)
    call = nn3d.avg_pool3d(var("x", shape=x.shape), pool_size=2, strides=2, ceil_mode=True)
    out = check(call, x)
    assert out.shape == (1, 1, 3, 3, 3)
    np.testing.assert_allclose(out[0, 0, 2, 2, 2], x[0, 0, 4, 4, 4], rtol=1e-6)
    got, (expected,) = run_op("nn.avg_pool3d", [x], pool_size=(2, 2, 2), strides=(2, 2, 2),
                              ceil_mode=True)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5)


def test_max_pool3d_window_over_padding_only_is_the_lowest_finite_value():
    x = rand(1, 2, 2, 3, 2)
    attrs = dict(pool_size=(2, 2, 2), strides=(1, 1, 1), dilation=(3, 1, 3),
                 padding=(1, 1, 1, 1, 1, 1))
    out = check(nn3d.max_pool3d(var("x", shape=x.shape), **attrs), x)
    assert out.shape == (1, 2, 1, 4, 1)
    assert (out == np.finfo(np.float32).min).all()
    got, (expected,) = run_op("nn.max_pool3d", [x], **attrs)
    np.testing.assert_array_equal(got[0], expected)


def test_avg_pool3d_ceil_mode_include_pad_counts_taps_inside_input_and_pads():
    x = rand(1, 1, 5, 5, 5)
    attrs = dict(pool_size=(2, 2, 2), strides=(2, 2, 2), ceil_mode=True, count_include_pad=True)
    out = check(nn3d.avg_pool3d(var("x", shape=x.shape), **attrs), x)
    np.testing.assert_allclose(out[0, 0, 2, 2, 2], x[0, 0, 4, 4, 4], rtol=1e-6)
    np.testing.assert_allclose(out[0, 0, 0, 0, 2], x[0, 0, :2, :2, 4].mean(), rtol=1e-6)
    got, (expected,) = run_op("nn.avg_pool3d", [x], **attrs)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5)
