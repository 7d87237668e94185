"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss converters vs onnx.reference."""
from __future__ import annotations

import numpy as np
import pytest

from .test_onnx_attention import _check, _model, _rand


def _target(shape, classes, ignore=None, seed=0):
    t = np.random.default_rng(seed).integers(0, classes, shape).astype("int64")
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return t


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 1, -1])
def test_nll_loss(executor, reduction, weighted, ignore):
    feeds = {"x": _rand(3, 4, 2), "t": _target((3, 2), 4, ignore),
             "w": np.abs(_rand(4, seed=1)) + 0.1 if weighted else None}
    attrs = {"reduction": reduction} | ({} if ignore is None else {"ignore_index": ignore})
    model = _model("NegativeLogLikelihoodLoss", feeds, 1, 13, **attrs)
    got = _check(model, {k: v for k, v in feeds.items() if v is not None}, executor)
    assert got[0].shape == ((3, 2) if reduction == "none" else ())


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_softmax_cross_entropy_with_log_prob(executor, reduction):
    feeds = {"x": _rand(2, 5, 3), "t": _target((2, 3), 5, ignore=-2),
             "w": np.abs(_rand(5, seed=2)) + 0.1}
    model = _model("SoftmaxCrossEntropyLoss", feeds, 2, 13, reduction=reduction,
                   ignore_index=-2)
    got = _check(model, feeds, executor)
    assert got[1].shape == (2, 5, 3)
    assert np.allclose(np.exp(got[1]).sum(axis=1), 1, atol=1e-5)


def test_nll_loss_mismatched_target_is_a_clear_error():
    from compiler.frontend import from_onnx
    feeds = {"x": _rand(3, 4), "t": np.zeros((2,), "int64")}
    with pytest.raises(Exception, match="do not match"):
        from_onnx(_model("NegativeLogLikelihoodLoss", feeds, 1, 13))
