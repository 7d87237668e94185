"""ForwardFoldScaleAxis / BackwardFoldScaleAxis: TVM's test_pass_fold_scale_axis.py cases
(non-blocked layouts; weights annotated), compared structurally and numerically."""
from __future__ import annotations

import numpy as np

import compiler as tvm
from compiler import relay
from compiler.relay import transform

RNG = np.random.default_rng(5)


def _get_positive_scale(size):
    return RNG.uniform(0.5, 1, size=size).astype("float32")


def run_opt_pass(expr, opt_pass):
    mod = opt_pass(tvm.IRModule.from_expr(expr))
    return mod["main"]


def _same_numbers(before, after, *shapes):
    """before and after compute the same function (graph executor, random inputs)."""
    inputs = [RNG.standard_normal(s).astype("float32") for s in shapes]
    run = [relay.create_executor("graph", mod=tvm.IRModule.from_expr(f)).evaluate()(*inputs)
           .numpy() for f in (before, after)]
    np.testing.assert_allclose(run[0], run[1], rtol=1e-4, atol=1e-4)


def test_fold_fwd_simple():
    def before(x, conv_weight, in_bias, in_scale, channels):
        args = [x, conv_weight, in_bias]
        x = relay.multiply(x, in_scale)
        x = relay.nn.relu(x)
        x = relay.add(x, in_bias)
        y = relay.nn.conv2d(x, conv_weight, channels=channels, kernel_size=(3, 3),
                            padding=(1, 1))
        return relay.Function(args, y)

    def expected(x, conv_weight, in_bias, in_scale, channels):
        args = [x, conv_weight, in_bias]
        squeezed_scale = relay.squeeze(in_scale, axis=[1, 2])
        x = relay.nn.relu(x)
        in_bias = relay.divide(in_bias, relay.expand_dims(squeezed_scale, axis=1, num_newaxis=2))
        x = relay.add(x, in_bias)
        conv_weight = relay.multiply(
            conv_weight, relay.expand_dims(squeezed_scale, axis=1, num_newaxis=2))
        y = relay.nn.conv2d(x, conv_weight, channels=channels, kernel_size=(3, 3),
                            padding=(1, 1))
        return relay.Function(args, y)

    shape, channels = (2, 4, 10, 10), 2
    x = relay.var("x", shape=shape)
    weight = relay.var("weight", shape=(channels, 4, 3, 3))
    in_bias = relay.var("in_bias", shape=(4, 1, 1))
    in_scale = relay.const(_get_positive_scale((4, 1, 1)))
    y1 = run_opt_pass(before(x, weight, in_bias, in_scale, channels), transform.InferType())
    y1_folded = run_opt_pass(y1, transform.ForwardFoldScaleAxis())
    y1_expected = run_opt_pass(expected(x, weight, in_bias, in_scale, channels),
                               transform.InferType())
    tvm.assert_structural_equal(y1_folded, y1_expected)
    _same_numbers(y1, y1_folded, shape, (channels, 4, 3, 3), (4, 1, 1))


def test_fold_fwd_dual_path():
    """The scaled value is consumed by two depthwise NHWC convolutions."""

    def conv(x, w, channels):
        return relay.nn.conv2d(x, w, channels=channels, kernel_size=(3, 3),
                               data_layout="NHWC", kernel_layout="HWIO", groups=channels,
                               padding=(1, 1))

    def before(x, conv_weight, in_bias, in_scale, channels):
        args = [x, conv_weight, in_bias]
        x = relay.subtract(relay.nn.relu(relay.multiply(in_scale, x)), in_bias)
        return relay.Function(args, relay.add(conv(x, conv_weight, channels),
                                              conv(x, conv_weight, channels)))

    def expected(x, conv_weight, in_bias, in_scale, channels):
        args = [x, conv_weight, in_bias]
        x = relay.subtract(relay.nn.relu(x), relay.divide(in_bias, in_scale))
        y1 = conv(x, relay.multiply(conv_weight, in_scale), channels)
        y2 = conv(x, relay.multiply(conv_weight, in_scale), channels)
        return relay.Function(args, relay.add(y1, y2))

    dshape, channels = (2, 4, 10, 3), 3
    x = relay.var("x", shape=dshape)
    weight = relay.var("weight", shape=(3, 3, 1, channels))
    in_bias = relay.var("in_bias", shape=(channels,))
    in_scale = relay.const(_get_positive_scale(channels))
    y1 = run_opt_pass(before(x, weight, in_bias, in_scale, channels), transform.InferType())
    y1_folded = run_opt_pass(y1, transform.ForwardFoldScaleAxis())
    y1_expected = run_opt_pass(expected(x, weight, in_bias, in_scale, channels),
                               transform.InferType())
    tvm.assert_structural_equal(y1_folded, y1_expected)
    _same_numbers(y1, y1_folded, dshape, (3, 3, 1, channels), (channels,))


