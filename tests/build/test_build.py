"""relay.build: params lifting, graph JSON, memory planning, export and executors."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from runtime import cpu, graph_executor, load_module, load_param_dict, save_param_dict


def run_graph(factory, **inputs):
    gmod = graph_executor.GraphModule(factory["default"](cpu(0)))
    gmod.run(**inputs)
    return [gmod.get_output(i).numpy() for i in range(gmod.get_num_outputs())]


def seed_function():
    """TVM's bind-params example: five (1,) params and one (2,) concatenated with the input."""
    xs = [relay.var(f"x{i}", shape=(1,), dtype="int32") for i in range(2, 7)]
    xs.append(relay.var("x7", shape=(2,), dtype="int32"))
    inp = relay.var("input", shape=(7,), dtype="int32")
    body = relay.add(relay.concatenate(xs, axis=-1), inp)
    return relay.Function([inp, *xs], body), xs


def test_seed_bind_params_lifts_one_param():
    func, xs = seed_function()
    params = {f"x{i}": np.array([i], dtype="int32") for i in range(2, 7)}
    params["x7"] = np.array([7, 8], dtype="int32")
    lib = relay.build(func, params=params)
    got = lib.get_params()
    assert list(got) == ["p0"]
    np.testing.assert_array_equal(got["p0"].numpy(), [2, 3, 4, 5, 6, 7, 8])
    gmod = graph_executor.GraphModule(lib["default"](cpu(0)))
    shapes, _ = gmod.get_input_info()
    assert list(shapes) == ["input"]
    gmod.run(input=np.arange(7, dtype="int32"))
    np.testing.assert_array_equal(gmod.get_output(0).numpy(),
                                  np.arange(7) + [2, 3, 4, 5, 6, 7, 8])


def test_build_unpacks_as_graph_lib_params():
    x = relay.var("x", shape=(4,))
    graph_json, lib, params = relay.build(relay.Function([x], relay.exp(x)))
    graph = json.loads(graph_json)
    assert set(graph) >= {"nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"}
    assert graph["attrs"]["dltype"][1] == ["float32", "float32"]
    assert params == {}
    names = [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert names == ["tvmgen_default_fused_exp"]
    assert names[0] in lib.function_names


def test_identical_groups_share_one_kernel():
    x = relay.var("x", shape=(8,))
    y = relay.var("y", shape=(8,))
    f = relay.Function([x, y], relay.Tuple([relay.exp(relay.add(x, relay.const(1.0))),
                                            relay.exp(relay.add(y, relay.const(1.0)))]))
    lib = relay.build(f)
    ops = [n for n in json.loads(lib.get_graph_json())["nodes"] if n["op"] == "tvm_op"]
    assert [n["attrs"]["func_name"] for n in ops] == ["tvmgen_default_fused_add_exp"] * 2
    assert [n["name"] for n in ops] == ["tvmgen_default_fused_add_exp",
                                        "tvmgen_default_fused_add_exp_1"]
    assert lib.get_lib().function_names == ("tvmgen_default_fused_add_exp",)
    a, b = np.arange(8, dtype="float32") / 8, -np.arange(8, dtype="float32") / 8
    ea, eb = run_graph(lib, x=a, y=b)
    np.testing.assert_allclose(ea, np.exp(a + 1), rtol=1e-6)
    np.testing.assert_allclose(eb, np.exp(b + 1), rtol=1e-6)


def test_reshape_only_group_is_nop_sharing_storage():
    x = relay.var("x", shape=(1, 2, 4, 4))
    f = relay.Function([x], relay.reshape(relay.nn.max_pool2d(x, pool_size=(2, 2),
                                                               strides=(2, 2)), (2, 4)))
    lib = relay.build(f)
    graph = json.loads(lib.get_graph_json())
    ops = [(i, n) for i, n in enumerate(graph["nodes"]) if n["op"] == "tvm_op"]
    assert [n["attrs"]["func_name"] for _, n in ops] == ["tvmgen_default_fused_nn_max_pool2d",
                                                          "__nop"]
    sids = graph["attrs"]["storage_id"][1]
    pool_entry, nop_entry = (graph["node_row_ptr"][i] for i, _ in ops)
    assert sids[pool_entry] == sids[nop_entry]
    a = np.arange(32, dtype="float32").reshape(1, 2, 4, 4)
    ref = a.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)).reshape(2, 4)
    np.testing.assert_array_equal(run_graph(lib, x=a)[0], ref)


def test_storage_shared_in_a_chain():
    x = relay.var("x", shape=(64,))
    y = x
    for k in range(4):  # opaque pools break fusion, so there are intermediate buffers
        y = relay.reshape(y, (1, 1, 8, 8))
        y = relay.nn.max_pool2d(relay.exp(y), pool_size=(1, 1))
        y = relay.reshape(y, (64,))
    lib = relay.build(relay.Function([x], y))
    graph = json.loads(lib.get_graph_json())
    sids = graph["attrs"]["storage_id"][1]
    op_entries = [graph["node_row_ptr"][i] for i, n in enumerate(graph["nodes"])
                  if n["op"] == "tvm_op" and n["attrs"]["func_name"] != "__nop"]
    op_sids = [sids[e] for e in op_entries]
    assert len(set(op_sids)) < len(op_sids), op_sids
    stats = lib.memory_stats
    assert stats["intermediate_bytes"] < stats["naive_intermediate_bytes"]
    out = run_graph(lib, x=np.linspace(-1, 1, 64, dtype="float32"))[0]
    ref = np.linspace(-1, 1, 64, dtype="float32")
    for _ in range(4):
        ref = np.exp(ref)
    np.testing.assert_allclose(out, ref, rtol=1e-4)


