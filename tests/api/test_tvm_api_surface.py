"""TVM-docs-style snippets with only the imports changed: the public API of DESIGN.md.

Each test is written as a TVM Relay user would write it (`import tvm`, `from tvm import relay`,
`from tvm.contrib import graph_executor`), with those three lines replaced by ours.
"""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from runtime import graph_executor


def test_names_listed_in_design_exist():
    for name in ["IRModule", "transform", "ir", "nd", "cpu", "device", "relay",
                 "structural_equal", "structural_hash", "assert_structural_equal"]:
        assert hasattr(tvm, name), f"compiler.{name}"
    for name in ["PassInfo", "PassContext", "Sequential", "module_pass", "ModulePass",
                 "PassInstrument", "pass_instrument", "PrintIR"]:
        assert hasattr(tvm.transform, name), f"compiler.transform.{name}"
    for name in ["structural_equal", "structural_hash", "assert_structural_equal", "TensorType",
                 "TupleType", "FuncType", "Op"]:
        assert hasattr(tvm.ir, name), f"compiler.ir.{name}"
    for name in ["var", "const", "Var", "Constant", "Call", "Tuple", "TupleGetItem", "Let", "If",
                 "Function", "GlobalVar", "Op", "bind", "build", "create_executor", "add",
                 "concatenate", "ExprVisitor", "ExprMutator", "TensorType"]:
        assert hasattr(relay, name), f"relay.{name}"
    assert hasattr(relay.nn, "conv2d")
    for name in ["InferType", "FoldConstant", "FuseOps", "ToANormalForm", "DeadCodeElimination",
                 "EliminateCommonSubexpr", "SimplifyInference", "function_pass", "FunctionPass",
                 "Sequential", "PassContext"]:
        assert getattr(relay.transform, name) is not None, f"relay.transform.{name}"
    for name in ["free_vars", "bound_vars", "all_vars", "post_order_visit", "well_formed"]:
        assert hasattr(relay.analysis, name), f"relay.analysis.{name}"
    assert callable(relay.build_module.bind_params_by_name)
    assert callable(relay.frontend.from_onnx)
    for name in ["GraphModule", "create"]:
        assert hasattr(graph_executor, name)


def test_var_and_const_semantics():
    assert relay.var("x", "float32").type_annotation == relay.TensorType((), "float32")
    assert relay.var("x", shape=(1, 3)).type_annotation == relay.TensorType((1, 3), "float32")
    assert relay.var("x").type_annotation is None
    assert relay.const(1).data.dtype == "int32"
    assert relay.const(1.0).data.dtype == "float32"
    assert relay.const(np.arange(3, dtype="int64")).data.dtype == "int32"
    assert relay.const(np.ones(3, dtype="float64")).data.dtype == "float32"
    assert relay.const([1, 2], "int64").data.dtype == "int64"
    assert relay.const(True).data.dtype == "bool"
    assert relay.op.get("add") is relay.Op.get("add") is tvm.ir.Op.get("add")


def test_module_text_as_in_the_docs():
    x = relay.var("x")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.add(x, relay.const(1.0))))
    assert str(mod).strip() == "def @main(%x) {\n  add(%x, 1f)\n}"
    gv = mod.get_global_var("main")
    assert mod[gv] is mod["main"]
    assert list(mod.functions) == [gv]
    other = tvm.IRModule.from_expr(relay.Function([x], x))
    mod.update(other)
    assert mod["main"].body is x


def test_build_run_with_graph_executor():
    # from the TVM "Quick Start" tutorial, imports changed
    data = relay.var("data", relay.TensorType((1, 4), "float32"))
    weight = relay.var("weight", relay.TensorType((3, 4), "float32"))
    func = relay.Function([data, weight], relay.nn.relu(relay.nn.dense(data, weight)))
    mod = tvm.IRModule.from_expr(func)
    w = np.random.uniform(-1, 1, (3, 4)).astype("float32")
    params = {"weight": tvm.nd.array(w)}
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    dev = tvm.cpu(0)
    module = graph_executor.GraphModule(lib["default"](dev))
    x = np.random.uniform(-1, 1, (1, 4)).astype("float32")
    module.set_input("data", tvm.nd.array(x))
    module.run()
    out = module.get_output(0).numpy()
    np.testing.assert_allclose(out, np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-6)
    assert module.get_num_outputs() == 1
    assert module.get_input_index("data") == 0 and module.get_input_index("nope") == -1
    shapes, dtypes = module.get_input_info()
    assert shapes == {"data": (1, 4)} and dtypes == {"data": "float32"}
    result = module.benchmark(dev, repeat=2, number=1)
    assert result.mean > 0 and len(result.results) == 2
    # the three-way unpacking and the low-level create()
    graph_json, lib2, params2 = relay.build(mod, target="llvm", params=params)
    m2 = graph_executor.create(graph_json, lib2, dev)
    m2.set_input(**params2)
    m2.run(data=x)
    np.testing.assert_allclose(m2.get_output(0).numpy(), out, rtol=1e-6)


