"""Issue 26: the tvm.* namespaces everyday scripts import, with only `tvm` -> `compiler`.

Each test is a TVM user's snippet (tutorials: quick start, pass instruments, debug executor,
exporting); a name relayjit lacks must say what to use instead, never a bare AttributeError."""
from __future__ import annotations

import os

import numpy as np
import pytest

import compiler as tvm
import runtime
from compiler import relay
from compiler.contrib import graph_executor, utils
from compiler.contrib.debugger import debug_executor
from compiler.instrument import PassTimingInstrument, PrintAfterAll, PrintBeforeAll
from compiler.op.registry import _REGISTRY
from compiler.relay.op import op as _op


def _dense_relu():
    data = relay.var("data", shape=(1, 4))
    weight = relay.var("weight", shape=(3, 4))
    mod = tvm.IRModule.from_expr(relay.Function([data, weight],
                                                relay.nn.relu(relay.nn.dense(data, weight))))
    w = np.random.RandomState(0).uniform(-1, 1, (3, 4)).astype("float32")
    return mod, {"weight": tvm.nd.array(w)}, w


def test_export_load_run_as_in_the_quick_start():
    mod, params, w = _dense_relu()
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    temp = utils.tempdir()
    path = temp.relpath("deploy_lib.rjit")
    lib.export_library(path)
    assert temp.listdir() == ["deploy_lib.rjit"]
    loaded = tvm.runtime.load_module(path)
    dev = tvm.cpu()
    module = graph_executor.GraphModule(loaded["default"](dev))
    x = np.ones((1, 4), "float32")
    module.set_input("data", tvm.runtime.ndarray.array(x))
    module.run()
    tvm.testing.assert_allclose(module.get_output(0).numpy(), np.maximum(x @ w.T, 0),
                                rtol=1e-5)
    temp.remove()
    assert not os.path.exists(path)


def test_runtime_namespace_is_the_runtime_package():
    assert tvm.runtime.vm.VirtualMachine is runtime.vm.VirtualMachine
    assert tvm.runtime.load_module is runtime.load_module
    assert tvm.runtime.ndarray.array is runtime.nd.array
    assert tvm.runtime.save_param_dict is relay.save_param_dict is runtime.save_param_dict
    blob = relay.save_param_dict({"w": np.arange(6, dtype="float32").reshape(2, 3)})
    np.testing.assert_array_equal(relay.load_param_dict(blob)["w"].numpy(),
                                  np.arange(6, dtype="float32").reshape(2, 3))


def test_submodule_import_paths_give_the_same_modules():
    from compiler.contrib.debugger.debug_executor import GraphModuleDebug
    from compiler.contrib.graph_executor import GraphModule
    from compiler.runtime.profiler_vm import VirtualMachineProfiler
    from compiler.runtime.vm import VirtualMachine
    assert VirtualMachine is runtime.vm.VirtualMachine
    assert VirtualMachineProfiler is runtime.vm.VirtualMachineProfiler
    assert GraphModule is runtime.graph_executor.GraphModule
    assert GraphModuleDebug is runtime.debug_executor.GraphModuleDebug


def test_ir_transform_is_the_pass_infrastructure():
    from compiler.ir.transform import PassContext
    assert tvm.ir.transform is tvm.transform and PassContext is tvm.transform.PassContext


def test_instruments_print_and_time(capsys):
    mod, _, _ = _dense_relu()
    timing = PassTimingInstrument()
    with tvm.transform.PassContext(instruments=[timing, PrintBeforeAll(), PrintAfterAll()]):
        mod = relay.transform.InferType()(mod)
        profiles = timing.render()
    out = capsys.readouterr().out
    assert "Before Running Pass: InferType\ndef @main" in out
    assert "After Running Pass: InferType\ndef @main" in out
    assert profiles.splitlines()[1].startswith("InferType")
    assert tvm.ir.instrument.PrintAfterAll is PrintAfterAll


def test_errors_are_tvm_errors():
    with pytest.raises(tvm.error.DiagnosticError):
        tvm.parser.parse("def @main(%x) { %x + }")
    x = relay.var("x", shape=(2, 3))
    with pytest.raises(tvm.TVMError):
        relay.transform.InferType()(tvm.IRModule.from_expr(
            relay.Function([x], relay.add(x, relay.var("y", shape=(4,))))))
    assert issubclass(runtime.VMError, tvm.TVMError)
    assert issubclass(tvm.error.OpNotImplemented, tvm.error.TVMError)