def _nhwc_conv(x, weight, channels):
    return relay.nn.conv2d(x, weight, channels=channels, kernel_size=(3, 3),
                           data_layout="NHWC", kernel_layout="HWIO", padding=(1, 1))


def test_fold_fwd_fail():
    """The scaled value also reaches leaky_relu and the output: nothing folds."""
    x = relay.var("x", shape=(2, 11, 10, 4))
    weight = relay.var("weight", shape=(3, 3, 4, 4))
    in_scale = relay.const(_get_positive_scale(size=(4,)))
    xs = relay.multiply(x, in_scale)
    z = relay.add(_nhwc_conv(relay.nn.leaky_relu(xs, alpha=0.1), weight, 4), xs)
    y1 = run_opt_pass(relay.Function(relay.analysis.free_vars(z), z), transform.InferType())
    tvm.assert_structural_equal(y1, run_opt_pass(y1, transform.ForwardFoldScaleAxis()))


def test_fold_fwd_relu_fail():
    """The scale can not pass relu unless it is a positive constant."""
    for in_scale in (relay.var("in_scale", shape=(4,)),
                     relay.const(-_get_positive_scale((4,)))):
        x = relay.var("x", shape=(2, 11, 10, 4))
        weight = relay.var("weight", shape=(3, 3, 4, 4))
        xs = relay.multiply(x, in_scale)
        z = relay.add(_nhwc_conv(relay.nn.relu(xs), weight, 4), xs)
        y1 = run_opt_pass(relay.Function(relay.analysis.free_vars(z), z), transform.InferType())
        tvm.assert_structural_equal(y1, run_opt_pass(y1, transform.ForwardFoldScaleAxis()))


def test_fold_fwd_let_fail():
    x = relay.var("x", shape=(2, 11, 10, 4))
    weight = relay.var("weight", shape=(3, 3, 4, 4))
    in_bias = relay.var("in_bias", shape=(4,))
    in_scale = relay.const(_get_positive_scale(size=(4,)))
    xs = relay.add(relay.nn.relu(relay.multiply(x, in_scale)), in_bias)
    x_var = relay.Var("x_var")
    let = relay.Let(x_var, xs, relay.add(_nhwc_conv(x_var, weight, 4), xs))
    y1 = run_opt_pass(relay.Function([x, weight, in_bias], let), transform.InferType())
    tvm.assert_structural_equal(y1, run_opt_pass(y1, transform.ForwardFoldScaleAxis()))


def test_fold_fwd_negative_scale():
    x = relay.var("x", shape=(2, 4, 10, 10))
    weight = relay.var("weight", shape=(4, 4, 3, 3))
    in_scale = relay.const(-_get_positive_scale((4, 1, 1)))

    def conv(data, w):
        return relay.nn.conv2d(data, w, channels=4, kernel_size=(3, 3), padding=(1, 1))
    before = relay.Function([x, weight], conv(relay.multiply(x, in_scale), weight))
    squeezed = relay.squeeze(in_scale, axis=[1, 2])
    expected = relay.Function([x, weight], conv(x, relay.multiply(
        weight, relay.expand_dims(squeezed, axis=1, num_newaxis=2))))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.ForwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))
    _same_numbers(y1, y1_folded, (2, 4, 10, 10), (4, 4, 3, 3))


