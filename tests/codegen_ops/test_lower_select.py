"""Kernels of the ops whose results depend on the data's values (argwhere, unique,
vision.all_class_non_max_suppression) against their numpy references, on random data with
repeats, NaNs, ties and degenerate boxes."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te
from codegen.jit import build_library
from codegen.lower import lower
from codegen.options import CodegenOptions
import compiler.op.compute  # noqa: F401  (registers the compute rules)
from compiler.ir.attrs import Attrs
from compiler.ir.types import TensorType
from compiler.op.registry import get_def
from runtime.shape_functions import get_shape_function
from tests.codegen_ops.lowering_harness import check_op, run_op

OPS_TESTED = {"argwhere", "unique", "vision.all_class_non_max_suppression"}


@pytest.mark.parametrize("shape,dtype", [((3, 5), "float32"), ((7,), "bool"),
                                         ((2, 3, 4), "int64"), ((4,), "float32")])
def test_argwhere_at_the_count_its_shape_function_gives(shape, dtype):
    """argwhere's kernel as the VM specialises it: the rows its shape function counted."""
    rng = np.random.default_rng(8)
    x = (rng.integers(0, 3, shape) * rng.integers(0, 2, shape)).astype(dtype)
    if dtype == "float32" and x.size > 2:
        x.reshape(-1)[1] = np.nan  # nonzero, as numpy says
    if shape == (4,):
        x[:] = 0
    rows = int(get_shape_function("argwhere")(None, [x], [2])[0][0])
    data = te.placeholder(x.shape, dtype, "x")
    out = get_def("argwhere").compute([data], Attrs({}), TensorType((rows, x.ndim), "int32"))
    lib = build_library([lower("argwhere_kernel", [data], [out])], options=CodegenOptions.host())
    got = np.full((rows, x.ndim), -1, np.int32)
    lib["argwhere_kernel"](x, got)
    np.testing.assert_array_equal(got, get_def("argwhere").reference([x], Attrs({})))


@pytest.mark.parametrize("is_sorted", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_unique_1d_with_repeats(is_sorted, dtype):
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, 17).astype(dtype)
    if dtype == "float32":
        x[[2, 9]] = np.nan
        x[4] = -0.0
    for counts in (True, False):
        check_op("unique", [x], sorted=is_sorted, return_counts=counts)


@pytest.mark.parametrize("is_sorted", [True, False])
def test_unique_rows(is_sorted):
    rng = np.random.default_rng(6)
    x = rng.integers(0, 2, (9, 3)).astype("float32")
    check_op("unique", [x], sorted=is_sorted, return_counts=True)


def test_unique_all_distinct_and_all_equal():
    check_op("unique", [np.arange(6, dtype="int32")[::-1].copy()], sorted=True,
             return_counts=True)
    got, _ = run_op("unique", [np.full(5, 7, "int32")], sorted=False, return_counts=True)
    assert got[3].tolist() == [1] and got[0][0] == 7 and got[4][0] == 5


def _boxes(rng, batch, count):
    corner = rng.uniform(0, 8, (batch, count, 2))
    size = rng.uniform(0.5, 4, (batch, count, 2))
    boxes = np.concatenate([corner, corner + size], axis=2).astype("float32")
    boxes[:, ::4] = boxes[:, ::4][..., [2, 3, 0, 1]]  # some flipped corners
    boxes[:, 3, 2:] = boxes[:, 3, :2]  # a box of zero area
    return boxes


@pytest.mark.parametrize("limit,iou,score", [(3, 0.4, 0.2), (100, 0.0, np.nan),
                                             (0, 0.5, 0.0), (5, -1.0, 0.5)])
def test_all_class_nms(limit, iou, score):
    rng = np.random.default_rng(7)
    boxes = _boxes(rng, 2, 11)
    scores = rng.uniform(0, 1, (2, 3, 11)).astype("float32")
    scores[0, 0, 5] = scores[0, 0, 6]  # a tie: the lower index goes first
    check_op("vision.all_class_non_max_suppression",
             [boxes, scores, np.array(limit, "int64"), np.array(iou, "float32"),
              np.array([score], "float32")], output_format="onnx")
