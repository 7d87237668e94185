"""Ops from issue 11 built with relay.build and run by the graph executor against numpy:
conv1d / conv1d_transpose, conv layouts (NHWC/HWIO, ...), grouped and depthwise conv3d,
upsampling, reverse_reshape, nn.pad with negative widths, broadcast_to with a constant shape
and the shift ops (TVM's test_op_level*.py cases where they exist)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import TypeInferenceError

OPS_TESTED = ["nn.conv1d", "nn.conv1d_transpose", "nn.upsampling", "contrib_reverse_reshape",
              "annotation.stop_fusion"]
RNG = np.random.default_rng(11)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run(expr, *inputs):
    """Build expr (its free vars in order are the inputs) and run it on the graph executor."""
    func = relay.Function(relay.analysis.free_vars(expr), expr)
    mod = tvm.IRModule.from_expr(func)
    return relay.create_executor("graph", mod=mod).evaluate()(*inputs).numpy()


def checked_type(expr):
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(expr))
    return mod["main"].body.checked_type


def naive_conv(x, w, stride, pad, dil, groups):
    """N-d grouped convolution (NC..., OI...) by loops; pad is begins then ends."""
    nd = x.ndim - 2
    o, i = w.shape[:2]
    ks = w.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(zip(pad[:nd], pad[nd:])))
    outs = [(xp.shape[2 + a] - dil[a] * (ks[a] - 1) - 1) // stride[a] + 1 for a in range(nd)]
    out = np.zeros([x.shape[0], o] + outs)
    og = o // groups
    for b, oc, *pos in itertools.product(range(x.shape[0]), range(o), *map(range, outs)):
        for ic, *tap in itertools.product(range(i), *map(range, ks)):
            src = tuple(p * s + t * d for p, s, t, d in zip(pos, stride, tap, dil))
            out[(b, oc, *pos)] += xp[(b, oc // og * i + ic, *src)] * w[(oc, ic, *tap)]
    return out


def naive_conv1d_transpose(x, w, stride, pad, out_pad, dil, groups=1):
    n, c, width = x.shape
    og, k = w.shape[1], w.shape[2]
    full = (width - 1) * stride + dil * (k - 1) + 1 + out_pad
    buf = np.zeros((n, og * groups, full + pad[0] + pad[1]))
    for b, ic, p, oc, t in itertools.product(range(n), range(c), range(width), range(og),
                                             range(k)):
        group = ic // (c // groups)
        buf[b, group * og + oc, p * stride + t * dil] += x[b, ic, p] * w[ic, oc, t]
    return buf[:, :, pad[0]:full - pad[1]]


# --- conv1d ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,wshape,stride,pad,dil,groups", [
    ((1, 3, 10), (4, 3, 3), 1, (0, 0), 1, 1),
    ((2, 4, 9), (6, 2, 3), 2, (1, 1), 1, 2),      # grouped, strided
    ((1, 4, 12), (4, 1, 5), 1, (2, 3), 2, 4),     # depthwise, dilated, asymmetric padding
    ((1, 2, 1), (3, 2, 1), 1, (0, 0), 1, 1),      # one-wide input and kernel
])
def test_conv1d(shape, wshape, stride, pad, dil, groups):
    x, w = relay.var("x", shape=shape), relay.var("w", shape=wshape)
    y = relay.nn.conv1d(x, w, strides=stride, padding=pad, dilation=dil, groups=groups,
                        kernel_size=wshape[2], channels=wshape[0])
    assert y.attrs.type_key == "relay.attrs.Conv1DAttrs" and y.attrs.strides == (stride,)
    xv, wv = rand(*shape), rand(*wshape)
    np.testing.assert_allclose(run(y, xv, wv), naive_conv(xv, wv, (stride,), pad, (dil,),
                                                          groups), rtol=1e-4, atol=1e-4)


def test_conv1d_int8_out_dtype():
    x, w = relay.var("x", shape=(1, 3, 7), dtype="int8"), relay.var("w", shape=(2, 3, 3),
                                                                    dtype="int8")
    y = relay.nn.conv1d(x, w, padding=1, strides=2, out_dtype="int32")
    xv = RNG.integers(-128, 127, (1, 3, 7)).astype("int8")
    wv = RNG.integers(-128, 127, (2, 3, 3)).astype("int8")
    got = run(y, xv, wv)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, naive_conv(xv, wv, (2,), (1, 1), (1,), 1))


def test_conv1d_nwc_wio():
    x, w = relay.var("x", shape=(2, 9, 4)), relay.var("w", shape=(3, 4, 5))
    y = relay.nn.conv1d(x, w, padding=1, data_layout="NWC", kernel_layout="WIO")
    assert checked_type(y) == relay.TensorType((2, 9, 5))
    xv, wv = rand(2, 9, 4), rand(3, 4, 5)
    ref = naive_conv(xv.transpose(0, 2, 1), wv.transpose(2, 1, 0), (1,), (1, 1), (1,), 1)
    np.testing.assert_allclose(run(y, xv, wv), ref.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,wshape,stride,pad,out_pad,dil,groups", [
    ((1, 3, 5), (3, 4, 3), 1, (0, 0), 0, 1, 1),
    ((2, 2, 4), (2, 3, 3), 2, (1, 1), 1, 1, 1),
    ((1, 2, 6), (2, 2, 2), 3, (0, 1), 0, 2, 1),
    ((1, 4, 5), (4, 3, 3), 2, (1, 0), 1, 1, 2),  # grouped (the non-schedule path)
])
def test_conv1d_transpose(shape, wshape, stride, pad, out_pad, dil, groups):
    x, w = relay.var("x", shape=shape), relay.var("w", shape=wshape)
    y = relay.nn.conv1d_transpose(x, w, strides=stride, padding=pad, dilation=dil,
                                  output_padding=out_pad, groups=groups)
    assert y.attrs.type_key == "relay.attrs.Conv1DTransposeAttrs"
    xv, wv = rand(*shape), rand(*wshape)
    np.testing.assert_allclose(run(y, xv, wv),
                               naive_conv1d_transpose(xv, wv, stride, pad, out_pad, dil, groups),
                               rtol=1e-4, atol=1e-4)


# --- conv2d / conv3d layouts and groups -------------------------------------------------------


@pytest.mark.parametrize("data_layout,kernel_layout,out_layout,groups", [
    ("NHWC", "HWIO", "", 1),
    ("NHWC", "OHWI", "", 1),
    ("NCHW", "HWIO", "NHWC", 1),
    ("NHWC", "HWOI", "", 6),  # depthwise, TVM's NHWC depthwise kernel layout
    ("NHWC", "HWIO", "NCHW", 2),
])
def test_conv2d_layouts(data_layout, kernel_layout, out_layout, groups):
    n, c, h, w, o, kh, kw = 2, 6, 7, 5, 6, 3, 2
    canon_x = rand(n, c, h, w)
    canon_w = rand(o, c // groups, kh, kw)
    xv = canon_x.transpose(["NCHW".index(a) for a in data_layout])
    wv = canon_w.transpose(["OIHW".index(a) for a in kernel_layout])
    x, wt = relay.var("x", shape=xv.shape), relay.var("w", shape=wv.shape)
    y = relay.nn.conv2d(x, wt, strides=(2, 1), padding=(1, 0), groups=groups,
                        data_layout=data_layout, kernel_layout=kernel_layout,
                        out_layout=out_layout)
    ref = naive_conv(canon_x, canon_w, (2, 1), (1, 0, 1, 0), (1, 1), groups)
    ref = ref.transpose(["NCHW".index(a) for a in out_layout or data_layout])
    assert checked_type(y) == relay.TensorType(ref.shape)
    np.testing.assert_allclose(run(y, xv, wv), ref, rtol=1e-4, atol=1e-4)


def test_conv2d_nhwc_fused_epilogue():
    x, w = relay.var("x", shape=(1, 6, 6, 8)), relay.var("w", shape=(3, 3, 8, 16))
    b = relay.var("b", shape=(16,))
    y = relay.nn.relu(relay.nn.bias_add(
        relay.nn.conv2d(x, w, padding=1, data_layout="NHWC", kernel_layout="HWIO"), b, axis=3))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, w, b], y)))
    fused = relay.transform.FuseOps(fuse_opt_level=2)(mod)
    assert isinstance(fused["main"].body.op, relay.Function)  # conv + bias + relu: one kernel
    xv, wv, bv = rand(1, 6, 6, 8), rand(3, 3, 8, 16), rand(16)
    ref = naive_conv(xv.transpose(0, 3, 1, 2), wv.transpose(3, 2, 0, 1), (1, 1), (1,) * 4,
                     (1, 1), 1).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(run(y, xv, wv, bv), np.maximum(ref + bv, 0), rtol=1e-4,
                               atol=1e-4)


def test_conv_layout_errors():
    x, w = relay.var("x", shape=(1, 8, 8, 3)), relay.var("w", shape=(3, 3, 3, 4))
    with pytest.raises(TypeInferenceError, match="kernel_layout='HWI' is not supported"):
        checked_type(relay.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWI"))
    w2 = relay.var("w", shape=(3, 3, 2, 4))  # HWIO with 2 input channels, data has 3
    with pytest.raises(TypeInferenceError, match="channels do not match"):
        checked_type(relay.nn.conv2d(x, w2, data_layout="NHWC", kernel_layout="HWIO"))


@pytest.mark.parametrize("c,o,groups", [(4, 4, 4), (4, 8, 4), (6, 4, 2)])
def test_conv3d_grouped_and_depthwise(c, o, groups):
    x, w = relay.var("x", shape=(1, c, 4, 5, 3)), relay.var("w", shape=(o, c // groups, 3, 3, 1))
    y = relay.nn.conv3d(x, w, padding=(1, 1, 0), groups=groups)
    xv, wv = rand(1, c, 4, 5, 3), rand(o, c // groups, 3, 3, 1)
    np.testing.assert_allclose(run(y, xv, wv),
                               naive_conv(xv, wv, (1, 1, 1), (1, 1, 0) * 2, (1, 1, 1), groups),
                               rtol=1e-4, atol=1e-4)


def test_conv3d_ndhwc():
    x, w = relay.var("x", shape=(1, 3, 4, 4, 2)), relay.var("w", shape=(2, 2, 2, 2, 3))
    y = relay.nn.conv3d(x, w, data_layout="NDHWC", kernel_layout="DHWIO")
    xv, wv = rand(1, 3, 4, 4, 2), rand(2, 2, 2, 2, 3)
    ref = naive_conv(xv.transpose(0, 4, 1, 2, 3), wv.transpose(4, 3, 0, 1, 2), (1,) * 3,
                     (0,) * 6, (1,) * 3, 1)
    np.testing.assert_allclose(run(y, xv, wv), ref.transpose(0, 2, 3, 4, 1), rtol=1e-4,
                               atol=1e-4)


# --- upsampling -------------------------------------------------------------------------------


def naive_upsampling(x, scale_h, scale_w, method, align_corners):
    """NCHW upsampling in float64 from TVM's coordinate maps."""
    n, c, h, w = x.shape
    oh, ow = int(np.rint(h * scale_h)), int(np.rint(w * scale_w))

    def src(i, size, out):
        if align_corners:
            return i * (size - 1) / (out - 1) if out > 1 else 0.0
        return i * size / out
    out = np.zeros((n, c, oh, ow))
    for yy, xx in itertools.product(range(oh), range(ow)):
        sy, sx = src(yy, h, oh), src(xx, w, ow)
        if method == "nearest_neighbor":
            iy = int(np.rint(sy)) if align_corners else int(np.floor(sy + 1e-5))
            ix = int(np.rint(sx)) if align_corners else int(np.floor(sx + 1e-5))
            out[:, :, yy, xx] = x[:, :, min(iy, h - 1), min(ix, w - 1)]
            continue
        y0, x0 = int(np.floor(sy)), int(np.floor(sx))
        ty, tx = sy - y0, sx - x0
        y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
        top = x[:, :, y0, x0] * (1 - tx) + x[:, :, y0, x1] * tx
        bottom = x[:, :, y1, x0] * (1 - tx) + x[:, :, y1, x1] * tx
        out[:, :, yy, xx] = top * (1 - ty) + bottom * ty
    return out


