"""relay.testing: every model builder type-checks, builds and matches the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.relay import testing
from runtime import graph_executor

# small variants of each builder (the defaults are ImageNet-sized)
SMALL_WORKLOADS = {
    "mlp": lambda: testing.mlp.get_workload(batch_size=2),
    "dqn": lambda: testing.dqn.get_workload(batch_size=1),
    "resnet": lambda: testing.resnet.get_workload(1, 10, num_layers=8, image_shape=(3, 28, 28)),
    "mobilenet": lambda: testing.mobilenet.get_workload(1, 10, image_shape=(3, 32, 32),
                                                        alpha=0.25),
    "squeezenet": lambda: testing.squeezenet.get_workload(1, 10, "1.1", (3, 64, 64)),
    "densenet": lambda: testing.create_workload(testing.densenet._make_dense_net(
        8, 4, [2, 2], (1, 3, 32, 32), "float32", classes=10)),
    "lstm": lambda: testing.lstm.get_workload(iterations=3, num_hidden=8, batch_size=2),
    "dcgan": lambda: testing.dcgan.get_workload(1, ngf=4, random_len=8),
}
# inception_v3 has no width knob and ~100 distinct conv kernels even at its 75x75 minimum
# (~20 s of LLVM): its build runs with the slow tests, the default suite interprets it
SLOW_WORKLOADS = {
    "inception_v3": lambda: testing.inception_v3.get_workload(1, 10, image_shape=(3, 75, 75)),
    "squeezenet1.0": lambda: testing.squeezenet.get_workload(1, 10, "1.0", (3, 64, 64)),
}


def _without_softmax(mod):
    """main's logits: Xavier weights through many BN/ReLU layers leave tiny logits, so the
    softmax output is ~uniform and would compare equal whatever the network computed."""
    main = mod["main"]
    body = main.body
    if isinstance(body, relay.Call) and getattr(body.op, "name", "") == "nn.softmax":
        return tvm.IRModule.from_expr(relay.Function(main.params, body.args[0]))
    return mod


def _check_build_matches_interpreter(name, mod, params):
    mod = _without_softmax(mod)
    data_type = mod["main"].params[0].type_annotation
    assert mod["main"].params[0].name_hint == "data" and "data" not in params
    data = np.random.RandomState(1).uniform(-1, 1, size=data_type.shape).astype("float32")

    lib = relay.build(mod, target="llvm", params=params)
    module = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    module.run(data=data)
    got = [module.get_output(i).numpy() for i in range(module.get_num_outputs())]

    expected = relay.create_executor("debug", mod=mod, params=params).evaluate()(data)
    expected = [e.numpy() for e in (expected if isinstance(expected, tuple) else (expected,))]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        scale = float(np.max(np.abs(e)))
        assert scale > 0 and np.std(e) > 0, f"{name}: degenerate output {e}"
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("name", sorted(SMALL_WORKLOADS))
def test_workload_builds_and_matches_the_interpreter(name):
    _check_build_matches_interpreter(name, *SMALL_WORKLOADS[name]())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_WORKLOADS))
def test_slow_workload_builds_and_matches_the_interpreter(name):
    _check_build_matches_interpreter(name, *SLOW_WORKLOADS[name]())


def test_inception_v3_runs_in_the_interpreter():
    mod, params = testing.inception_v3.get_workload(1, 10, image_shape=(3, 75, 75))
    logits_mod = _without_softmax(mod)
    data = np.random.RandomState(1).uniform(-1, 1, size=(1, 3, 75, 75)).astype("float32")
    logits = relay.create_executor("debug", mod=logits_mod, params=params).evaluate()(data)
    assert logits.shape == (1, 10) and np.std(logits.numpy()) > 0
    with pytest.raises(ValueError, match="at least 75x75"):
        testing.inception_v3.get_workload(1, 10, image_shape=(3, 64, 64))


@pytest.mark.parametrize("build, out_shape, num_params", [
    (lambda: testing.resnet.get_workload(), (1, 1000), None),
    (lambda: testing.resnet.get_workload(num_layers=50), (1, 1000), None),
    (lambda: testing.mobilenet.get_workload(), (1, 1000), None),
    # the published SqueezeNet parameter counts (weights and biases, no batch norm)
    (lambda: testing.squeezenet.get_workload(version="1.0"), (1, 1000), 1248424),
    (lambda: testing.squeezenet.get_workload(version="1.1"), (1, 1000), 1235496),
    (lambda: testing.densenet.get_workload(batch_size=1), (1, 1000), None),
    (lambda: testing.inception_v3.get_workload(), (1, 1000), None),
    (lambda: testing.dcgan.get_workload(2), (2, 3, 64, 64), None),
])
def test_default_sized_workloads_type_check(build, out_shape, num_params):
    mod, params = build()
    assert tuple(mod["main"].checked_type.ret_type.shape) == out_shape
    if num_params is not None:
        assert sum(p.numpy().size for p in params.values()) == num_params


def test_resnet_parameter_names_follow_tvm():
    mod, params = testing.resnet.get_workload(num_layers=18)
    for name in ("bn_data_gamma", "conv0_weight", "stage1_unit1_conv1_weight",
                 "stage4_unit2_bn2_moving_var", "stage2_unit1_sc_weight", "fc1_weight",
                 "fc1_bias"):
        assert name in params, name
    assert len([n for n in params if n.endswith("_weight") and "conv" in n]) == 17


def test_resnet_rejects_an_unknown_depth():
    with pytest.raises(ValueError, match="num_layers"):
        testing.resnet.get_workload(num_layers=19)


def test_create_workload_params_are_deterministic():
    _, first = testing.mlp.get_workload(batch_size=1)
    _, again = testing.mlp.get_workload(batch_size=1)
    net = testing.mlp.get_net(1)
    _, other_seed = testing.create_workload(net, seed=1)
    assert sorted(first) == sorted(again) == sorted(other_seed)
    for name in first:
        np.testing.assert_array_equal(first[name].numpy(), again[name].numpy())
    assert not np.array_equal(first["fc1_weight"].numpy(), other_seed["fc1_weight"].numpy())
    np.testing.assert_array_equal(first["fc1_bias"].numpy(), 0)


def test_xavier_bounds_and_errors():
    weight = np.zeros((64, 32, 3, 3), "float32")
    testing.Xavier()("conv_weight", weight)
    bound = np.sqrt(3 / ((32 * 9 + 64 * 9) / 2))
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.9 * bound
    gamma = np.zeros(4, "float32")
    testing.Xavier()("bn_gamma", gamma)
    np.testing.assert_array_equal(gamma, 1)
    with pytest.raises(ValueError, match="vector"):
        testing.Xavier()("fc_weight", np.zeros(4, "float32"))
    with pytest.raises(ValueError, match="Unknown initialization pattern"):
        testing.Xavier()("mystery", np.zeros((2, 2), "float32"))


def test_layers_name_their_vars():
    data = relay.var("data", shape=(1, 3, 8, 8))
    conv = testing.layers.conv2d(data, channels=4, kernel_size=(3, 3), name="c1")
    assert conv.args[1].name_hint == "c1_weight" and conv.args[1].type_annotation is None
    typed = testing.layers.conv2d(data, channels=4, kernel_size=3, in_channels=3, name="c2")
    assert typed.args[1].type_annotation == relay.TensorType((4, 3, 3, 3))
    bn = testing.layers.batch_norm_infer(typed, num_features=4, name="bn")
    names = [a.name_hint for a in bn.tuple_value.args[1:]]
    assert names == ["bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var"]
    flat = relay.nn.batch_flatten(bn)
    assert testing.layers.infer_shape(flat) == (1, 4 * 6 * 6)
    dense = testing.layers.dense_add_bias(flat, units=5, in_units=144, name="fc")
    mod, params = testing.create_workload(relay.Function(relay.analysis.free_vars(dense), dense))
    assert params["fc_weight"].shape == (5, 144) and params["bn_moving_var"].shape == (4,)
    assert testing.layers.conv_kernel_layout("NHWC") == "HWIO"


def test_run_infer_type_and_run_opt_pass():
    x = relay.var("x", shape=(2, 3))
    expr = relay.add(x, relay.multiply(relay.const(2.0), relay.const(3.0)))
    typed = testing.run_infer_type(expr)
    assert typed.checked_type == relay.TensorType((2, 3))
    folded = testing.run_opt_pass(expr, relay.transform.FoldConstant())
    expected = testing.run_infer_type(relay.add(x, relay.const(6.0)))
    tvm.ir.assert_structural_equal(folded, expected)
    func = relay.Function([x], expr)
    folded_func = testing.run_opt_pass(func, [relay.transform.FoldConstant()])
    assert isinstance(folded_func, relay.Function)
    tvm.ir.assert_structural_equal(folded_func.body, expected)
