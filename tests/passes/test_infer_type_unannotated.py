"""InferType types unannotated weights from the op's attributes and the data, as TVM does."""
import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import TypeInferenceError
from runtime import graph_executor


def run_infer(expr):
    mod = tvm.IRModule.from_expr(expr)
    return relay.transform.InferType()(mod)["main"]


def check(make, arg_types):
    """make(types) builds a function whose last params have `types`; untyped, they must
    infer to `arg_types`."""
    before = run_infer(make([None] * len(arg_types)))
    expected = run_infer(make(arg_types))
    tvm.ir.assert_structural_equal(before, expected)
    assert [p.type_annotation for p in before.params[-len(arg_types):]] == list(arg_types)


T = relay.TensorType


def _fn(build, data_type, types):
    data = relay.var("data", data_type)
    params = [relay.var(f"p{i}", t) for i, t in enumerate(types)]
    return relay.Function([data, *params], build(data, *params))


@pytest.mark.parametrize("kwargs,data_shape,weight_shape", [
    ({}, (1, 3, 8, 8), (8, 3, 3, 3)),
    ({"groups": 4, "channels": 4, "kernel_size": (3, 3)}, (1, 4, 8, 8), (4, 1, 3, 3)),
    ({"groups": 2}, (1, 4, 8, 8), (8, 2, 3, 3)),
    ({"data_layout": "NHWC", "kernel_layout": "HWIO"}, (1, 8, 8, 3), (3, 3, 3, 8)),
])
def test_conv2d_weight(kwargs, data_shape, weight_shape):
    attrs = {"channels": 8, "kernel_size": (3, 3), "padding": (1, 1), **kwargs}
    check(lambda types: _fn(lambda d, w: relay.nn.conv2d(d, w, **attrs), T(data_shape), types),
          [T(weight_shape)])


def test_conv2d_weight_keeps_the_data_dtype():
    check(lambda types: _fn(lambda d, w: relay.nn.conv2d(d, w, channels=2, kernel_size=1),
                            T((1, 3, 4, 4), "float16"), types),
          [T((2, 3, 1, 1), "float16")])


def test_conv2d_transpose_weight():
    check(lambda types: _fn(lambda d, w: relay.nn.conv2d_transpose(
        d, w, channels=6, kernel_size=(2, 2), strides=(2, 2)), T((1, 4, 5, 5)), types),
        [T((4, 6, 2, 2))])


def test_conv1d_and_conv3d_weights():
    check(lambda types: _fn(lambda d, w: relay.nn.conv1d(d, w, channels=5, kernel_size=3),
                            T((1, 2, 10)), types), [T((5, 2, 3))])
    check(lambda types: _fn(lambda d, w: relay.nn.conv3d(d, w, channels=5, kernel_size=(1, 2, 3)),
                            T((1, 2, 4, 4, 4)), types), [T((5, 2, 1, 2, 3))])


def test_dense_weight():
    check(lambda types: _fn(lambda d, w: relay.nn.dense(d, w, units=7), T((2, 5)), types),
          [T((7, 5))])


@pytest.mark.parametrize("build,data_shape,count,length", [
    (lambda d, b: relay.nn.bias_add(d, b), (1, 6, 2, 2), 1, 6),
    (lambda d, b: relay.nn.bias_add(d, b, axis=-1), (2, 3, 5), 1, 5),
    (lambda d, a: relay.nn.prelu(d, a), (1, 6, 2, 2), 1, 6),
    (lambda d, g, b, m, v: relay.nn.batch_norm(d, g, b, m, v)[0], (1, 6, 2, 2), 4, 6),
    (lambda d, g, b: relay.nn.layer_norm(d, g, b), (2, 3, 9), 2, 9),
    (lambda d, g, b: relay.nn.instance_norm(d, g, b), (1, 6, 2, 2), 2, 6),
    (lambda d, g, b: relay.nn.group_norm(d, g, b, num_groups=3), (1, 6, 2, 2), 2, 6),
])
def test_channel_vectors(build, data_shape, count, length):
    check(lambda types: _fn(build, T(data_shape), types), [T((length,))] * count)


