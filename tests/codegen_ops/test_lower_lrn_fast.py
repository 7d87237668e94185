"""nn.lrn's float32 single-pass rule (compute/norm.py _lrn_fast) against the reference:
odd/even sizes, windows wider than the channel count, every axis but the last, and the
exponents with sqrt forms plus a general one (exp/log path)."""
from __future__ import annotations

import pytest

from tests.codegen_ops.lowering_harness import check_op, rand


@pytest.mark.parametrize("shape,axis", [((1, 7, 5, 6), 1), ((2, 3, 4), 1), ((1, 2, 3, 3), 1),
                                        ((3, 9, 2), 0), ((2, 4, 5, 3), 2)])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8])
def test_lrn_fast_windows(shape, axis, size):
    x = rand(shape, "float32", seed=size)
    check_op("nn.lrn", [x], rtol=1e-5, atol=1e-7, size=size, axis=axis, bias=1.0,
             alpha=0.3, beta=0.75)


@pytest.mark.parametrize("beta", [0.0, 0.5, 0.75, 1.0, 1.5, 0.6, 2.3])
def test_lrn_fast_betas(beta):
    x = rand((1, 6, 4, 5), "float32", seed=3)
    check_op("nn.lrn", [x], rtol=2e-5, atol=1e-7, size=5, axis=1, bias=2.0, alpha=0.1,
             beta=beta)