def test_tuple_output_has_several_heads():
    x = relay.var("x", shape=(3,))
    f = relay.Function([x], relay.Tuple([relay.exp(x), relay.add(x, relay.const(1.0))]))
    lib = relay.build(f)
    assert len(json.loads(lib.get_graph_json())["heads"]) == 2
    a = np.array([0.0, 1.0, 2.0], dtype="float32")
    e, p = run_graph(lib, x=a)
    np.testing.assert_allclose(e, np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(p, a + 1)


def test_output_is_input_and_constant():
    x = relay.var("x", shape=(2,))
    c = relay.const(np.array([5.0, 6.0], dtype="float32"))
    lib = relay.build(relay.Function([x], relay.Tuple([x, c, relay.exp(x)])))
    a = np.array([1.0, 2.0], dtype="float32")
    got = run_graph(lib, x=a)
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_array_equal(got[1], [5.0, 6.0])
    np.testing.assert_allclose(got[2], np.exp(a), rtol=1e-6)


def test_params_blob_round_trip():
    x = relay.var("x", shape=(2, 3))
    w = relay.var("w", shape=(4, 3))
    f = relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w)))
    wv = np.arange(12, dtype="float32").reshape(4, 3) / 10
    lib = relay.build(f, params={"w": wv})
    blob = save_param_dict(lib.get_params())
    gmod = graph_executor.GraphModule(
        graph_executor.create(lib.get_graph_json(), lib.get_lib(), cpu(0)))
    gmod.load_params(blob)
    assert set(load_param_dict(blob)) == set(lib.get_params())
    xv = np.ones((2, 3), dtype="float32") - 0.5
    gmod.run(x=xv)
    np.testing.assert_allclose(gmod.get_output(0).numpy(), np.maximum(xv @ wv.T, 0), rtol=1e-5)


def test_export_and_load_in_fresh_process(tmp_path):
    x = relay.var("x", shape=(4,))
    c = relay.const(np.array([1, 2, 3, 4], dtype="float32"))
    lib = relay.build(relay.Function([x], relay.multiply(relay.exp(x), c)))
    path = tmp_path / "model.so"
    lib.export_library(str(path))
    script = textwrap.dedent(f"""
        import numpy as np, sys
        from runtime import load_module, cpu, graph_executor
        assert "compiler" not in sys.modules
        m = graph_executor.GraphModule(load_module({str(path)!r})["default"](cpu(0)))
        m.run(x=np.zeros(4, dtype="float32"))
        print(m.get_output(0).numpy().tolist())
        assert "compiler" not in sys.modules and "codegen" not in sys.modules
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 2.0, 3.0, 4.0]"
    loaded = load_module(str(path))
    assert list(loaded.get_params()) == list(lib.get_params())


def test_build_accepts_module_and_binds_params():
    x = relay.var("x", shape=(3,))
    b = relay.var("b", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x, b], relay.add(x, b)))
    lib = relay.build(mod, target="llvm", params={"b": np.ones(3, dtype="float32")})
    assert [n["name"] for n in json.loads(lib.get_graph_json())["nodes"]
            if n["op"] == "null"] == ["x", "p0"]
    np.testing.assert_allclose(run_graph(lib, x=np.zeros(3, "float32"))[0], np.ones(3))


def test_bad_target_is_a_clear_error():
    x = relay.var("x", shape=(3,))
    with pytest.raises(Exception, match="target 'cuda'.*expected 'llvm'"):
        relay.build(relay.Function([x], x), target="cuda")


@pytest.mark.parametrize("kind", ["graph", "debug"])
def test_create_executor(kind):
    x = relay.var("x", shape=(3,))
    y = relay.var("y", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x, y], relay.multiply(relay.exp(x), y)))
    f = relay.create_executor(kind, mod=mod, device=cpu(0), target="llvm").evaluate()
    a = np.array([0.0, 1.0, 2.0], dtype="float32")
    out = f(a, np.full(3, 2.0, dtype="float32"))
    np.testing.assert_allclose(out.numpy(), np.exp(a) * 2, rtol=1e-6)


def test_bind_params_by_name_reexported():
    from compiler.relay.build_module import bind_params_by_name
    x = relay.var("x", shape=(2,))
    w = relay.var("w", shape=(2,))
    f = bind_params_by_name(relay.Function([x, w], relay.add(x, w)),
                            {"w": np.ones(2, dtype="float32")})
    assert [p.name_hint for p in f.params] == ["x"]