def _network(types):
    """conv -> bias -> batch_norm -> relu -> dense, every weight without a type."""
    data = relay.var("data", T((1, 3, 8, 8)))
    w, b, g, beta, mean, var, fc = (relay.var(n, t) for n, t in zip(
        ("conv_weight", "conv_bias", "bn_gamma", "bn_beta", "bn_mean", "bn_var", "fc_weight"),
        types))
    y = relay.nn.conv2d(data, w, channels=4, kernel_size=(3, 3), padding=(1, 1))
    y = relay.nn.bias_add(y, b)
    y = relay.nn.relu(relay.nn.batch_norm(y, g, beta, mean, var)[0])
    y = relay.nn.dense(relay.nn.batch_flatten(y), fc, units=10)
    return relay.Function([data, w, b, g, beta, mean, var, fc], y)


NETWORK_TYPES = [T((4, 3, 3, 3))] + [T((4,))] * 5 + [T((10, 256))]


def test_network_of_unannotated_weights():
    check(_network, NETWORK_TYPES)
    assert run_infer(_network([None] * 7)).ret_type == T((1, 10))


def test_unannotated_network_builds_and_matches_numpy():
    rng = np.random.default_rng(0)
    names = ["conv_weight", "conv_bias", "bn_gamma", "bn_beta", "bn_mean", "bn_var", "fc_weight"]
    params = {n: rng.uniform(0.5, 1.0, t.concrete_shape).astype("float32")
              for n, t in zip(names, NETWORK_TYPES)}
    lib = relay.build(tvm.IRModule.from_expr(_network([None] * 7)), target="llvm",
                      params=params)
    gmod = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    gmod.run(data=x)

    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 4, 8, 8))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + 8, j:j + 8],
                              params["conv_weight"][:, :, i, j])
    y = conv + params["conv_bias"].reshape(1, 4, 1, 1)
    scale = params["bn_gamma"] / np.sqrt(params["bn_var"] + 1e-5)
    y = (y - params["bn_mean"].reshape(1, 4, 1, 1)) * scale.reshape(1, 4, 1, 1) \
        + params["bn_beta"].reshape(1, 4, 1, 1)
    ref = np.maximum(y, 0).reshape(1, -1) @ params["fc_weight"].T
    np.testing.assert_allclose(gmod.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_annotated_weights_are_checked_not_overwritten():
    data = relay.var("data", T((1, 3, 8, 8)))
    w = relay.var("w", T((8, 3, 5, 5)))
    with pytest.raises(TypeInferenceError, match="nn.conv2d"):
        run_infer(relay.Function([data, w], relay.nn.conv2d(data, w, channels=8,
                                                           kernel_size=(3, 3))))


def test_weight_without_channels_is_an_error_naming_it():
    data = relay.var("data", T((1, 3, 8, 8)))
    w = relay.var("weight")
    with pytest.raises(TypeInferenceError, match=r"%weight has no type annotation, and its "
                                                 r"type cannot be inferred from its use in "
                                                 r"nn.conv2d\(%data, %weight\)"):
        run_infer(relay.Function([data, w], relay.nn.conv2d(data, w, kernel_size=(3, 3))))


def test_elementwise_use_does_not_guess():
    x = relay.var("x", T((2, 3)))
    y = relay.var("y")
    with pytest.raises(TypeInferenceError, match="%y has no type annotation"):
        run_infer(relay.Function([x, y], relay.add(x, y)))


def test_bad_axis_names_the_op():
    data = relay.var("data", T((2, 3)))
    b = relay.var("b")
    with pytest.raises(TypeInferenceError, match="nn.bias_add cannot type the unannotated"):
        run_infer(relay.Function([data, b], relay.nn.bias_add(data, b, axis=4)))