def test_export_library_and_load_module(tmp_path):
    import runtime
    x = relay.var("x", shape=(2, 2))
    lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], relay.negative(x))))
    path = str(tmp_path / "net.so")
    lib.export_library(path)
    loaded = runtime.load_module(path)
    module = graph_executor.GraphModule(loaded["default"](tvm.cpu()))
    module.run(x=np.ones((2, 2), "float32"))
    np.testing.assert_array_equal(module.get_output(0).numpy(), -np.ones((2, 2)))
    blob = runtime.save_param_dict({"a": np.arange(3, dtype="float32")})
    assert runtime.load_param_dict(blob)["a"].numpy().tolist() == [0, 1, 2]


@pytest.mark.parametrize("kind", ["debug", "graph"])
def test_create_executor(kind):
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x, y], relay.Tuple([x + y, x * y])))
    run = relay.create_executor(kind, mod=mod, device=tvm.cpu(0), target="llvm").evaluate()
    a, b = np.array([1, 2], "float32"), np.array([3, 4], "float32")
    s, p = run(a, b)
    assert s.numpy().tolist() == [4, 6] and p.numpy().tolist() == [3, 8]
    single = relay.create_executor(kind, mod=mod).evaluate(relay.Function([x], x - x))
    assert single(tvm.nd.array(a)).numpy().tolist() == [0, 0]


def test_pass_context_and_sequential():
    x = relay.var("x", shape=(2,))
    c = relay.add(relay.const(np.ones(2, "float32")), relay.const(np.ones(2, "float32")))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.add(x, c)))
    seq = tvm.transform.Sequential([relay.transform.InferType(), relay.transform.FoldConstant(),
                                    relay.transform.FuseOps(fuse_opt_level=2)])
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FuseOps"]) as ctx:
        assert tvm.transform.PassContext.current() is ctx
        out = seq(mod)
    assert isinstance(out["main"].body.args[1], relay.Constant)
    assert out["main"].body.op is relay.op.get("add")  # FuseOps was disabled: not fused

    @tvm.transform.module_pass(opt_level=1)
    def identity(mod, ctx):
        return mod
    assert identity.info.opt_level == 1 and identity.info.name == "identity"
    tvm.ir.assert_structural_equal(identity(mod)["main"], mod["main"])

    @relay.transform.function_pass(opt_level=1)
    class Double:
        def transform_function(self, func, mod, ctx):
            return relay.Function(func.params, relay.add(func.body, func.body))
    doubled = Double()(mod)
    assert doubled["main"].body.op.name == "add"


def test_bind_params_by_name_and_analysis():
    x, w = relay.var("x", shape=(2,)), relay.var("w", shape=(2,))
    func = relay.Function([x, w], relay.multiply(x, w))
    bound = relay.build_module.bind_params_by_name(func, {"w": np.ones(2, "float32")})
    assert [p.name_hint for p in bound.params] == ["x"]
    assert relay.analysis.free_vars(func.body) == [x, w]
    assert relay.analysis.well_formed(func)
    seen = []
    relay.analysis.post_order_visit(func, seen.append)
    assert seen[-1] is func


def test_visitor_and_mutator():
    class CountCalls(relay.ExprVisitor):
        def __init__(self):
            super().__init__()
            self.count = 0

        def visit_call(self, call):
            self.count += 1
            super().visit_call(call)

    x = relay.var("x", shape=(2,))
    body = relay.nn.relu(relay.add(x, x))
    counter = CountCalls()
    counter.visit(body)
    assert counter.count == 2
    assert relay.ExprMutator().visit(body) is body  # nothing changed: the same node
