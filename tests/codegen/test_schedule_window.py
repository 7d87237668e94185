"""Per-plane pooling schedule (codegen.schedules.window) through relay.build, against the ops'
numpy references: padding, strides, dilation, ceil mode, count_include_pad, NaN and -inf
windows, windows over padding alone, and a fused epilogue."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
import runtime
from compiler import relay
from compiler.op.registry import get_def
from runtime import graph_executor

RNG = np.random.default_rng(11)

CASES = [
    # shape, pool, strides, padding (t, l, b, r), dilation, ceil_mode, count_include_pad
    ((1, 3, 13, 13), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False, False),
    ((2, 5, 14, 11), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, False),
    ((1, 4, 14, 14), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, True),
    ((1, 2, 10, 9), (2, 3), (2, 2), (0, 1, 1, 0), (1, 1), True, True),
    ((1, 2, 10, 9), (2, 3), (2, 2), (0, 1, 1, 0), (1, 1), True, False),
    ((1, 3, 12, 12), (3, 2), (1, 3), (2, 1, 2, 1), (2, 2), False, True),
    ((1, 1, 5, 5), (2, 2), (2, 2), (3, 3, 3, 3), (1, 1), False, False),  # pad-only windows
    ((1, 2, 70, 67), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False, False),  # wide, unpadded:
    ((1, 2, 9, 40), (2, 3), (1, 1), (0, 0, 0, 0), (2, 1), False, True),    # taps read in place
]


def _run(expr, x: np.ndarray) -> np.ndarray:
    xv = relay.var("x", shape=x.shape)
    func = relay.Function([xv], expr(xv))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(func), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.run(x=x)
    return gm.get_output(0).numpy()


def _pool(kind, pool, strides, pad, dil, ceil, include):
    def make(x):
        if kind == "max":
            return relay.nn.max_pool2d(x, pool, strides, dil, pad, ceil_mode=ceil)
        return relay.nn.avg_pool2d(x, pool, strides, dil, pad, ceil_mode=ceil,
                                   count_include_pad=include)
    return make


def _reference(kind: str, x: np.ndarray, make) -> np.ndarray:
    call = make(relay.var("x", shape=x.shape))
    return get_def(f"nn.{kind}_pool2d").reference([x], call.attrs)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,pool,strides,pad,dil,ceil,include", CASES)
def test_pool_matches_reference(kind, shape, pool, strides, pad, dil, ceil, include):
    x = RNG.standard_normal(shape).astype("float32")
    make = _pool(kind, pool, strides, pad, dil, ceil, include)
    np.testing.assert_allclose(_run(make, x), _reference(kind, x, make), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("width, pad", [(9, 1), (40, 0)], ids=["phases", "in-place"])
def test_max_pool_propagates_nan_and_keeps_minus_inf(width, pad):
    x = RNG.standard_normal((1, 2, 9, width)).astype("float32")
    x[0, 0, 4, 4] = np.nan
    x[0, 1] = -np.inf
    make = _pool("max", (3, 3), (1, 1), (pad,) * 4, (1, 1), False, False)
    got = _run(make, x)
    expected = _reference("max", x, make)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert np.isnan(got).sum() == 9
    assert (got[0, 1] == -np.inf).all()  # -inf inputs stay -inf; padding does not win
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_fused_epilogue():
    x = RNG.standard_normal((1, 3, 11, 11)).astype("float32")
    got = _run(lambda v: relay.nn.relu(relay.nn.avg_pool2d(v, (3, 3), (2, 2), padding=(1, 1)))
               * relay.const(2.0), x)
    make = _pool("avg", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False)
    np.testing.assert_allclose(got, 2 * np.maximum(_reference("avg", x, make), 0), rtol=1e-5,
                               atol=1e-6)
