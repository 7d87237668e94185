"""FoldConstant: each of TVM's rules, and evaluation through the project's own JIT."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.op.nn_norm import dropout
from compiler.passes import fold_constant as fc
from compiler.relay import transform


def run_opt_pass(expr, opt_pass):
    mod = tvm.IRModule.from_expr(expr)
    mod = tvm.transform.Sequential([opt_pass])(transform.InferType()(mod))
    return mod["main"]


def fold(expr):
    with tvm.transform.PassContext(opt_level=2):
        return run_opt_pass(expr, transform.FoldConstant())


def infer(expr):
    return run_opt_pass(expr, transform.InferType())


def test_fold_const_add_multiply():
    c_data = np.array([1, 2, 3], dtype="float32")
    t = relay.TensorType([1, 2, 3], "float32")

    def before():
        c = relay.const(c_data)
        x = relay.var("x", t)
        y = relay.add(c, c)
        y = relay.multiply(y, relay.const(2, "float32"))
        y = relay.add(x, y)
        z = relay.add(y, c)
        return relay.Function([x], z)

    def expected():
        x = relay.var("x", t)
        c_folded = (c_data + c_data) * 2
        y = relay.add(x, relay.const(c_folded))
        z = relay.add(y, relay.const(c_data))
        return relay.Function([x], z)

    tvm.assert_structural_equal(fold(before()), infer(expected()))


def test_fold_runs_the_jit_not_numpy():
    """Integer division by zero: C semantics from the compiled kernel, not a numpy warning."""
    a = relay.const(np.array([7, -7, 9], dtype="int32"))
    b = relay.const(np.array([2, 2, 4], dtype="int32"))
    x = relay.var("x", shape=(3,), dtype="int32")
    out = fold(relay.Function([x], relay.add(x, relay.divide(a, b))))
    folded = out.body.args[1]
    assert isinstance(folded, relay.Constant)
    np.testing.assert_array_equal(folded.data.numpy(), [3, -3, 2])  # truncating division


def test_fold_concatenate_of_constant_tuple():
    x = relay.var("x", shape=(5,), dtype="int32")
    parts = [relay.const(np.array([i], dtype="int32")) for i in range(5)]
    out = fold(relay.Function([x], relay.add(relay.concatenate(parts, axis=-1), x)))
    folded = out.body.args[0]
    assert isinstance(folded, relay.Constant)
    np.testing.assert_array_equal(folded.data.numpy(), np.arange(5, dtype="int32"))


def test_fold_tuple_result_split():
    c = relay.const(np.arange(6, dtype="float32"))
    x = relay.var("x", shape=(3,))
    parts = relay.split(c, indices_or_sections=2, axis=0)
    out = fold(relay.Function([x], relay.add(parts[1], x)))
    folded = out.body.args[0]
    assert isinstance(folded, relay.Constant)
    np.testing.assert_array_equal(folded.data.numpy(), [3, 4, 5])


def test_fold_shape_of_from_static_type():
    x = relay.var("x", shape=(2, 3, 4))
    out = fold(relay.Function([x], relay.shape_of(x, dtype="int64")))
    assert isinstance(out.body, relay.Constant)
    assert out.body.data.dtype == "int64"
    np.testing.assert_array_equal(out.body.data.numpy(), [2, 3, 4])


def test_fold_ndarray_size():
    x = relay.var("x", shape=(2, 3, 4))
    out = fold(relay.Function([x], relay.ndarray_size(x, dtype="int32")))
    assert isinstance(out.body, relay.Constant)
    assert out.body.data.numpy().item() == 24


def test_fold_if_constant_condition():
    x = relay.var("x", shape=(2,))
    f = relay.Function([x], relay.If(relay.const(True), relay.exp(x), relay.log(x)))
    tvm.assert_structural_equal(fold(f), infer(relay.Function([x], relay.exp(x))))
    f = relay.Function([x], relay.If(relay.const(False), relay.exp(x), relay.log(x)))
    tvm.assert_structural_equal(fold(f), infer(relay.Function([x], relay.log(x))))


def test_fold_tuple_get_item_of_tuple():
    x = relay.var("x", shape=(2,))
    y = relay.var("y", shape=(2,))
    f = relay.Function([x, y], relay.TupleGetItem(relay.Tuple([relay.exp(x), y]), 0))
    tvm.assert_structural_equal(fold(f), infer(relay.Function([x, y], relay.exp(x))))


def test_fold_let_with_constant_value():
    x = relay.var("x", shape=(3,))
    v = relay.var("v", shape=(3,))
    c = np.array([1, 2, 3], dtype="float32")
    f = relay.Function([x], relay.Let(v, relay.const(c), relay.add(x, v)))
    expected = relay.Function([x], relay.add(x, relay.const(c)))
    tvm.assert_structural_equal(fold(f), infer(expected))


def test_let_with_non_constant_value_is_kept():
    x = relay.var("x", shape=(3,))
    v = relay.var("v", shape=(3,))
    f = relay.Function([x], relay.Let(v, relay.exp(x), relay.add(x, v)))
    assert isinstance(fold(f).body, relay.Let)


def test_no_fold_inside_primitive_function():
    p = relay.var("p", shape=(3,))
    c = relay.const(np.ones(3, dtype="float32"))
    inner = relay.Function([p], relay.add(p, relay.add(c, c))).with_attr("Primitive", 1)
    x = relay.var("x", shape=(3,))
    f = relay.Function([x], relay.Call(inner, [x]))
    out = fold(f)
    body = out.body.op.body
    assert isinstance(body.args[1], relay.Call)  # add(c, c) untouched


def test_no_fold_call_without_args():
    x = relay.var("x", shape=(4, 5))
    f = relay.Function([x], relay.add(x, relay.zeros((4, 5), "float32")))
    out = fold(f)
    assert isinstance(out.body.args[1], relay.Call)
    assert out.body.args[1].op.name == "zeros"


def test_no_fold_non_op_callee():
    p = relay.var("p", shape=(3,))
    g = relay.Function([p], relay.exp(p))
    c = relay.const(np.ones(3, dtype="float32"))
    out = fold(relay.Function([], relay.Call(g, [c])))
    assert isinstance(out.body, relay.Call) and isinstance(out.body.op, relay.Function)


def test_no_fold_stateful_dropout():
    c = relay.const(np.ones((2, 2), dtype="float32"))
    out = fold(relay.Function([], dropout(c)))
    item = out.body
    assert isinstance(item, relay.TupleGetItem)
    assert isinstance(item.tuple_value, relay.Call)
    assert item.tuple_value.op.name == "nn.dropout"


def test_fold_constant_is_opt_level_2():
    c = relay.const(np.ones(3, dtype="float32"))
    mod = transform.InferType()(tvm.IRModule.from_expr(relay.Function([], relay.add(c, c))))
    with tvm.transform.PassContext(opt_level=1):
        kept = tvm.transform.Sequential([transform.FoldConstant()])(mod)
    assert isinstance(kept["main"].body, relay.Call)
    with tvm.transform.PassContext(opt_level=2):
        folded = tvm.transform.Sequential([transform.FoldConstant()])(mod)
    assert isinstance(folded["main"].body, relay.Constant)


def test_kernel_cache_compiles_once_per_shape_signature():
    fc.clear_kernel_cache()
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(4, 3))
    out = x
    weights = []
    for _ in range(30):
        w = rng.standard_normal((3, 4)).astype("float32")
        weights.append(w)
        folded = relay.exp(relay.reshape(relay.const(w), (4, 3)))  # exp runs the JIT
        out = relay.add(out, folded)
    result = fold(relay.Function([x], out))
    info = fc.kernel_cache_info()
    assert info["misses"] == 1, info  # one exp kernel (reshape folds by reference)
    assert info["hits"] == 29, info
    last = result.body.args[1]
    assert isinstance(last, relay.Constant)
    np.testing.assert_allclose(last.data.numpy(), np.exp(weights[-1].reshape(4, 3)), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exact_ops_fold_by_reference_with_the_kernels_bits(dtype):
    """Data movement and correctly rounded float ops skip the JIT, yet fold to exactly what
    the compiled kernel computes."""
    rng = np.random.default_rng(1)
    a = relay.const(rng.uniform(0.5, 2.0, (8, 3, 3, 3)), dtype)
    b = relay.const(rng.uniform(0.5, 2.0, (8, 1, 1, 1)), dtype)
    calls = [relay.add(a, b), relay.subtract(a, b), relay.multiply(a, b), relay.divide(a, b),
             relay.negative(a), relay.sqrt(a), relay.transpose(a, (1, 0, 2, 3)),
             relay.reshape(a, (8, 27)), relay.expand_dims(b, 0),
             relay.concatenate([a, a], axis=1), relay.stack([a, a], axis=0),
             relay.strided_slice(a, (1, 0, 0, 0), (7, 3, 3, 2), (2, 1, 1, 1)),
             relay.nn.pad(a, ((0, 0), (1, 0), (0, 1), (0, 0)))]
    x = relay.var("x", shape=(), dtype=dtype)
    fc.clear_kernel_cache()
    folded = fold(relay.Function([x], relay.Tuple([relay.add(c, x) for c in calls])))
    assert fc.kernel_cache_info()["misses"] == 0
    for call, out in zip(calls, folded.body.fields):
        value = out.args[0]
        assert isinstance(value, relay.Constant), call.op.name
        typed = infer(relay.Function([], call)).body
        compiled = fc.evaluate_call(typed)  # the JIT's answer
        np.testing.assert_array_equal(value.data.numpy(), compiled.data.numpy(),
                                      err_msg=call.op.name)


def test_integer_and_transcendental_ops_still_fold_through_the_jit():
    fc.clear_kernel_cache()
    ints = relay.const(np.array([7, -7], dtype="int32"))
    floats = relay.const(np.array([0.5, 1.5], dtype="float32"))
    x = relay.var("x", shape=(2,))
    body = relay.add(relay.add(x, relay.cast(relay.multiply(ints, ints), "float32")),
                     relay.exp(floats))
    fold(relay.Function([x], body))
    assert fc.kernel_cache_info()["misses"] == 3  # int multiply, cast, exp


def test_long_chain_folds_without_recursion():
    c = relay.const(np.ones(2, dtype="float32"))
    x = relay.var("x", shape=(2,))
    y = x
    for _ in range(3000):
        y = relay.add(y, c)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        out = fold(relay.Function([x], y))
    finally:
        sys.setrecursionlimit(limit)
    assert isinstance(out.body, relay.Call)


def test_large_tensors_fold_through_the_jit():
    """Past REFERENCE_MAX_ELEMENTS the compiled kernel's one pass is the cheaper evaluation."""
    fc.clear_kernel_cache()
    n = fc.REFERENCE_MAX_ELEMENTS + 1
    big = relay.const(np.arange(n, dtype="float32"))
    x = relay.var("x", shape=(n,))
    out = fold(relay.Function([x], relay.add(x, relay.multiply(big, relay.const(np.float32(2))))))
    assert fc.kernel_cache_info()["misses"] == 1
    np.testing.assert_array_equal(out.body.args[1].data.numpy(), np.arange(n, dtype="float32") * 2)
