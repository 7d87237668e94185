"""softmax / log_softmax rows interleaved in groups (RowsConfig.row_group, softmax.rows)
through relay.build against numpy: row counts that do and do not fill the groups (the rest
rows one at a time), rows of whole vectors, with a tail and shorter than a vector, and rows
holding NaN or +-inf (the row maximum is not NaN-aware; the NaN must still reach the row)."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.transform import PassContext
from runtime import cpu, graph_executor

RNG = np.random.default_rng(21)


def reference(x: np.ndarray, log: bool) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = x - x.max(axis=-1, keepdims=True)
        e = np.exp(shifted)
        total = e.sum(axis=-1, keepdims=True)
        return shifted - np.log(total) if log else e / total


def run(x: np.ndarray, log: bool, group: int | None = None) -> np.ndarray:
    v = relay.var("x", shape=x.shape)
    y = (relay.nn.log_softmax if log else relay.nn.softmax)(v, axis=-1)
    overrides = {"softmax.rows": {"row_group": group}} if group else {}
    with PassContext(opt_level=3, config={"relayjit.schedule_config": overrides}):
        lib = relay.build(relay.Function([v], y))
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(x=x)
    return gm.get_output(0).numpy()


@pytest.mark.parametrize("shape", [(1, 12, 128, 128), (3, 7, 37), (5, 16), (2, 3, 5),
                                   (1, 1, 200), (9, 1)], ids=str)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("group", [1, 3, 4])
def test_rows_match_numpy(shape, log, group):
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    np.testing.assert_allclose(run(x, log, group), reference(x, log), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("group", [1, 4])
def test_rows_with_nan_and_infinities(log, group):
    """A NaN anywhere in a row makes the row NaN, as numpy's does; +inf makes it NaN (inf - inf);
    -inf entries are zero (log: -inf); other rows are untouched."""
    x = RNG.standard_normal((6, 37)).astype(np.float32)
    x[0, 5] = np.nan
    x[1, 36] = np.nan  # in the row's tail
    x[2, 3] = np.inf
    x[3, :] = -np.inf
    x[4, 10] = -np.inf
    got, want = run(x, log, group), reference(x, log)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-5, atol=1e-6)
