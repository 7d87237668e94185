"""max / min reductions long enough to be vectorised (a reduction's max / min is emitted as
llvm.maximum / minimum, which the loop vectoriser turns into vector reductions): a NaN in the
vector body, in the remainder, or in every row's first element propagates, and infinities
stay, in float16/32/64, as numpy's max / min give."""
from __future__ import annotations

import numpy as np
import pytest

from tests.codegen_ops.lowering_harness import run_op

OPS_TESTED = {"max", "min"}


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("length", [16, 50, 169])
@pytest.mark.parametrize("op", ["max", "min"])
def test_long_rows_keep_nan_and_infinities(op, length, dtype):
    rows = 7
    x = np.random.default_rng(length).standard_normal((rows, length)).astype(dtype)
    x[1, length // 3] = np.nan     # in the vector body
    x[2, length - 1] = np.nan      # in the remainder (or the last vector)
    x[3, 0] = np.nan               # the first element
    x[4, length // 2] = np.inf
    x[5, length // 2] = -np.inf
    x[6, :] = np.nan
    got, (ref,) = run_op(op, [x], axis=[1], keepdims=False, exclude=False)
    np.testing.assert_array_equal(got[0], ref)
    np.testing.assert_array_equal(got[0], getattr(x, op)(axis=1))
    assert np.isnan(got[0][[1, 2, 3, 6]]).all() and not np.isnan(got[0][[0, 4, 5]]).any()
