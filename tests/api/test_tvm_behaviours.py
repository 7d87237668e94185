"""Behaviours where relayjit used to differ from TVM, each pinned by a regression test."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from runtime import graph_executor


def _build_module(func):
    lib = relay.build(tvm.IRModule.from_expr(func), target="llvm")
    return graph_executor.GraphModule(lib["default"](tvm.cpu(0)))


def test_module_update_keeps_the_other_modules_global_vars():
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], x))
    y = relay.var("y", shape=(2,))
    other = tvm.IRModule({relay.GlobalVar("f"): relay.Function([y], relay.exp(y))})
    mod.update(other)
    gv = other.get_global_var("f")
    assert mod.get_global_var("f") is gv
    assert mod[gv] is other[gv]
    assert sorted(g.name_hint for g in mod.get_global_vars()) == ["f", "main"]


def test_module_update_replaces_a_function_of_the_same_name():
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule({relay.GlobalVar("f"): relay.Function([x], x)})
    y = relay.var("y", shape=(2,))
    other = tvm.IRModule({relay.GlobalVar("f"): relay.Function([y], relay.exp(y))})
    mod.update(other)
    assert len(mod.get_global_vars()) == 1
    assert mod["f"] is other["f"]


def test_list_configs_maps_names_to_type_keys():
    configs = tvm.transform.PassContext.list_configs()
    assert configs["relay.FuseOps.max_depth"] == {"type": "IntImm"}
    assert configs["relay.FuseOps.link_params"] == {"type": "IntImm"}


def test_graph_executor_runs_without_an_unused_input():
    x = relay.var("x", shape=(3,))
    unused = relay.var("unused", shape=(3,))
    module = _build_module(relay.Function([x, unused], relay.exp(x)))
    data = np.arange(3, dtype="float32")
    module.set_input("x", data)
    module.run()
    np.testing.assert_allclose(module.get_output(0).numpy(), np.exp(data), rtol=1e-6)


def test_graph_executor_still_requires_a_used_input():
    x = relay.var("x", shape=(3,))
    y = relay.var("y", shape=(3,))
    module = _build_module(relay.Function([x, y], relay.add(x, y)))
    module.set_input("x", np.zeros(3, "float32"))
    with pytest.raises(ValueError, match="'y'"):
        module.run()


def test_graph_executor_allows_an_empty_tuple_output():
    x = relay.var("x", shape=(3,))
    module = _build_module(relay.Function([x], relay.Tuple([])))
    module.run()
    assert module.get_num_outputs() == 0


def test_graph_executor_returns_nested_tuples_nested():
    x = relay.var("x", shape=(2,))
    y = relay.var("y", shape=(2,))
    body = relay.Tuple([x + y, relay.Tuple([x * y, relay.Tuple([x - y, relay.exp(x)])])])
    mod = tvm.IRModule.from_expr(relay.Function([x, y], body))
    a = np.array([1.0, 2.0], "float32")
    b = np.array([3.0, 5.0], "float32")
    for kind in ("graph", "debug"):
        out = relay.create_executor(kind, mod=mod).evaluate()(a, b)
        assert len(out) == 2 and len(out[1]) == 2 and len(out[1][1]) == 2, kind
        np.testing.assert_allclose(out[0].numpy(), a + b)
        np.testing.assert_allclose(out[1][0].numpy(), a * b)
        np.testing.assert_allclose(out[1][1][0].numpy(), a - b)
        np.testing.assert_allclose(out[1][1][1].numpy(), np.exp(a), rtol=1e-6)


@pytest.mark.parametrize("kind", ["graph", "debug"])
def test_evaluate_of_a_non_function_expression_returns_its_value(kind):
    value = relay.add(relay.const(np.array([1.0, 2.0], "float32")), relay.const(3.0))
    out = relay.create_executor(kind).evaluate(value)
    np.testing.assert_allclose(out.numpy(), [4.0, 5.0])



def _build_linked(func):
    with tvm.transform.PassContext(opt_level=3, config={"relay.FuseOps.link_params": True}):
        return relay.build(tvm.IRModule.from_expr(func), target="llvm")


def test_link_params_embeds_constants_in_primitive_functions():
    x = relay.var("x", shape=(2, 3))
    weight = np.arange(6, dtype="float32").reshape(2, 3)
    lib = _build_linked(relay.Function([x], relay.nn.relu(relay.add(x, relay.const(weight)))))
    assert lib.get_params() == {}
    module = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    data = np.full((2, 3), -2.5, "float32")
    module.run(x=data)
    np.testing.assert_allclose(module.get_output(0).numpy(), np.maximum(data + weight, 0))


def test_link_params_conv_weights_match_numpy_and_differ_per_value():
    rng = np.random.RandomState(0)
    data = rng.randn(1, 4, 6, 6).astype("float32")
    results = []
    for seed in (1, 2):  # same structure, other bytes: must not share a cached kernel
        weight = np.random.RandomState(seed).randn(8, 4, 3, 3).astype("float32")
        d = relay.var("d", shape=(1, 4, 6, 6))
        conv = relay.nn.conv2d(d, relay.const(weight), channels=8, kernel_size=(3, 3),
                               padding=(1, 1))
        module = graph_executor.GraphModule(
            _build_linked(relay.Function([d], conv))["default"](tvm.cpu(0)))
        module.run(d=data)
        padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
        expected = np.einsum("nchwij,ocij->nohw", windows, weight)
        got = module.get_output(0).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        results.append(got)
    assert not np.allclose(results[0], results[1])
