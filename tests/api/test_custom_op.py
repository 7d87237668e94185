"""Defining a new op from Python, as TVM's test_ir_op.py / test_type_infer.py do: register it,
give it a type relation, a pattern and a te compute, then infer, fuse, build and run it."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from codegen import te, tir
from compiler import relay
from compiler.errors import CompilerError
from compiler.op.registry import _REGISTRY
from compiler.relay.op import op as _op


@pytest.fixture
def op_name(request):
    """A fresh op name, removed from the registry after the test."""
    name = f"test_custom.{request.node.name.split('[')[0]}"
    yield name
    _REGISTRY.pop(name, None)


def _define_scaled_add(op_name):
    """custom op: lhs + 2 * rhs (broadcasting), elementwise."""
    _op.register(op_name, "lhs + 2 * rhs")
    op = _op.get(op_name)
    op.set_num_inputs(2)
    op.add_argument("lhs", "Tensor", "the first input")
    op.add_argument("rhs", "Tensor", "the second input")
    op.add_type_rel("Broadcast")
    op.set_support_level(1)
    _op.register_pattern(op_name, _op.OpPattern.BROADCAST)
    _op.register_stateful(op_name, False)

    @_op.register_compute(op_name)
    def compute(attrs, inputs, out_type):
        a, b = inputs
        return [te.compute(out_type.shape,
                           lambda *i: a[i] + b[i[len(i) - b.ndim:]] * tir.const(2.0, a.dtype),
                           name="scaled_add")]
    return op


def test_op_register_sets_what_tvm_sets(op_name):
    op = _define_scaled_add(op_name)
    assert _op.get(op_name) is op and op.name == op_name
    assert op.num_inputs == 2 and op.support_level == 1
    assert op.get_attr("TOpPattern") == _op.OpPattern.BROADCAST
    assert op.get_attr("TOpIsStateful") is False
    assert op.get_attr("fnot_there") is None
    assert relay.op.register(op_name) is op  # registering again gives the same op


def test_custom_op_infers_fuses_builds_and_runs(op_name):
    op = _define_scaled_add(op_name)
    x = relay.var("x", shape=(3, 4))
    b = relay.var("b", shape=(4,))
    y = relay.exp(relay.Call(op, [relay.nn.relu(x), b]))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, b], y)))
    assert mod["main"].checked_type == relay.FuncType(
        [relay.TensorType((3, 4)), relay.TensorType((4,))], relay.TensorType((3, 4)))
    fused = relay.transform.FuseOps(fuse_opt_level=2)(mod)
    call = fused["main"].body
    assert isinstance(call.op, relay.Function) and call.op.is_primitive  # one kernel
    xv = np.random.randn(3, 4).astype("float32")
    bv = np.random.randn(4).astype("float32")
    got = relay.create_executor("graph", mod=mod).evaluate()(xv, bv).numpy()
    np.testing.assert_allclose(got, np.exp(np.maximum(xv, 0) + 2 * bv), rtol=1e-6)


def test_custom_type_relation_function(op_name):
    def custom_log1_rel(arg_types, attrs):
        assert len(arg_types) == 1, "type relation arg number mismatch!"
        return relay.TensorType(arg_types[0].shape, arg_types[0].dtype)

    _op.register(op_name, r"code(cal log of a tensor.)code")
    _op.get(op_name).set_num_inputs(1)
    _op.get(op_name).set_attrs_type_key("DictAttrs")
    _op.get(op_name).add_type_rel("custom_log1", custom_log1_rel)
    _op.register_pattern(op_name, _op.OpPattern.ELEMWISE)
    tp = relay.TensorType((10, 10), "float32")
    x = relay.var("x", tp)
    f = relay.Function([x], relay.add(relay.Call(_op.get(op_name), [x]), x))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(f))
    assert mod["main"].checked_type == relay.FuncType([tp], tp)


def test_op_without_type_relation_or_compute_is_a_clear_error(op_name):
    _op.register(op_name)
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Call(_op.get(op_name), [x])))
    with pytest.raises(CompilerError, match="has no type relation"):
        relay.transform.InferType()(mod)
    _op.get(op_name).add_type_rel("Identity")
    with pytest.raises(CompilerError, match="no compute rule"):
        relay.build(mod)


def test_register_op_attr_levels(op_name):
    _op.register(op_name)
    _op.register_op_attr(op_name, "ftest", lambda x: x + 1)
    assert _op.get(op_name).get_attr("ftest")(1) == 2
    with pytest.raises(CompilerError, match="already registered"):
        _op.register_op_attr(op_name, "ftest", lambda x: x + 2)
    _op.register_op_attr(op_name, "ftest", lambda x: x + 3, level=11)
    assert _op.get(op_name).get_attr("ftest")(1) == 4
    _op.get(op_name).reset_attr("ftest")
    assert _op.get(op_name).get_attr("ftest") is None
    with pytest.raises(CompilerError, match="unknown type relation"):
        _op.get(op_name).add_type_rel("NoSuchRel")


def test_compute_must_return_tensors(op_name):
    _op.register(op_name)
    _op.get(op_name).set_num_inputs(1)
    _op.get(op_name).add_type_rel("Identity")
    _op.register_compute(op_name, lambda attrs, inputs, out_type: inputs[0])
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Call(_op.get(op_name), [x])))
    with pytest.raises(CompilerError, match="expected a non-empty list of te tensors"):
        relay.build(mod)
