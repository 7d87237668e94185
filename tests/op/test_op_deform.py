"""nn.deformable_conv2d and nn.modulated_deformable_conv2d: references against ONNX's reference
DeformConv, lowered kernels against the references, hostile offsets that must not read out of
bounds, and type-relation errors."""
from __future__ import annotations

import numpy as np
import pytest
from onnx.reference.ops.op_deform_conv import DeformConv

from tests.codegen_ops.lowering_harness import run_op
from tests.op._opcheck import check
from compiler.errors import TypeInferenceError
from compiler.ir.expr import var
from compiler.op import nn_deform

OPS_TESTED = {"nn.deformable_conv2d", "nn.modulated_deformable_conv2d"}
RNG = np.random.default_rng(11)

# (data shape, weight shape, strides, padding, dilation, deformable_groups, groups)
CASES = [
    ((1, 1, 3, 3), (1, 1, 2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1, 1),
    ((2, 4, 5, 6), (6, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2, 2),
    ((1, 4, 7, 6), (3, 4, 3, 2), (2, 1), (1, 0, 2, 1), (2, 1), 4, 1),
    ((1, 2, 4, 4), (4, 1, 1, 1), (1, 2), (0, 1, 0, 1), (1, 1), 1, 2),
]


def onnx_deform(x, w, offset, mask, strides, padding, dilation, dg, groups):
    op = DeformConv.__new__(DeformConv)
    return op._run(x, w, offset, None, mask, dilations=list(dilation), group=groups,
                   kernel_shape=list(w.shape[2:]), offset_group=dg, pads=list(padding),
                   strides=list(strides))[0]


def _inputs(dshape, wshape, strides, padding, dilation, dg, dtype="float32", spread=1.5):
    x = RNG.standard_normal(dshape).astype(dtype)
    w = RNG.standard_normal(wshape).astype(dtype)
    kh, kw = wshape[2:]
    oh = (dshape[2] + padding[0] + padding[2] - dilation[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (dshape[3] + padding[1] + padding[3] - dilation[1] * (kw - 1) - 1) // strides[1] + 1
    offset = RNG.uniform(-spread, spread, (dshape[0], dg * kh * kw * 2, oh, ow)).astype(dtype)
    mask = RNG.uniform(0, 1, (dshape[0], dg * kh * kw, oh, ow)).astype(dtype)
    return x, w, offset, mask


def _attrs(strides, padding, dilation, dg, groups) -> dict:
    return dict(strides=strides, padding=padding, dilation=dilation, deformable_groups=dg,
                groups=groups)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("modulated", [False, True])
def test_deformable_conv2d_matches_onnx_and_lowers(case, modulated):
    dshape, wshape, strides, padding, dilation, dg, groups = case
    x, w, offset, mask = _inputs(dshape, wshape, strides, padding, dilation, dg)
    attrs = _attrs(strides, padding, dilation, dg, groups)
    args = [var("x", shape=x.shape), var("o", shape=offset.shape), var("w", shape=w.shape)]
    if modulated:
        call = nn_deform.modulated_deformable_conv2d(*args, var("m", shape=mask.shape), **attrs)
        ref = check(call, x, offset, w, mask)
    else:
        ref = check(nn_deform.deformable_conv2d(*args, **attrs), x, offset, w)
    expected = onnx_deform(x, w, offset, mask if modulated else None, strides, padding,
                           dilation, dg, groups)
    np.testing.assert_allclose(ref, expected, rtol=1e-4, atol=1e-4)
    op = "nn.modulated_deformable_conv2d" if modulated else "nn.deformable_conv2d"
    inputs = [x, offset, w, mask] if modulated else [x, offset, w]
    got, (want,) = run_op(op, inputs, **dict(attrs, padding=tuple(padding),
                                              strides=tuple(strides), dilation=tuple(dilation)))
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)


def test_deformable_conv2d_zero_offsets_is_conv2d():
    from compiler.op.nn import conv2d
    from compiler.op.registry import get_def
    x = RNG.standard_normal((1, 3, 5, 5)).astype("float64")
    w = RNG.standard_normal((2, 3, 3, 3)).astype("float64")
    offset = np.zeros((1, 18, 5, 5), "float64")
    attrs = dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), deformable_groups=1,
                 groups=1)
    got, (want,) = run_op("nn.deformable_conv2d", [x, offset, w], **attrs)
    conv_call = conv2d(var("x", shape=x.shape), var("w", shape=w.shape), padding=1)
    conv = get_def("nn.conv2d").reference([x, w], conv_call.attrs)
    np.testing.assert_allclose(want, conv, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got[0], conv, rtol=1e-10, atol=1e-10)


def test_deformable_conv2d_hostile_offsets_stay_in_bounds():
    x = RNG.standard_normal((1, 1, 3, 3)).astype("float32")
    w = np.ones((1, 1, 2, 2), "float32")
    values = [np.nan, np.inf, -np.inf, 1e30, -1e30, 2.5, -3.25, 1e9]
    offset = np.array(values * 4, "float32").reshape(1, 8, 2, 2)
    got, (expected,) = run_op("nn.deformable_conv2d", [x, offset, w], strides=(1, 1),
                              padding=(0, 0, 0, 0), dilation=(1, 1), deformable_groups=1,
                              groups=1)
    assert got[0].shape == (1, 1, 2, 2)
    assert np.isfinite(got[0]).all()
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-5)


def test_deformable_conv2d_errors_name_the_op():
    x, w = var("x", shape=(1, 4, 5, 5)), var("w", shape=(2, 4, 3, 3))
    with pytest.raises(TypeInferenceError, match="nn.deformable_conv2d.*offset"):
        check(nn_deform.deformable_conv2d(x, var("o", shape=(1, 9, 3, 3)), w),
              np.zeros((1, 4, 5, 5), "f4"), np.zeros((1, 9, 3, 3), "f4"),
              np.zeros((2, 4, 3, 3), "f4"))
    with pytest.raises(TypeInferenceError, match="deformable_groups"):
        check(nn_deform.deformable_conv2d(x, var("o", shape=(1, 54, 3, 3)), w,
                                          deformable_groups=3),
              np.zeros((1, 4, 5, 5), "f4"), np.zeros((1, 54, 3, 3), "f4"),
              np.zeros((2, 4, 3, 3), "f4"))
    with pytest.raises(TypeInferenceError, match="modulated_deformable_conv2d.*mask"):
        check(nn_deform.modulated_deformable_conv2d(
            x, var("o", shape=(1, 18, 3, 3)), w, var("m", shape=(1, 18, 3, 3))),
            np.zeros((1, 4, 5, 5), "f4"), np.zeros((1, 18, 3, 3), "f4"),
            np.zeros((2, 4, 3, 3), "f4"), np.zeros((1, 18, 3, 3), "f4"))