def test_global_funcs():
    assert tvm.get_global_func("tvm.graph_executor.create") is graph_executor.create
    assert tvm.get_global_func("no.such.func", allow_missing=True) is None
    with pytest.raises(ValueError, match="no global function 'no.such.func'"):
        tvm.get_global_func("no.such.func")

    @tvm.register_func("test26.double")
    def double(x):
        return 2 * x
    try:
        assert tvm.get_global_func("test26.double")(4) == 8
        with pytest.raises(ValueError, match="already registered"):
            tvm.register_func("test26.double", lambda x: x)
        tvm.register_func("test26.double", lambda x: 3 * x, override=True)
        assert tvm.get_global_func("test26.double")(4) == 12
    finally:
        runtime.registry.remove_global_func("test26.double")


def test_save_json_round_trips_module_and_expression():
    x = relay.var("x", shape=(2, 3))
    c = relay.const(np.arange(6, dtype="float32").reshape(2, 3))
    before = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.add(x, c))))
    before = relay.transform.InferType()(before)
    after = tvm.ir.load_json(tvm.ir.save_json(before))
    tvm.ir.assert_structural_equal(after, before)
    expr = relay.multiply(x, c)
    tvm.ir.assert_structural_equal(tvm.ir.load_json(tvm.ir.save_json(expr)), expr,
                                   map_free_vars=True)


def test_load_json_refuses_other_documents():
    with pytest.raises(ValueError, match="not a relayjit IR JSON"):
        tvm.ir.load_json('{"root": 1, "nodes": [], "b64ndarrays": []}')
    with pytest.raises(ValueError, match="not JSON"):
        tvm.ir.load_json("{")
    good = tvm.ir.save_json(relay.const(1.0))
    with pytest.raises(ValueError, match="not base64"):
        tvm.ir.load_json(good.replace('"constants": "', '"constants": "!'))


def test_debug_executor_and_te_import_paths():
    assert debug_executor.create is runtime.debug_executor.create
    a = tvm.te.placeholder((4,), name="a")
    b = tvm.te.compute((4,), lambda i: a[i] * 2.0, name="b")
    assert tuple(b.shape) == (4,)


def test_testing_helpers():
    assert tvm.runtime.enabled("llvm") and not tvm.runtime.enabled("cuda")
    assert tvm.testing.enabled_targets()[0][0] == "llvm"
    assert tvm.testing.device_enabled("llvm") and not tvm.testing.device_enabled("cuda")
    with pytest.raises(AssertionError):
        tvm.testing.assert_allclose(np.ones(2), np.ones(3))


param = tvm.testing.parameter(1, 2)


def test_testing_parameter_takes_each_value(param):
    assert param in (1, 2)


@tvm.testing.parametrize_targets("llvm", "cuda")
def test_parametrize_targets_runs_cpu_and_skips_gpu(target, dev):
    assert target == "llvm" and dev == tvm.cpu(0)


@pytest.mark.parametrize("where,name,says", [
    (tvm, "autotvm", "autotuning is not supported"),
    (tvm, "cuda", "use tvm.cpu()"),
    (tvm.ir, "make_node", "relay.Var"),
    (tvm.contrib, "graph_runtime", "compiler.contrib.graph_executor"),
    (tvm.runtime, "Module", "KernelLibrary"),
    (tvm.te, "create_schedule", "compute rules need no schedule"),
    (tvm.testing, "parameters", "pytest.mark.parametrize"),
])
def test_missing_names_say_what_to_use(where, name, says):
    assert not hasattr(where, name)
    with pytest.raises(AttributeError, match=says):
        getattr(where, name)


def test_custom_op_compute_written_with_tvm_te_and_tir():
    name = "test_tvm26.soft_gate"
    try:
        _op.register(name, "exp(x) where x > 0, else 0")
        op = _op.get(name)
        op.set_num_inputs(1)
        op.add_type_rel("Identity")
        _op.register_pattern(name, _op.OpPattern.ELEMWISE)

        @_op.register_compute(name)
        def compute(attrs, inputs, out_type):
            (a,) = inputs
            return [tvm.te.compute(out_type.shape, lambda *i: tvm.tir.if_then_else(
                a[i] > tvm.tir.const(0.0, a.dtype), tvm.te.exp(a[i]),
                tvm.tir.const(0.0, a.dtype)), name="soft_gate")]
        x = relay.var("x", shape=(2, 3))
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], relay.Call(op, [x]))))
        m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        data = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
        m.run(x=data)
        tvm.testing.assert_allclose(m.get_output(0).numpy(),
                                    np.where(data > 0, np.exp(data), 0), rtol=1e-6)
    finally:
        _REGISTRY.pop(name, None)