def test_fold_fwd_dense():
    for data_shape, weight_shape in (((2, 4), (3, 4)), ((3, 5), (4, 5))):
        x = relay.var("x", shape=data_shape)
        weight = relay.var("weight", shape=weight_shape)
        in_bias = relay.var("in_bias", shape=(data_shape[1],))
        in_scale = relay.const(_get_positive_scale((data_shape[1],)))
        args = [x, weight, in_bias]
        before = relay.Function(args, relay.nn.dense(
            relay.add(relay.nn.relu(relay.multiply(x, in_scale)), in_bias), weight))
        expected = relay.Function(args, relay.nn.dense(
            relay.add(relay.nn.relu(x), relay.divide(in_bias, in_scale)),
            relay.multiply(weight, in_scale)))
        y1 = run_opt_pass(before, transform.InferType())
        y1_folded = run_opt_pass(y1, transform.ForwardFoldScaleAxis())
        tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))
        _same_numbers(y1, y1_folded, data_shape, weight_shape, (data_shape[1],))


def _conv(x, w, channels, **kw):
    return relay.nn.conv2d(x, w, channels=channels, kernel_size=(3, 3), padding=(1, 1), **kw)


def test_fold_bwd_simple():
    shape, channels = (2, 4, 10, 10), 8
    x = relay.var("x", shape=shape)
    weight = relay.var("weight", shape=(channels, 4, 3, 3))
    out_bias = relay.var("out_bias", shape=(channels,))
    out_scale = relay.const(_get_positive_scale((channels, 1, 1)))
    args = [x, weight, out_bias]
    bias = relay.expand_dims(out_bias, axis=1, num_newaxis=2)
    before = relay.Function(args, relay.multiply(
        relay.nn.relu(relay.add(_conv(x, weight, channels), bias)), out_scale))
    squeezed = relay.squeeze(out_scale, axis=[1, 2])
    w = relay.multiply(weight, relay.expand_dims(squeezed, axis=1, num_newaxis=3))
    b = relay.multiply(relay.expand_dims(out_bias, axis=1, num_newaxis=2),
                       relay.expand_dims(squeezed, axis=1, num_newaxis=2))
    expected = relay.Function(args, relay.nn.relu(relay.add(_conv(x, w, channels), b)))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.BackwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))
    _same_numbers(y1, y1_folded, shape, (channels, 4, 3, 3), (channels,))


def test_fold_bwd_dual_path():
    shape, channels = (2, 4, 10, 10), 8
    x = relay.var("x", shape=shape)
    weight = relay.var("weight", shape=(channels, 4, 3, 3))
    out_scale = relay.const(_get_positive_scale((channels, 1, 1)))
    before = relay.Function([x, weight], relay.multiply(relay.add(
        relay.nn.relu(_conv(x, weight, channels)), relay.nn.relu(_conv(x, weight, channels))),
        out_scale))
    squeezed = relay.squeeze(out_scale, axis=[1, 2])

    def folded_weight():
        return relay.multiply(weight, relay.expand_dims(squeezed, axis=1, num_newaxis=3))
    expected = relay.Function([x, weight], relay.add(
        relay.nn.relu(_conv(x, folded_weight(), channels)),
        relay.nn.relu(_conv(x, folded_weight(), channels))))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.BackwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))
    _same_numbers(y1, y1_folded, shape, (channels, 4, 3, 3))


