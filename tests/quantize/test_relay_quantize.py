"""relay.quantize: quantize, qconfig and calibration (TVM's API), into QNN ops."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.driver.calibrate import Statistics, kl_threshold, threshold, weight_threshold
from compiler.errors import CompilerError
from compiler.ir.traversal import post_order
from runtime import cpu, graph_executor

RNG = np.random.default_rng(41)


def _net(classes: int = 6):
    """conv-bn-relu x3 with a residual add, global pool, dense: a small ResNet piece (the
    same weights on every call)."""
    rng = np.random.default_rng(7)
    x = relay.var("x", shape=(1, 3, 12, 12))

    def conv_bn(data, c_in, c_out, name):
        w = relay.const(rng.standard_normal((c_out, c_in, 3, 3)).astype("f4") * 0.3)
        y = relay.nn.conv2d(data, w, padding=(1, 1))
        bn = relay.nn.batch_norm(y, *(relay.const(v.astype("f4")) for v in (
            rng.uniform(0.5, 1.5, c_out), rng.uniform(-0.1, 0.1, c_out),
            rng.uniform(-0.1, 0.1, c_out), rng.uniform(0.5, 1.5, c_out))))
        return relay.nn.relu(bn[0])
    a = conv_bn(x, 3, 8, "a")
    b = conv_bn(a, 8, 8, "b")
    c = conv_bn(relay.add(a, b), 8, 8, "c")
    pooled = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(c))
    fc = relay.const(rng.standard_normal((classes, 8)).astype("f4"))
    out = relay.nn.bias_add(relay.nn.dense(pooled, fc),
                            relay.const(rng.standard_normal(classes).astype("f4")))
    return relay.IRModule.from_expr(relay.Function([x], out))


DATA = [{"x": RNG.standard_normal((1, 3, 12, 12)).astype("f4")} for _ in range(6)]


def _ops(mod) -> dict:
    counts: dict = {}
    for n in post_order(mod["main"]):
        if isinstance(n, relay.Call) and isinstance(n.op, relay.Op):
            counts[n.op.name] = counts.get(n.op.name, 0) + 1
    return counts


def _outputs(mod, params=None) -> list:
    module = graph_executor.GraphModule(relay.build(mod, target="llvm", params=params)
                                        ["default"](cpu(0)))
    out = []
    for sample in DATA:
        module.run(**sample)
        out.append(module.get_output(0).numpy())
    return out


@pytest.mark.parametrize("mode", ["global_scale", "max", "percentile", "kl_divergence"])
def test_quantize_produces_qnn_ops_close_to_float(mode):
    """Errors within 10% of the largest output (a few percent in practice); same top-1."""
    mod = _net()
    with relay.quantize.qconfig(calibrate_mode=mode, global_scale=16.0, skip_conv_layers=[],
                                skip_dense_layer=False):
        qmod = relay.quantize.quantize(mod, dataset=DATA)
    ops = _ops(qmod)
    assert ops.get("qnn.conv2d") == 3 and ops.get("qnn.dense") == 1, ops
    assert "nn.conv2d" not in ops and "nn.dense" not in ops and "nn.batch_norm" not in ops
    want, got = _outputs(mod), _outputs(qmod)
    for w, g in zip(want, got):
        assert np.abs(g - w).max() < 0.1 * np.abs(w).max(), (mode, np.abs(g - w).max())
        assert g.argmax() == w.argmax()


def test_defaults_skip_the_first_conv_and_the_dense_layer_as_tvm():
    qmod = relay.quantize.quantize(_net(), dataset=DATA)  # calibrate_mode global_scale
    ops = _ops(qmod)
    assert ops.get("qnn.conv2d") == 2 and ops.get("nn.conv2d") == 1 and ops.get("nn.dense") == 1


def test_do_simulation_keeps_the_fake_quantized_float_program():
    with relay.quantize.qconfig(calibrate_mode="max", do_simulation=True):
        qmod = relay.quantize.quantize(_net(), dataset=DATA)
    ops = _ops(qmod)
    assert ops.get("nn.conv2d") == 3 and ops.get("qnn.quantize", 0) >= 3
    assert "qnn.conv2d" not in ops


def test_params_are_bound_by_name():
    x = relay.var("x", shape=(1, 2, 6, 6))
    w = relay.var("w", shape=(4, 2, 3, 3))
    mod = relay.IRModule.from_expr(relay.Function([x, w], relay.nn.conv2d(
        relay.nn.relu(x), w, padding=(1, 1))))
    params = {"w": RNG.standard_normal((4, 2, 3, 3)).astype("f4")}
    with relay.quantize.qconfig(calibrate_mode="max", skip_conv_layers=[]):
        qmod = relay.quantize.quantize(mod, params, [{"x": RNG.standard_normal((1, 2, 6, 6))
                                                      .astype("f4")}])
    assert "qnn.conv2d" in _ops(qmod) and len(qmod["main"].params) == 1


@pytest.mark.parametrize("fields, message", [
    ({"calibrate_mode": "entropy"}, "calibrate_mode must be one of"),
    ({"weight_scale": "mean"}, "weight_scale must be one of"),
    ({"dtype_input": "uint8"}, r"dtype_input='uint8' is not supported"),
    ({"nbits": 4}, r"unknown option\(s\) \['nbits'\]"),
])
def test_qconfig_refuses_what_it_does_not_implement(fields, message):
    with pytest.raises(CompilerError, match=message):
        relay.quantize.qconfig(**fields)


def test_calibration_needs_data_except_for_a_global_scale():
    with relay.quantize.qconfig(calibrate_mode="max"):
        with pytest.raises(CompilerError, match="needs a dataset"):
            relay.quantize.quantize(_net())
        with pytest.raises(CompilerError, match="dataset is empty"):
            relay.quantize.quantize(_net(), dataset=[])
    assert relay.quantize.current_qconfig().calibrate_mode == "global_scale"


def test_thresholds():
    stats = Statistics()
    values = RNG.standard_normal(200000)
    stats.add(values)
    assert threshold(stats, "max", 8.0) == np.abs(values).max()
    assert threshold(stats, "global_scale", 8.0) == 8.0
    assert 3.5 < threshold(stats, "percentile", 8.0) < 4.2
    kl = kl_threshold(np.abs(values))
    assert 2.0 < kl < np.abs(values).max()  # clips the rare tail
    assert kl_threshold(np.abs(values[:100])) == np.abs(values[:100]).max()  # too few values
    uniform = RNG.uniform(-1, 1, 200000)
    assert kl_threshold(np.abs(uniform)) > 0.95  # nothing to gain by clipping a uniform
    assert weight_threshold(np.array([0.3, -0.7]), "power2") == 1.0
    assert weight_threshold(np.array([0.3, -0.7]), "max") == 0.7
