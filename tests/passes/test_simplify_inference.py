"""SimplifyInference: batch_norm / dropout / layer, instance and group norm unpacked as TVM does."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.op.interpreter import evaluate
from compiler.ir import assert_structural_equal, structural_equal
from compiler.transform.pass_infra import InferType
from compiler.passes.simplify_inference import SimplifyInference
from compiler.transform import PassContext, Sequential
from tests.passes._helpers import run_infer_type, run_opt_pass


def simplify(expr):
    return run_opt_pass(run_infer_type(expr), SimplifyInference())


def simple_bn(x, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5, shape=None,
              dtype="float32"):
    """TVM's test oracle: (x - mean) / sqrt(var + eps) * gamma + beta, in TVM's op order."""
    scale = relay.multiply(
        relay.const(1, dtype) / relay.sqrt(moving_var + relay.const(epsilon, dtype)), gamma)
    shift = relay.add(relay.multiply(relay.negative(moving_mean), scale), beta)
    num_newaxis = len(shape) - (axis + 1)
    if num_newaxis:
        scale = relay.expand_dims(scale, axis=1, num_newaxis=num_newaxis)
        shift = relay.expand_dims(shift, axis=1, num_newaxis=num_newaxis)
    return x * scale + shift


@pytest.mark.parametrize("dim,axis,nstep", [(2, 1, 1), (4, 1, 1), (4, 0, 3)])
def test_simplify_batchnorm(dim, axis, nstep, dtype="float32"):
    eps = 0.01
    ttype1 = relay.TensorType(tuple(10 for _ in range(dim)), dtype)
    ttype2 = relay.TensorType((10,), dtype)
    x = relay.var("x", ttype1)
    beta, gamma = relay.var("beta", ttype2), relay.var("gamma", ttype2)
    moving_var, moving_mean = relay.var("moving_var", ttype2), relay.var("moving_mean", ttype2)
    y1, y2 = x, x
    for _ in range(nstep):
        y1, _, _ = relay.nn.batch_norm(y1 + relay.const(1, dtype), gamma, beta, moving_mean,
                                       moving_var, epsilon=eps, axis=axis)
        y1 = relay.nn.dropout(y1)
        y2 = simple_bn(y2 + relay.const(1, dtype), gamma, beta, moving_mean, moving_var,
                       epsilon=eps, axis=axis, shape=ttype1.shape)
    mod = InferType()(tvm.IRModule.from_expr(y1))
    mod = SimplifyInference()(mod)
    assert structural_equal(mod["main"].body, y2, map_free_vars=True)
    assert "batch_norm" not in str(mod) and "dropout" not in str(mod)


def test_batchnorm_negative_axis_center_scale_off_and_numerics():
    shape = (2, 3, 4)
    x = relay.var("x", shape=shape)
    vecs = [relay.var(n, shape=(4,)) for n in ("gamma", "beta", "mean", "var")]
    out = relay.nn.batch_norm(x, *vecs, axis=-1, epsilon=1e-3, center=False, scale=False)[0]
    func = relay.Function([x, *vecs], out)
    after = simplify(func)
    gamma, beta, mean, var = vecs
    scale = relay.const(1.0) / relay.sqrt(var + relay.const(1e-3))
    shift = relay.multiply(relay.negative(mean), scale)
    expected = relay.Function([x, *vecs], x * scale + shift)  # axis -1 is last: no expand_dims
    assert_structural_equal(after, run_infer_type(expected))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(shape).astype("float32")] + [
        rng.uniform(0.5, 1.5, 4).astype("float32") for _ in vecs]
    np.testing.assert_allclose(evaluate(after, args), evaluate(func, args), rtol=1e-5,
                               atol=1e-6)


def test_other_batchnorm_outputs_keep_the_call():
    x = relay.var("x", shape=(2, 3))
    vecs = [relay.var(n, shape=(3,)) for n in ("gamma", "beta", "mean", "var")]
    bn = relay.nn.batch_norm(x, *vecs)
    func = relay.Function([x, *vecs], relay.Tuple([bn[0], bn[1]]))
    after = simplify(func)
    first, second = after.body.fields
    assert isinstance(second, relay.TupleGetItem) and second.index == 1
    assert second.tuple_value.op.name == "nn.batch_norm"
    assert first.op.name == "add"


def test_dropout_becomes_its_input():
    x = relay.var("x", shape=(2, 3))
    func = relay.Function([x], relay.exp(relay.nn.dropout(x, rate=0.3)))
    expected = relay.Function([x], relay.exp(x))
    assert_structural_equal(simplify(func), run_infer_type(expected))


def _reference_check(func, shape, vec_len, rtol=1e-5):
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(shape).astype("float32"),
            rng.uniform(0.5, 1.5, vec_len).astype("float32"),
            rng.standard_normal(vec_len).astype("float32")]
    after = simplify(func)
    text = str(after)
    assert "norm" not in text, text
    np.testing.assert_allclose(evaluate(after, args), evaluate(func, args), rtol=rtol,
                               atol=1e-5)
    return after


def test_layer_norm():
    x = relay.var("x", shape=(2, 5, 6))
    gamma, beta = relay.var("gamma", shape=(6,)), relay.var("beta", shape=(6,))
    func = relay.Function([x, gamma, beta], relay.nn.layer_norm(x, gamma, beta, epsilon=1e-4))
    after = _reference_check(func, (2, 5, 6), 6)
    # TVM's form: (x - mean) / sqrt(variance(x, mean) + eps) * gamma + beta, mean shared
    mean = relay.mean(x, axis=[-1], keepdims=True)
    var = relay.variance(x, axis=[-1], keepdims=True, with_mean=mean)
    out = (x - mean) / relay.sqrt(var + relay.const(1e-4))
    expected = relay.Function([x, gamma, beta], out * gamma + beta)
    assert_structural_equal(after, run_infer_type(expected))


def test_layer_norm_on_a_middle_axis_expands_gamma():
    x = relay.var("x", shape=(2, 5, 6))
    gamma, beta = relay.var("gamma", shape=(5,)), relay.var("beta", shape=(5,))
    func = relay.Function([x, gamma, beta], relay.nn.layer_norm(x, gamma, beta, axis=1))
    after = _reference_check(func, (2, 5, 6), 5)
    assert "expand_dims" in str(after)


def test_instance_norm():
    x = relay.var("x", shape=(2, 3, 4, 5))
    gamma, beta = relay.var("gamma", shape=(3,)), relay.var("beta", shape=(3,))
    func = relay.Function([x, gamma, beta], relay.nn.instance_norm(x, gamma, beta))
    _reference_check(func, (2, 3, 4, 5), 3)


def test_group_norm():
    x = relay.var("x", shape=(2, 6, 4, 3))
    gamma, beta = relay.var("gamma", shape=(6,)), relay.var("beta", shape=(6,))
    func = relay.Function([x, gamma, beta],
                          relay.nn.group_norm(x, gamma, beta, num_groups=3, epsilon=1e-5))
    after = _reference_check(func, (2, 6, 4, 3), 6)
    assert str(after).count("reshape") == 2


def test_needs_types():
    x = relay.var("x", shape=(2, 3))
    vecs = [relay.var(n, shape=(3,)) for n in ("gamma", "beta", "mean", "var")]
    func = relay.Function([x, *vecs], relay.nn.batch_norm(x, *vecs)[0])
    from compiler.passes.simplify_inference import simplify_inference
    with pytest.raises(ValueError, match="InferType"):
        simplify_inference(func)


def test_pass_info_and_required_infer_type():
    p = SimplifyInference()
    assert (p.info.name, p.info.opt_level) == ("SimplifyInference", 0)
    assert list(p.info.required) == ["InferType"]
    assert relay.transform.SimplifyInference is SimplifyInference
    x = relay.var("x", shape=(2, 3))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.dropout(x)))
    with PassContext(opt_level=0):
        out = Sequential([SimplifyInference()])(mod)  # runs InferType first by itself
    assert out["main"].body is out["main"].params[0]
