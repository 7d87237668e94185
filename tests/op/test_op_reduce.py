"""Reductions: axis/keepdims/exclude handling, dtype rules, argmax indexing, variance."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op._opcheck import check, infer
from compiler.errors import TypeInferenceError
from compiler.ir.expr import var
from compiler.ir.types import TensorType
from compiler.op import reduce as R
from compiler.op.registry import OpPattern, get_def

RNG = np.random.default_rng(2)


def x(shape, dtype="float32"):
    return var("x", shape=shape, dtype=dtype)


@pytest.mark.parametrize("name,fn", [("sum", np.sum), ("mean", np.mean), ("max", np.max),
                                     ("min", np.min), ("prod", np.prod)])
@pytest.mark.parametrize("axis,keepdims,exclude", [(None, False, False), (1, True, False),
                                                    ((0, 2), False, False), (-1, False, True),
                                                    ([0], True, True)])
def test_reduce(name, fn, axis, keepdims, exclude):
    d = RNG.uniform(0.5, 1.5, (2, 3, 4)).astype("float32")
    out = check(getattr(R, name)(x(d.shape), axis, keepdims, exclude), d)
    axes = axis if not exclude else tuple(i for i in range(3) if i not in
                                          np.atleast_1d(axis) % 3)
    np.testing.assert_allclose(out, fn(d, axis=axes, keepdims=keepdims), rtol=1e-5)
    assert get_def(name).pattern == OpPattern.COMM_REDUCE
    assert get_def(name).attrs_type_key == "relay.attrs.ReduceAttrs"


def test_int_sum_and_mean_keep_dtype():
    d = np.array([[1, 2], [3, -8]], "int32")
    out = check(R.sum(x((2, 2), "int32"), axis=1), d)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [3, -5])
    np.testing.assert_array_equal(check(R.mean(x((2, 2), "int32"), axis=1), d), [1, -2])


def test_all_any():
    d = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(check(R.all(x((2, 2), "bool"), axis=1), d), [False, True])
    np.testing.assert_array_equal(check(R.any(x((2, 2), "bool"), axis=0), d), [True, True])


def test_argmax_argmin_int32_and_multi_axis():
    d = RNG.standard_normal((3, 4, 5)).astype("float32")
    call = R.argmax(x(d.shape), axis=1)
    assert infer(call) == TensorType((3, 5), "int32")
    np.testing.assert_array_equal(check(call, d), d.argmax(axis=1))
    np.testing.assert_array_equal(check(R.argmin(x(d.shape), axis=-1, keepdims=True), d),
                                  d.argmin(axis=-1)[..., None])
    flat = check(R.argmax(x(d.shape)), d)
    assert flat.shape == () and flat == d.argmax()
    multi = check(R.argmax(x(d.shape), axis=(1, 2)), d)
    np.testing.assert_array_equal(multi, d.reshape(3, -1).argmax(axis=1))
    ties = np.array([1, 3, 3, 0], "float32")
    assert check(R.argmax(x((4,)), select_last_index=True), ties) == 2
    assert check(R.argmax(x((4,))), ties) == 1


def test_variance_std_logsumexp():
    d = RNG.standard_normal((3, 4)).astype("float32")
    v = R.variance(x(d.shape), axis=1)
    assert v.op.name == "variance" and len(v.args) == 2 and v.args[1].op.name == "mean"
    np.testing.assert_allclose(check(v, d, d.mean(axis=1, keepdims=True)), d.var(axis=1),
                               rtol=1e-5)
    vu = R.variance(x(d.shape), axis=0, keepdims=True, unbiased=True)
    np.testing.assert_allclose(check(vu, d, d.mean(axis=0, keepdims=True)),
                               d.var(axis=0, ddof=1, keepdims=True), rtol=1e-5)
    s = R.std(x(d.shape), axis=1)
    assert s.op.name == "sqrt" and s.args[0].op.name == "variance"
    lse = R.logsumexp(x(d.shape), axis=1)
    assert infer(lse) == TensorType((3,))


def test_reduce_errors():
    with pytest.raises(TypeInferenceError, match="sum: axis=3 is out of range for a tensor of "
                                                 "rank 2"):
        infer(R.sum(x((2, 3)), axis=3))
    with pytest.raises(TypeInferenceError, match="max: axis .* names the same axis twice"):
        infer(R.max(x((2, 3)), axis=(1, -1)))
    with pytest.raises(TypeInferenceError, match="variance: data and mean"):
        from compiler.op.registry import make_call
        infer(make_call("variance", [x((2, 3)), var("m", shape=(2, 1), dtype="float64")],
                        axis=[1]))
