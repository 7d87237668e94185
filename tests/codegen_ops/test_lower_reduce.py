"""Reductions lowered alone: axis / keepdims / exclude / axis=None, NaN, ints, argmax ties."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.codegen_ops.lowering_harness import check_op, rand

REDUCERS = ["sum", "mean", "max", "min", "prod", "all", "any"]
OPS_TESTED = {*REDUCERS, "argmax", "argmin", "variance"}


@st.composite
def _reduction(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    axis = draw(st.one_of(st.none(), st.lists(st.integers(-len(shape), len(shape) - 1),
                                              min_size=1, max_size=len(shape), unique_by=lambda
                                              a: a % len(shape))))
    return shape, axis, draw(st.booleans()), draw(st.booleans())


@settings(max_examples=10, deadline=None)
@given(_reduction())
def test_reducers_float(case):
    shape, axis, keepdims, exclude = case
    x = rand(shape, "float32", seed=len(shape), lo=0.5, hi=1.5)
    for op in REDUCERS:
        check_op(op, [x], rtol=1e-5, axis=axis, keepdims=keepdims, exclude=exclude)
    for op in ("argmax", "argmin"):
        check_op(op, [x], axis=axis, keepdims=keepdims, exclude=exclude,
                 select_last_index=False)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8", "int64"])
def test_reducers_int(dtype):
    x = rand((3, 4, 5), dtype, seed=3, lo=-12, hi=12)
    for op in REDUCERS:  # integer sums wrap in their width; means truncate
        check_op(op, [x], axis=[1], keepdims=False, exclude=False)
        check_op(op, [x], axis=[0, 2], keepdims=True, exclude=False)
    check_op("argmax", [x], axis=[2], keepdims=False, exclude=False, select_last_index=True)


def test_bool_all_any():
    x = rand((4, 6), "bool", seed=4)
    x[0] = True
    for op in ("all", "any", "max", "min"):
        check_op(op, [x], axis=[1], keepdims=False, exclude=False)


def test_nan_propagation():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, -1.0], [2.0, 5.0, 5.0]], "float32")
    for op in ("max", "min", "sum"):
        check_op(op, [x], axis=[1], keepdims=False, exclude=False)
    for op in ("argmax", "argmin"):
        for last in (False, True):
            check_op(op, [x], axis=[1], keepdims=False, exclude=False, select_last_index=last)


def test_arg_ties_multi_axis():
    x = np.array([[[1, 7], [7, 0]], [[2, 2], [2, 2]]], "float32")
    for op in ("argmax", "argmin"):
        for last in (False, True):
            check_op(op, [x], axis=[1, 2], keepdims=True, exclude=False, select_last_index=last)
            check_op(op, [x], axis=None, keepdims=False, exclude=False, select_last_index=last)


@pytest.mark.parametrize("unbiased", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_variance(unbiased, dtype):
    x = rand((3, 4, 5), dtype, seed=5)
    m = x.astype("float64").mean(axis=(1,), keepdims=True).astype(dtype)
    check_op("variance", [x, m], rtol=1e-5, axis=[1], keepdims=False, exclude=False,
             unbiased=unbiased)
    m2 = x.astype("float64").mean(axis=(0, 2), keepdims=True).astype(dtype)
    check_op("variance", [x, m2], rtol=1e-5, axis=[1], keepdims=True, exclude=True,
             unbiased=unbiased)