@pytest.mark.parametrize("method", ["nearest_neighbor", "bilinear"])
@pytest.mark.parametrize("scale_h,scale_w,align_corners", [
    (2, 2, False), (1.5, 2.5, False), (2, 3, True), (1, 0.5, False)])
def test_upsampling(method, scale_h, scale_w, align_corners):
    x = relay.var("x", shape=(1, 2, 4, 6))
    y = relay.nn.upsampling(x, scale_h, scale_w, method=method, align_corners=align_corners)
    assert y.attrs.type_key == "relay.attrs.UpSamplingAttrs"
    xv = rand(1, 2, 4, 6)
    ref = naive_upsampling(xv.astype(np.float64), scale_h, scale_w, method, align_corners)
    assert checked_type(y) == relay.TensorType(ref.shape)
    np.testing.assert_allclose(run(y, xv), ref, rtol=1e-5, atol=1e-5)


def test_upsampling_nearest_is_repeat_and_nhwc_matches_nchw():
    x = relay.var("x", shape=(2, 3, 4, 5))
    xv = rand(2, 3, 4, 5)
    np.testing.assert_array_equal(run(relay.nn.upsampling(x, 2, 3), xv),
                                  xv.repeat(2, axis=2).repeat(3, axis=3))
    xn = relay.var("x", shape=(2, 4, 5, 3))
    got = run(relay.nn.upsampling(xn, 1.5, 2, layout="NHWC", method="bilinear"),
              xv.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(got, naive_upsampling(xv, 1.5, 2, "bilinear", False)
                               .transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)


def test_upsampling_errors():
    x = relay.var("x", shape=(1, 2, 4, 4))
    with pytest.raises(TypeInferenceError, match="method='bicubic' is not supported"):
        checked_type(relay.nn.upsampling(x, 2, 2, method="bicubic"))
    with pytest.raises(TypeInferenceError, match="layout='NCHW4c' is not supported"):
        checked_type(relay.nn.upsampling(x, 2, 2, layout="NCHW4c"))


# --- reverse_reshape, pad, broadcast_to, shifts -----------------------------------------------


@pytest.mark.parametrize("shape,newshape,oshape", [
    ((2, 3, 4), (4, 0, 2), (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), (2, 3, 4)),
    ((2, 3, 4), (0, -1), (3, 8)),
    ((2, 3, 4), (-1, 0), (6, 4)),
    ((2, 3, 4), (0, -3), (2, 12)),
])
def test_reverse_reshape(shape, newshape, oshape):
    x = relay.var("x", relay.TensorType(shape, "float32"))
    z = relay.reverse_reshape(x, newshape=newshape)
    assert "newshape=" in str(z)
    assert checked_type(z) == relay.TensorType(oshape, "float32")
    xv = rand(*shape)
    np.testing.assert_array_equal(run(z, xv), xv.reshape(oshape))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
@pytest.mark.parametrize("widths", [((-1, 2), (1, -2)), ((-2, -1), (0, 0)), ((0, -3), (-4, 0))])
def test_pad_negative_widths_crop(mode, widths):
    x = relay.var("x", shape=(4, 6))
    xv = rand(4, 6)
    cropped = xv[max(-widths[0][0], 0):4 - max(-widths[0][1], 0),
                 max(-widths[1][0], 0):6 - max(-widths[1][1], 0)]
    positive = [(max(b, 0), max(a, 0)) for b, a in widths]
    kw = {"constant_values": 7.0} if mode == "constant" else {}
    ref = np.pad(cropped, positive, mode=mode, **kw)
    got = run(relay.nn.pad(x, widths, pad_value=7.0, pad_mode=mode), xv)
    np.testing.assert_array_equal(got, ref)


def test_pad_crop_errors():
    x = relay.var("x", shape=(4, 6))
    with pytest.raises(TypeInferenceError, match="crops more than its 4 values"):
        checked_type(relay.nn.pad(x, ((-3, -2), (0, 0))))
    with pytest.raises(TypeInferenceError, match="reflect padding"):
        checked_type(relay.nn.pad(x, ((-2, 2), (0, 0)), pad_mode="reflect"))


def test_broadcast_to_constant_shape():
    x = relay.var("x", shape=(3, 1))
    y = relay.broadcast_to(x, relay.const(np.array([2, 3, 4], "int64")))
    assert y.attrs.shape == (2, 3, 4)
    xv = rand(3, 1)
    np.testing.assert_array_equal(run(y, xv), np.broadcast_to(xv, (2, 3, 4)))
    assert relay.broadcast_to(relay.var("s", shape=(1,)), 5).attrs.shape == (5,)
    shape = relay.var("shape", shape=(3,), dtype="int64")  # computed: dyn.broadcast_to
    assert relay.broadcast_to(x, shape).op.name == "dyn.broadcast_to"


@pytest.mark.parametrize("op,ref", [(relay.right_shift, np.right_shift),
                                    (relay.left_shift, np.left_shift)])
def test_binary_int_broadcast_shifts(op, ref):
    # TVM's test_op_level4.py::test_binary_int_broadcast_1
    x = relay.var("x", relay.TensorType((10, 4), "int32"))
    y = relay.var("y", relay.TensorType((5, 10, 1), "int32"))
    z = op(x, y)
    assert checked_type(z) == relay.TensorType((5, 10, 4), "int32")
    x_data = RNG.integers(1, 10000, size=(10, 4)).astype("int32")
    y_data = RNG.integers(1, 31, size=(5, 10, 1)).astype("int32")
    np.testing.assert_array_equal(run(z, x_data, y_data), ref(x_data, y_data))


@pytest.mark.parametrize("dtype", ["uint8", "int64"])
def test_shift_dtypes_and_type_rules(dtype):
    x = relay.var("x", shape=(6,), dtype=dtype)
    xv = np.array([0, 1, 2, 3, 100, 255], dtype)
    got = run(relay.left_shift(x, relay.const(3, dtype)), xv)
    np.testing.assert_array_equal(got, np.left_shift(xv, np.array(3, dtype)))
    with pytest.raises(TypeInferenceError, match="dtype"):  # one dtype on both sides, as TVM
        checked_type(relay.left_shift(x, relay.const(3, "int16")))
    f = relay.var("f", shape=(2,))
    with pytest.raises(TypeInferenceError, match="integer"):
        checked_type(relay.right_shift(f, f))


def test_stop_fusion_is_the_identity():
    x = relay.var("x", shape=(2, 3))
    xv = rand(2, 3)
    np.testing.assert_allclose(run(relay.annotation.stop_fusion(relay.exp(x)), xv), np.exp(xv),
                               rtol=1e-6)
