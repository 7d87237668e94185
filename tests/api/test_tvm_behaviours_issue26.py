"""Issue 26 behaviours TVM code relies on: astext's version header and annotate=,
Executor.evaluate(expr, binds), create_workload of a plain expression, graph inputs sharing a
name hint, and lib.get_source saying where the text is."""
from __future__ import annotations

import json

import numpy as np
import pytest

import compiler as tvm
from compiler import relay


def test_astext_begins_with_the_version_header_and_parses_back():
    x = relay.var("x", shape=(2,))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(
        relay.Function([x], relay.exp(x))))
    text = mod.astext()
    assert text.startswith('#[version = "0.0.5"]\ndef @main(')
    assert not str(mod).startswith("#")
    tvm.ir.assert_structural_equal(tvm.parser.parse(text), mod)
    assert mod["main"].body.astext().startswith('#[version = "0.0.5"]\nfree_var %x')


def test_astext_annotate_replaces_type_comments():
    x = relay.var("x", shape=(2,))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(
        relay.Function([x], relay.exp(relay.log(x)))))
    text = mod.astext(annotate=lambda e: f" /* op={e.op.name} */")
    assert "%0 = log(%x) /* op=log */;" in text and "exp(%0) /* op=exp */" in text
    assert "ty=" not in mod.astext(annotate=lambda e: "")
    with pytest.raises(TypeError, match="annotate must be callable"):
        mod.astext(annotate="yes")


@pytest.mark.parametrize("kind", ["debug", "graph"])
def test_evaluate_with_binds(kind):
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    binds = {x: np.array([1, 2], "float32"), y: tvm.nd.array(np.array([3, 4], "float32"))}
    out = relay.create_executor(kind).evaluate(relay.multiply(x, y), binds)
    np.testing.assert_array_equal(out.numpy(), [3, 8])


def test_create_workload_of_an_expression():
    data = relay.var("data", shape=(1, 4))
    weight = relay.var("fc_weight", shape=(3, 4))
    pair = relay.Tuple([relay.nn.dense(data, weight), data])
    mod, params = relay.testing.create_workload(relay.TupleGetItem(pair, 0))
    assert [p.name_hint for p in mod["main"].params] == ["data", "fc_weight"]
    assert list(params) == ["fc_weight"] and params["fc_weight"].shape == (3, 4)


def test_graph_inputs_with_one_name_hint_get_unique_names():
    ws = [relay.var("w", shape=(2,)) for _ in range(4)]
    func = relay.Function(ws, (ws[0] + ws[1]) * ws[2] - ws[3])
    values = [np.full(2, i + 1, "float32") for i in range(4)]
    out = relay.create_executor("graph").evaluate(func)(*values)
    np.testing.assert_array_equal(out.numpy(), [(1 + 2) * 3 - 4] * 2)
    lib = relay.build(tvm.IRModule.from_expr(func))
    names = [n["name"] for n in json.loads(lib.get_graph_json())["nodes"] if n["op"] == "null"]
    assert names == ["w", "w_1", "w_2", "w_3"]


def test_get_source_says_where_the_text_is():
    x = relay.var("x", shape=(2,))
    lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], relay.exp(x))))
    with pytest.raises(NotImplementedError, match="relayjit inspect MODEL --dump llvm"):
        lib.get_lib().get_source()


def test_type_args_of_op_calls():
    # TVM's test_type_infer.test_type_args
    x = relay.var("x", shape=(10, 10))
    y = relay.var("y", shape=(1, 10))
    z = relay.transform.InferType()(tvm.IRModule.from_expr(relay.add(x, y)))["main"].body
    ty_args = z.type_args
    assert len(ty_args) == 2
    assert ty_args[0].dtype == "float32" and ty_args[1].dtype == "float32"
    assert [d.value for d in ty_args[0].shape] == [10, 10]
    assert [d.value for d in ty_args[1].shape] == [1, 10]


def test_shape_dims_answer_same_as():
    shape = relay.TensorType((10, 3)).shape
    assert shape[0].same_as(relay.TensorType((10,)).shape[0])
    assert not shape[0].same_as(shape[1])