def test_fold_bwd_dual_consumer():
    shape, channels = (2, 4, 10, 10), 4
    x = relay.var("x", shape=shape)
    weight = relay.var("weight", shape=(channels, 4, 3, 3))
    out_scale = relay.const(_get_positive_scale((channels, 1, 1)))

    def scaled(data):
        return relay.nn.relu(relay.multiply(_conv(data, weight, channels), out_scale))
    y0 = scaled(x)
    before = relay.Function([x, weight], relay.add(scaled(y0), scaled(y0)))

    def folded(data):
        squeezed = relay.squeeze(out_scale, axis=[1, 2])
        w = relay.multiply(weight, relay.expand_dims(squeezed, axis=1, num_newaxis=3))
        return relay.nn.relu(_conv(data, w, channels))
    e0 = folded(x)
    expected = relay.Function([x, weight], relay.add(folded(e0), folded(e0)))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.BackwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))


def test_fold_bwd_fail():
    shape, channels = (4, 4, 10, 10), 4
    x = relay.var("x", shape=shape)
    weight = relay.var("weight", shape=(channels, 4, 3, 3))
    out_scale = relay.const(_get_positive_scale((channels, 1, 1)))
    # the two paths give the channel on different axes (out_layout CNHW)
    y1 = relay.nn.relu(_conv(x, weight, channels))
    y2 = relay.nn.relu(_conv(x, weight, channels, out_layout="CNHW"))
    fail1 = relay.Function([x, weight], relay.multiply(relay.add(y1, y2), out_scale))
    # the conv output is used by the relu too
    c = _conv(x, weight, channels)
    fail2 = relay.Function([x, weight], relay.add(relay.multiply(c, out_scale), relay.nn.relu(c)))
    for before in (fail1, fail2):
        y = run_opt_pass(before, transform.InferType())
        tvm.assert_structural_equal(run_opt_pass(y, transform.BackwardFoldScaleAxis()), y)


def test_fold_bwd_relu_fail():
    for out_scale in (relay.var("in_scale", shape=(4, 1, 1)),
                      relay.const(-_get_positive_scale((4, 1, 1)))):
        x = relay.var("x", shape=(4, 4, 10, 10))
        weight = relay.var("weight", shape=(4, 4, 3, 3))
        y = relay.multiply(relay.nn.relu(_conv(x, weight, 4)), out_scale)
        y1 = run_opt_pass(relay.Function(relay.analysis.free_vars(y), y), transform.InferType())
        tvm.assert_structural_equal(y1, run_opt_pass(y1, transform.BackwardFoldScaleAxis()))


def test_fold_bwd_negative_scale():
    x = relay.var("x", shape=(2, 4, 10, 10))
    weight = relay.var("weight", shape=(8, 4, 3, 3))
    out_scale = relay.const(-_get_positive_scale((8, 1, 1)))
    before = relay.Function([x, weight], relay.multiply(_conv(x, weight, 8), out_scale))
    squeezed = relay.squeeze(out_scale, axis=[1, 2])
    expected = relay.Function([x, weight], _conv(x, relay.multiply(
        weight, relay.expand_dims(squeezed, axis=1, num_newaxis=3)), 8))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.BackwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))


def test_fold_bwd_dense():
    for data_shape, weight_shape in (((2, 4), (3, 4)), ((3, 5), (4, 5))):
        x = relay.var("x", shape=data_shape)
        weight = relay.var("weight", shape=weight_shape)
        in_bias = relay.var("in_bias", shape=(weight_shape[0],))
        in_scale = relay.const(_get_positive_scale((weight_shape[0],)))
        args = [x, weight, in_bias]
        before = relay.Function(args, relay.multiply(
            relay.nn.relu(relay.add(relay.nn.dense(x, weight), in_bias)), in_scale))
        expected = relay.Function(args, relay.nn.relu(relay.add(
            relay.nn.dense(x, relay.multiply(weight, relay.expand_dims(in_scale, axis=1))),
            relay.multiply(in_bias, in_scale))))
        y1 = run_opt_pass(before, transform.InferType())
        y1_folded = run_opt_pass(y1, transform.BackwardFoldScaleAxis())
        tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))
        _same_numbers(y1, y1_folded, data_shape, weight_shape, (weight_shape[0],))


