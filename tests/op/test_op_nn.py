"""relay.nn ops: attrs as TVM stores them, type relations, references against naive loops."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op._opcheck import check, infer
from compiler.errors import CompilerError, TypeInferenceError
from compiler.ir.expr import Call, TupleGetItem, TupleWrapper, var
from compiler.ir.types import TensorType, TupleType
from compiler.op import nn
from compiler.op.registry import OpPattern, get_def

RNG = np.random.default_rng(1)


def x(shape, dtype="float32", name="x"):
    return var(name, shape=shape, dtype=dtype)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def naive_conv2d(data, weight, stride, pad, dil, groups):
    n, c, h, w = data.shape
    o, i, kh, kw = weight.shape
    pt, pl, pb, pr = pad
    xp = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b in range(n):
        for oc in range(o):
            g = oc // og
            for y in range(oh):
                for z in range(ow):
                    for ic in range(i):
                        for p in range(kh):
                            for q in range(kw):
                                out[b, oc, y, z] += (xp[b, g * i + ic, y * stride[0] + p * dil[0],
                                                        z * stride[1] + q * dil[1]]
                                                     * weight[oc, ic, p, q])
    return out


def test_conv2d_attrs_as_tvm():
    call = nn.conv2d(x((1, 3, 8, 8)), x((4, 3, 3, 3), name="w"), strides=2, padding=1,
                     kernel_size=3, channels=4)
    assert call.op.name == "nn.conv2d" and call.attrs.type_key == "relay.attrs.Conv2DAttrs"
    assert list(call.attrs) == ["strides", "padding", "dilation", "groups", "channels",
                                "kernel_size", "data_layout", "kernel_layout", "out_layout",
                                "out_dtype"]
    assert call.attrs.padding == (1, 1, 1, 1) and call.attrs.strides == (2, 2)
    assert call.attrs.kernel_size == (3, 3)
    assert nn.conv2d(x((1, 3, 8, 8)), x((4, 3, 3, 3), name="w"),
                     padding=(1, 2)).attrs.padding == (1, 2, 1, 2)
    assert get_def("nn.conv2d").pattern == OpPattern.OUT_ELEMWISE_FUSABLE


@pytest.mark.parametrize("shape,wshape,stride,pad,dil,groups", [
    ((1, 3, 7, 7), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 4, 9, 8), (6, 2, 3, 2), (2, 1), (0, 1, 2, 0), (1, 2), 2),
    ((1, 4, 6, 6), (4, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),  # depthwise
])
def test_conv2d_reference(shape, wshape, stride, pad, dil, groups):
    data, weight = rand(*shape), rand(*wshape)
    call = nn.conv2d(x(shape), x(wshape, name="w"), strides=stride, padding=pad, dilation=dil,
                     groups=groups)
    out = check(call, data, weight)
    np.testing.assert_allclose(out, naive_conv2d(data, weight, stride, pad, dil, groups),
                               rtol=1e-4, atol=1e-4)


def test_conv2d_int8_out_dtype():
    call = nn.conv2d(x((1, 2, 4, 4), "int8"), x((3, 2, 1, 1), "int8", "w"), out_dtype="int32")
    data = RNG.integers(-128, 127, (1, 2, 4, 4)).astype("int8")
    weight = RNG.integers(-128, 127, (3, 2, 1, 1)).astype("int8")
    out = check(call, data, weight)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, naive_conv2d(data, weight, (1, 1), (0,) * 4, (1, 1), 1))


def test_conv2d_errors():
    with pytest.raises(TypeInferenceError, match="nn.conv2d: channels do not match"):
        infer(nn.conv2d(x((1, 3, 8, 8)), x((4, 2, 3, 3), name="w")))
    with pytest.raises(TypeInferenceError, match="nn.conv2d: data_layout='NCHW8c' is not "
                                                 "supported"):
        infer(nn.conv2d(x((1, 8, 8, 3)), x((4, 3, 3, 3), name="w"), data_layout="NCHW8c"))
    with pytest.raises(TypeInferenceError, match="nn.conv2d: data and weight must be 4-D"):
        infer(nn.conv2d(x((3, 8, 8)), x((4, 3, 3, 3), name="w")))
    with pytest.raises(TypeInferenceError, match="output height"):
        infer(nn.conv2d(x((1, 3, 2, 8)), x((4, 3, 3, 3), name="w")))
    with pytest.raises(CompilerError, match="nn.conv2d has no attribute 'stride'"):
        from compiler.op.registry import make_call
        make_call("nn.conv2d", [x((1, 3, 8, 8)), x((4, 3, 3, 3), name="w")], stride=(1, 1))


@pytest.mark.parametrize("stride,pad,out_pad,dil,groups", [
    ((1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1),
    ((2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    ((2, 3), (0, 1, 1, 0), (1, 0), (2, 1), 2),
])
def test_conv2d_transpose_reference(stride, pad, out_pad, dil, groups):
    n, c, h, w, og, kh, kw = 1, 4, 3, 4, 3, 3, 2
    data, weight = rand(n, c, h, w), rand(c, og, kh, kw)
    call = nn.conv2d_transpose(x(data.shape), x(weight.shape, name="w"), strides=stride,
                               padding=pad, output_padding=out_pad, dilation=dil, groups=groups)
    out = check(call, data, weight)
    # definition by scattering: every input pixel adds weight * value at y*s - pad + k*d
    ig = c // groups
    expected = np.zeros(out.shape)
    for ci in range(c):
        g = ci // ig
        for y in range(h):
            for z in range(w):
                for o in range(og):
                    for p in range(kh):
                        for q in range(kw):
                            oy = y * stride[0] - pad[0] + p * dil[0]
                            oz = z * stride[1] - pad[1] + q * dil[1]
                            if 0 <= oy < out.shape[2] and 0 <= oz < out.shape[3]:
                                expected[0, g * og + o, oy, oz] += data[0, ci, y, z] * weight[
                                    ci, o, p, q]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_dense_matmul_batch_matmul():
    a, wt = rand(2, 5, 3), rand(4, 3)
    out = check(nn.dense(x((2, 5, 3)), x((4, 3), name="w"), units=4), a, wt)
    np.testing.assert_allclose(out, a @ wt.T, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeInferenceError, match="nn.dense: reduction dims differ"):
        infer(nn.dense(x((2, 5)), x((4, 3), name="w")))
    m, k = rand(3, 5), rand(5, 2)
    np.testing.assert_allclose(check(nn.matmul(x((3, 5)), x((5, 2), name="y")), m, k), m @ k,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(check(nn.matmul(x((5, 3)), x((2, 5), name="y"), transpose_a=True,
                                               transpose_b=True), m.T, k.T), m @ k, rtol=1e-5,
                               atol=1e-5)
    p, q = rand(2, 3, 4), rand(1, 5, 4)
    call = nn.batch_matmul(x((2, 3, 4)), x((1, 5, 4), name="y"))
    assert call.attrs.transpose_b is True
    assert infer(call) == TensorType((2, 3, 5))
    np.testing.assert_allclose(check(call, p, q), p @ q.transpose(0, 2, 1), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(TypeInferenceError, match="nn.batch_matmul: batch dims 2 and 3"):
        infer(nn.batch_matmul(x((2, 3, 4)), x((3, 5, 4), name="y")))


def test_bias_add_activations_softmax():
    d, b = rand(2, 3, 4), rand(3)
    np.testing.assert_allclose(check(nn.bias_add(x((2, 3, 4)), x((3,), name="b")), d, b),
                               d + b[:, None], rtol=1e-6)
    np.testing.assert_allclose(check(nn.bias_add(x((2, 3, 4)), x((4,), name="b"), axis=-1),
                                     d, rand(4)).shape, (2, 3, 4))
    with pytest.raises(TypeInferenceError, match=r"nn.bias_add: bias must have shape \(3,\)"):
        infer(nn.bias_add(x((2, 3, 4)), x((4,), name="b")))
    np.testing.assert_array_equal(check(nn.relu(x((2, 3, 4))), d), np.maximum(d, 0))
    np.testing.assert_allclose(check(nn.leaky_relu(x((2, 3, 4)), 0.2), d),
                               np.where(d < 0, 0.2 * d, d), rtol=1e-6)
    alpha = np.array([0.1, 0.2, 0.3], "float32")
    np.testing.assert_allclose(check(nn.prelu(x((2, 3, 4)), x((3,), name="a")), d, alpha),
                               np.where(d < 0, d * alpha[:, None], d), rtol=1e-6)
    sm = check(nn.softmax(x((2, 3, 4)), axis=1), d)
    np.testing.assert_allclose(sm.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(check(nn.log_softmax(x((2, 3, 4))), d),
                               np.log(np.exp(d) / np.exp(d).sum(-1, keepdims=True)), rtol=1e-5)
    assert get_def("nn.softmax").pattern == OpPattern.OUT_ELEMWISE_FUSABLE  # as in TVM
    with pytest.raises(TypeInferenceError, match="nn.softmax: axis=3 is out of range"):
        infer(nn.softmax(x((2, 3, 4)), axis=3))


def naive_pool(data, k, s, pad, kind, include_pad=False):
    n, c, h, w = data.shape
    pt, pl, pb, pr = pad
    oh, ow = (h + pt + pb - k[0]) // s[0] + 1, (w + pl + pr - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow), data.dtype)
    for y in range(oh):
        for z in range(ow):
            y0, z0 = y * s[0] - pt, z * s[1] - pl
            win = data[:, :, max(y0, 0):min(y0 + k[0], h), max(z0, 0):min(z0 + k[1], w)]
            if kind == "max":
                out[:, :, y, z] = win.max(axis=(2, 3))
            else:
                div = k[0] * k[1] if include_pad else win.shape[2] * win.shape[3]
                out[:, :, y, z] = win.sum(axis=(2, 3)) / div
    return out


@pytest.mark.parametrize("k,s,pad", [((2, 2), (2, 2), (0, 0, 0, 0)),
                                     ((3, 3), (2, 1), (1, 1, 1, 0)),
                                     ((3, 2), (1, 2), (1, 0, 2, 1))])
def test_pools(k, s, pad):
    data = rand(2, 3, 7, 6)
    mp = nn.max_pool2d(x(data.shape), pool_size=k, strides=s, padding=pad)
    assert mp.attrs.type_key == "relay.attrs.MaxPool2DAttrs"
    np.testing.assert_allclose(check(mp, data), naive_pool(data, k, s, pad, "max"))
    for include in (False, True):
        ap = nn.avg_pool2d(x(data.shape), pool_size=k, strides=s, padding=pad,
                           count_include_pad=include)
        np.testing.assert_allclose(check(ap, data), naive_pool(data, k, s, pad, "avg", include),
                                   rtol=1e-5, atol=1e-6)
    nhwc = nn.max_pool2d(x((2, 7, 6, 3)), pool_size=k, strides=s, padding=pad, layout="NHWC")
    np.testing.assert_allclose(check(nhwc, data.transpose(0, 2, 3, 1)),
                               naive_pool(data, k, s, pad, "max").transpose(0, 2, 3, 1))


def test_pool_ceil_mode_and_global():
    call = nn.max_pool2d(x((1, 1, 5, 5)), pool_size=2, strides=2, ceil_mode=True)
    assert infer(call) == TensorType((1, 1, 3, 3))
    data = np.arange(25, dtype="float32").reshape(1, 1, 5, 5)
    np.testing.assert_array_equal(check(call, data)[0, 0], [[6, 8, 9], [16, 18, 19],
                                                            [21, 23, 24]])
    assert infer(nn.max_pool2d(x((1, 1, 5, 5)), pool_size=2, strides=2)) == TensorType(
        (1, 1, 2, 2))
    d = rand(2, 3, 4, 5)
    np.testing.assert_allclose(check(nn.global_avg_pool2d(x(d.shape)), d),
                               d.mean(axis=(2, 3), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(check(nn.global_max_pool2d(x(d.shape)), d),
                               d.max(axis=(2, 3), keepdims=True))
    out = check(nn.adaptive_avg_pool2d(x(d.shape), output_size=(2, 3)), d)
    np.testing.assert_allclose(out[:, :, 0, 0], d[:, :, 0:2, 0:2].mean(axis=(2, 3)), rtol=1e-5)
    np.testing.assert_allclose(out[:, :, 1, 1], d[:, :, 2:4, 1:4].mean(axis=(2, 3)), rtol=1e-5)
    with pytest.raises(TypeInferenceError, match="nn.max_pool2d: layout='NCHW4c'"):
        infer(nn.max_pool2d(x((1, 1, 5, 5)), layout="NCHW4c"))


def test_avg_pool_ceil_mode_include_pad_divides_by_taps_inside_input_and_pads():
    """The last (partial) ceil-mode window counts only its taps inside input + pads, as
    onnxruntime, the ONNX reference and TVM do, not the full kernel."""
    data = np.arange(25, dtype="float32").reshape(1, 1, 5, 5)
    call = nn.avg_pool2d(x(data.shape), pool_size=2, strides=2, ceil_mode=True,
                         count_include_pad=True)
    out = check(call, data)[0, 0]
    assert out[0, 2] == (4 + 9) / 2 and out[2, 0] == (20 + 21) / 2 and out[2, 2] == 24
    assert out[0, 0] == (0 + 1 + 5 + 6) / 4
    # the taps in the begin padding count, the ones past the end of input + pads do not
    call = nn.avg_pool2d(x(data.shape), pool_size=3, strides=2, padding=(1, 1, 0, 0),
                         ceil_mode=True, count_include_pad=True)
    out = check(call, data)[0, 0]
    assert out.shape == (3, 3)
    np.testing.assert_allclose(out[2, 2], (18 + 19 + 23 + 24) / 4)
    np.testing.assert_allclose(out[0, 0], (0 + 1 + 5 + 6) / 9)
    np.testing.assert_allclose(out[1, 2], data[0, 0, 1:4, 3:5].sum() / 6)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_max_pool_window_over_padding_only_is_the_lowest_finite_value(dtype):
    data = (RNG.standard_normal((1, 2, 2, 2)) * 10).astype(dtype)
    call = nn.max_pool2d(x(data.shape, dtype), pool_size=2, dilation=3, padding=1)
    out = check(call, data)
    lowest = np.finfo(dtype).min if dtype.startswith("float") else np.iinfo(dtype).min
    assert out.shape == (1, 2, 1, 1) and (out == lowest).all()


def test_batch_norm_tuple_and_inference_reference():
    d, g, b, m, v = rand(2, 3, 4), rand(3), rand(3), rand(3), np.abs(rand(3)) + 0.5
    args = [x((2, 3, 4))] + [x((3,), name=n) for n in "gbmv"]
    bn = nn.batch_norm(*args, epsilon=1e-3)
    assert isinstance(bn, TupleWrapper) and len(bn) == 3
    assert isinstance(bn[0], TupleGetItem) and bn[0].index == 0
    assert bn.astuple().attrs.type_key == "relay.attrs.BatchNormAttrs"
    assert infer(bn.astuple()) == TupleType([TensorType((2, 3, 4)), TensorType((3,)),
                                             TensorType((3,))])
    out = check(bn, d, g, b, m, v)[0]
    expected = (d - m[:, None]) / np.sqrt(v[:, None] + 1e-3) * g[:, None] + b[:, None]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeInferenceError, match=r"nn.batch_norm: moving_var must have shape"):
        infer(nn.batch_norm(*args[:4], x((4,), name="v")).astuple())


def test_layer_instance_group_norm():
    d, g, b = rand(2, 4, 3), rand(3), rand(3)
    out = check(nn.layer_norm(x((2, 4, 3)), x((3,), name="g"), x((3,), name="b")), d, g, b)
    mu, var_ = d.mean(-1, keepdims=True), d.var(-1, keepdims=True)
    np.testing.assert_allclose(out, (d - mu) / np.sqrt(var_ + 1e-5) * g + b, rtol=1e-4,
                               atol=1e-5)
    assert get_def("nn.layer_norm").pattern == OpPattern.OPAQUE
    d4, g4 = rand(2, 4, 3, 3), rand(4)
    out = check(nn.instance_norm(x(d4.shape), x((4,), name="g"), x((4,), name="b")), d4, g4,
                np.zeros(4, "float32"))
    mu, var_ = d4.mean((2, 3), keepdims=True), d4.var((2, 3), keepdims=True)
    np.testing.assert_allclose(out, (d4 - mu) / np.sqrt(var_ + 1e-5) * g4[:, None, None],
                               rtol=1e-4, atol=1e-5)
    out = check(nn.group_norm(x(d4.shape), x((4,), name="g"), x((4,), name="b"), num_groups=2),
                d4, np.ones(4, "float32"), np.zeros(4, "float32"))
    grp = d4.reshape(2, 2, 2, 3, 3)
    mu, var_ = grp.mean((2, 3, 4), keepdims=True), grp.var((2, 3, 4), keepdims=True)
    np.testing.assert_allclose(out, ((grp - mu) / np.sqrt(var_ + 1e-5)).reshape(d4.shape),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeInferenceError, match="nn.group_norm: 4 channels"):
        infer(nn.group_norm(x(d4.shape), x((4,), name="g"), x((4,), name="b"), num_groups=3))


def test_lrn_matches_tvm_formula():
    d = rand(1, 5, 2, 2)
    out = check(nn.lrn(x(d.shape), size=3, alpha=0.5, beta=0.75, bias=1.0), d)
    for c in range(5):
        lo, hi = max(0, c - 1), min(5, c + 2)
        sq = (d[:, lo:hi] ** 2).sum(axis=1)
        np.testing.assert_allclose(out[:, c], d[:, c] / (1.0 + 0.5 * sq / 3) ** 0.75, rtol=1e-5)


def test_dropout_is_stateful_tuple_get_item():
    out = nn.dropout(x((2, 3)), rate=0.3)
    assert isinstance(out, TupleGetItem) and out.index == 0
    call = out.tuple_value
    assert isinstance(call, Call) and call.op.name == "nn.dropout"
    assert get_def("nn.dropout").stateful and get_def("nn.dropout").pattern == OpPattern.OPAQUE
    assert call.attrs.rate == 0.3
    d = rand(2, 3)
    np.testing.assert_array_equal(check(call, d)[0], d)


def test_pad_modes():
    d = np.arange(6, dtype="float32").reshape(2, 3)
    call = nn.pad(x((2, 3)), ((1, 0), (2, 1)), pad_value=9)
    assert call.attrs.pad_width == ((1, 0), (2, 1)) and len(call.args) == 2
    np.testing.assert_array_equal(check(call, d, np.array(9, "int32")),
                                  np.pad(d, ((1, 0), (2, 1)), constant_values=9))
    for mode in ("edge", "reflect"):
        call = nn.pad(x((2, 3)), ((1, 1), (2, 1)), pad_mode=mode)
        np.testing.assert_array_equal(check(call, d, np.array(0, "int32")),
                                      np.pad(d, ((1, 1), (2, 1)), mode=mode))
    with pytest.raises(TypeInferenceError, match="nn.pad: pad_width must hold one"):
        infer(nn.pad(x((2, 3)), ((1, 1),)))


def test_batch_flatten_and_pixel_shuffle():
    d = rand(2, 8, 2, 3)
    np.testing.assert_array_equal(check(nn.batch_flatten(x(d.shape)), d), d.reshape(2, -1))
    up = check(nn.depth_to_space(x(d.shape), 2), d)
    assert up.shape == (2, 2, 4, 6)
    np.testing.assert_array_equal(up[0, 0, 1, 0], d[0, 2 * 2, 0, 0])  # DCR: depth = (by*2+bx)*C
    back = check(nn.space_to_depth(x(up.shape), 2), up)
    np.testing.assert_array_equal(back, d)
    crd = check(nn.depth_to_space(x(d.shape), 2, mode="CRD"), d)
    np.testing.assert_array_equal(crd[0, 1, 1, 0], d[0, 1 * 4 + 2, 0, 0])


def test_relay_nn_namespace_reexports():
    import compiler.relay.nn as relay_nn
    for name in ("conv2d", "dense", "batch_norm", "dropout", "max_pool2d", "pad", "softmax"):
        assert getattr(relay_nn, name) is getattr(nn, name)
