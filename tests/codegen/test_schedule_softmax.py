"""Row softmax / log_softmax schedule (codegen.schedules.softmax) through relay.build against the
ops' numpy references: rows shorter than, equal to and longer than a vector (with tails),
-inf and NaN entries, a large dynamic range, and a fused elementwise consumer."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
import runtime
from compiler import relay
from compiler.op.registry import get_def
from runtime import graph_executor

RNG = np.random.default_rng(5)


def _run(make, x: np.ndarray) -> np.ndarray:
    xv = relay.var("x", shape=x.shape)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([xv], make(xv))), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.run(x=x)
    return gm.get_output(0).numpy()


def _ref(op: str, x: np.ndarray) -> np.ndarray:
    call = getattr(relay.nn, op)(relay.var("x", shape=x.shape), axis=-1)
    return get_def(f"nn.{op}").reference([x], call.attrs)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(1, 7), (3, 16), (2, 3, 37), (4, 200), (1000,)])
def test_matches_reference(op, shape):
    x = (RNG.standard_normal(shape) * 20).astype("float32")
    got = _run(lambda v: getattr(relay.nn, op)(v, axis=-1), x)
    np.testing.assert_allclose(got, _ref(op, x), rtol=2e-5, atol=1e-6)


def test_minus_inf_and_nan_rows():
    x = RNG.standard_normal((4, 21)).astype("float32")
    x[0, 3] = -np.inf                # one -inf: probability 0
    x[1, :] = -np.inf                # all -inf: NaN, as numpy gives
    x[2, 20] = np.nan                # a NaN in the tail: the whole row is NaN
    x[3, 0] = np.inf                 # +inf: NaN (inf - inf), as numpy
    got = _run(lambda v: relay.nn.softmax(v, axis=-1), x)
    want = _ref("softmax", x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert got[0, 3] == 0 and np.isnan(got[1]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got[0], want[0], rtol=2e-5, atol=1e-7)


def test_fused_consumer():
    x = RNG.standard_normal((5, 40)).astype("float32")
    got = _run(lambda v: relay.sqrt(relay.nn.softmax(v, axis=-1)) * relay.const(3.0), x)
    np.testing.assert_allclose(got, 3 * np.sqrt(_ref("softmax", x)), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_causal_mask_terms_are_exact_zeros(op):
    """An additive -10000 mask: masked terms are 0 (softmax) or x - max - log(sum)
    (log_softmax), terms below float32's smallest normal are flushed to 0, the rest match."""
    n = 48
    mask = np.triu(np.full((n, n), -10000.0, np.float32), k=1)
    x = (RNG.standard_normal((2, n, n)) * 3).astype("float32") + mask
    x[0, 5, :4] = [0.0, -90.0, -95.0, -200.0]  # exp(x - max) under 1.2e-38 for the last three
    got = _run(lambda v: getattr(relay.nn, op)(v, axis=-1), x)
    ref = _ref(op, x)
    if op == "softmax":
        assert np.all(got[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0.0)
        assert np.all(got[0, 5, 1:4] == 0.0)
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1.2e-38)
    else:
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-6)