def test_fold_bwd_bias_add():
    x = relay.var("x", shape=(2, 4, 10, 10))
    weight = relay.var("weight", shape=(4, 4, 3, 3))
    out_bias = relay.var("out_bias", shape=(4,))
    out_scale = relay.const(_get_positive_scale((4, 1, 1)))
    args = [x, weight, out_bias]
    before = relay.Function(args, relay.multiply(
        relay.nn.relu(relay.nn.bias_add(_conv(x, weight, 4), out_bias)), out_scale))
    squeezed = relay.squeeze(out_scale, axis=[1, 2])
    w = relay.multiply(weight, relay.expand_dims(squeezed, axis=1, num_newaxis=3))
    expected = relay.Function(args, relay.nn.relu(relay.nn.bias_add(
        _conv(x, w, 4), relay.multiply(out_bias, squeezed))))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.BackwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))
    _same_numbers(y1, y1_folded, (2, 4, 10, 10), (4, 4, 3, 3), (4,))


def test_fold_fwd_and_bwd_conv3d():
    x = relay.var("x", shape=(2, 4, 6, 6, 6))
    weight = relay.var("weight", shape=(2, 4, 3, 3, 3))
    in_bias = relay.var("in_bias", shape=(4, 1, 1, 1))
    in_scale = relay.const(_get_positive_scale((4, 1, 1, 1)))

    def conv(data, w):
        return relay.nn.conv3d(data, w, channels=2, kernel_size=(3, 3, 3), padding=(1, 1, 1))
    args = [x, weight, in_bias]
    before = relay.Function(args, conv(relay.add(relay.nn.relu(
        relay.multiply(x, in_scale)), in_bias), weight))
    squeezed = relay.squeeze(in_scale, axis=[1, 2, 3])
    expected = relay.Function(args, conv(
        relay.add(relay.nn.relu(x), relay.divide(
            in_bias, relay.expand_dims(squeezed, axis=1, num_newaxis=3))),
        relay.multiply(weight, relay.expand_dims(squeezed, axis=1, num_newaxis=3))))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.ForwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))

    out_scale = relay.const(_get_positive_scale((2, 1, 1, 1)))
    before = relay.Function([x, weight], relay.multiply(conv(x, weight), out_scale))
    squeezed = relay.squeeze(out_scale, axis=[1, 2, 3])
    expected = relay.Function([x, weight], conv(x, relay.multiply(
        weight, relay.expand_dims(squeezed, axis=1, num_newaxis=4))))
    y1 = run_opt_pass(before, transform.InferType())
    y1_folded = run_opt_pass(y1, transform.BackwardFoldScaleAxis())
    tvm.assert_structural_equal(y1_folded, run_opt_pass(expected, transform.InferType()))
    _same_numbers(y1, y1_folded, (2, 4, 6, 6, 6), (2, 4, 3, 3, 3))


def test_pass_info():
    for p, name in ((transform.ForwardFoldScaleAxis(), "ForwardFoldScaleAxis"),
                    (transform.BackwardFoldScaleAxis(), "BackwardFoldScaleAxis")):
        assert p.info.name == name and p.info.opt_level == 3
        assert list(p.info.required) == ["InferType"]


def test_long_chain_does_not_recurse():
    x = relay.var("x", shape=(1, 4))
    y = relay.multiply(x, relay.const(_get_positive_scale((4,))))
    for _ in range(5000):
        y = relay.nn.relu(y)
    w = relay.var("w", shape=(3, 4))
    z = relay.multiply(relay.nn.dense(y, w), relay.const(_get_positive_scale((3,))))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], z))
    mod = transform.InferType()(mod)
    for p in (transform.ForwardFoldScaleAxis(), transform.BackwardFoldScaleAxis()):
        out = p(mod)["main"]
        assert out.body.op.name in ("nn.dense", "multiply")
    folded = transform.BackwardFoldScaleAxis()(transform.ForwardFoldScaleAxis()(mod))["main"]
    assert folded.body.op.name == "nn.dense"  # both multiplies moved into the weight
