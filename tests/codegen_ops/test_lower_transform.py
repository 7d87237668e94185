"""Injective transforms, indexing, scans, sorts and constant-producing ops lowered alone."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.codegen_ops.lowering_harness import check_op, rand

OPS_TESTED = {"reshape", "reshape_like", "transpose", "concatenate", "stack", "split", "squeeze",
              "expand_dims", "reverse", "strided_slice", "tile", "repeat", "broadcast_to",
              "broadcast_to_like", "nn.batch_flatten", "nn.pad", "layout_transform",
              "nn.depth_to_space", "nn.space_to_depth", "take", "gather", "gather_nd",
              "one_hot", "cumsum", "cumprod", "trilu", "sort", "argsort", "topk", "arange",
              "shape_of", "ndarray_size", "full", "zeros", "ones", "scatter_elements",
              "scatter_nd"}


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.randoms())
def test_reshape_transpose(shape, rnd):
    x = rand(tuple(shape), "float32", seed=1)
    check_op("reshape", [x], newshape=(-1,), allowzero=False)
    check_op("reshape", [x], newshape=(shape[0], -1) if len(shape) > 1 else (1, -1),
             allowzero=False)
    perm = list(range(len(shape)))
    rnd.shuffle(perm)
    check_op("transpose", [x], axes=perm)
    check_op("nn.batch_flatten", [x])
    check_op("reverse", [x], axis=len(shape) - 1)


def test_reshape_special_and_like():
    x = rand((2, 3, 4), "int32")
    check_op("reshape", [x], newshape=(0, -3), allowzero=False)
    check_op("reshape", [x], newshape=(-4, 1, 2, -2), allowzero=False)
    check_op("reshape_like", [x, np.zeros((6, 4), "float32")], lhs_begin=0, lhs_end=None,
             rhs_begin=0, rhs_end=None)
    check_op("transpose", [x], axes=None)
    check_op("squeeze", [rand((1, 3, 1), "float32")], axis=None)
    check_op("squeeze", [rand((1, 3, 1), "float32")], axis=[-1])
    check_op("expand_dims", [x], axis=1, num_newaxis=2)
    check_op("expand_dims", [x], axis=-1, num_newaxis=1)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_stack_split(axis):
    parts = [rand((2, k + 1, 3), "float32", seed=k) for k in range(5)]
    parts = [np.moveaxis(p, 1, axis) if axis != 1 else p for p in parts]
    check_op("concatenate", [parts], axis=axis)
    same = [rand((2, 3), "int8", seed=k) for k in range(3)]
    check_op("stack", [same], axis=axis)
    x = rand((6, 4, 8), "float32")
    check_op("split", [x], indices_or_sections=2, axis=axis)
    check_op("split", [x], indices_or_sections=(1, 3), axis=axis)


def test_concat_single_and_empty_piece():
    check_op("concatenate", [[rand((3,), "float32")]], axis=0)
    check_op("concatenate", [[rand((2, 0), "float32"), rand((2, 3), "float32")]], axis=1)


@pytest.mark.parametrize("begin,end,strides,axes", [
    ((1, 0), (3, 4), (1, 2), None), ((-1, 0), (0, 5), (-1, 1), None),
    ((0,), (100,), (3,), [2]), ((5, -3), (-6, 10), (-2, 1), [0, 2]), ((1,), (2,), (1,), None)])
def test_strided_slice(begin, end, strides, axes):
    x = rand((6, 5, 7), "float32")
    check_op("strided_slice", [x], begin=list(begin), end=list(end), strides=list(strides),
             slice_mode="end", axes=axes)


def test_strided_slice_size_mode():
    x = rand((6, 5), "int32")
    check_op("strided_slice", [x], begin=[1, 2], end=[3, -1], strides=[1], slice_mode="size",
             axes=None)


def test_tile_repeat_broadcast():
    x = rand((2, 1, 3), "float32")
    check_op("tile", [x], reps=(2, 1, 2))
    check_op("tile", [x], reps=(3, 1, 1, 2))
    check_op("tile", [x], reps=(2,))
    check_op("repeat", [x], repeats=3, axis=-1)
    check_op("repeat", [x], repeats=2, axis=0)
    check_op("broadcast_to", [x], shape=(4, 2, 5, 3), dtype="")
    check_op("broadcast_to_like", [x, np.zeros((2, 4, 3), "int8")])


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad(mode):
    x = rand((3, 4, 5), "float32")
    check_op("nn.pad", [x, np.array(-2.5, "float32")], pad_width=((1, 2), (0, 0), (3, 1)),
             pad_mode=mode)
    xi = rand((4, 3), "int32")
    check_op("nn.pad", [xi, np.array(7, "int32")], pad_width=((2, 1), (1, 2)), pad_mode=mode)


@pytest.mark.parametrize("src,dst,shape", [("NCHW", "NHWC", (2, 3, 4, 5)),
                                           ("NHWC", "NCHW", (2, 4, 5, 3)),
                                           ("NCHW", "NCHW4c", (1, 8, 3, 2)),
                                           ("NCHW4c", "NCHW", (1, 2, 3, 2, 4)),
                                           ("NCHW4c", "NHWC2c", (1, 2, 3, 2, 4))])
def test_layout_transform(src, dst, shape):
    check_op("layout_transform", [rand(shape, "float32")], src_layout=src, dst_layout=dst)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space(mode):
    x = rand((2, 8, 3, 2), "float32")
    check_op("nn.depth_to_space", [x], block_size=2, layout="NCHW", mode=mode)
    check_op("nn.space_to_depth", [rand((2, 3, 4, 6), "float32")], block_size=2,
             layout="NCHW", mode="DCR")


@pytest.mark.parametrize("mode", ["clip", "wrap", "fast"])
@pytest.mark.parametrize("idx_dtype", ["int32", "int64", "uint8"])
def test_take(mode, idx_dtype):
    x = rand((4, 5, 3), "float32")
    lo = 0 if idx_dtype == "uint8" or mode == "fast" else -9
    hi = 3 if mode == "fast" else 11
    ind = np.random.default_rng(1).integers(lo, hi, size=(2, 3)).astype(idx_dtype)
    check_op("take", [x, ind], batch_dims=0, axis=1, mode=mode)
    check_op("take", [x, ind], batch_dims=0, axis=None, mode=mode)
    check_op("take", [x, ind.reshape(-1)], batch_dims=0, axis=-1, mode=mode)
    bind = np.random.default_rng(2).integers(lo, hi, size=(4, 2)).astype(idx_dtype)
    check_op("take", [x, bind], batch_dims=1, axis=1, mode=mode)


def test_take_negative_fast():
    x = rand((6,), "int32")
    check_op("take", [x, np.array([-1, -6, 0, 5], "int32")], batch_dims=0, axis=0, mode="fast")


def test_gather_and_gather_nd():
    x = rand((3, 4, 5), "float32")
    ind = np.random.default_rng(3).integers(-4, 4, size=(2, 4, 3)).astype("int32")
    check_op("gather", [x, ind], axis=1)
    check_op("gather", [x, ind % 3], axis=0)
    nd = np.random.default_rng(4).integers(0, 3, size=(2, 6)).astype("int64")
    check_op("gather_nd", [x, nd], batch_dims=0, index_rank=None)
    check_op("gather_nd", [x, nd[:1].reshape(1, 2, 3)], batch_dims=0, index_rank=None)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    ind = np.array([[0, 3, -1], [2, 5, 1]], "int32")
    check_op("one_hot", [ind, np.array(2.5, "float32"), np.array(-1, "float32")], depth=4,
             axis=axis, dtype="float32")
    check_op("one_hot", [ind, np.array(1, "int32"), np.array(0, "int32")], depth=3,
             axis=axis, dtype="int64")


@pytest.mark.parametrize("exclusive", [False, True])
def test_scans(exclusive):
    x = rand((3, 5), "float32", lo=0.5, hi=1.5)
    for op in ("cumsum", "cumprod"):
        check_op(op, [x], axis=1, dtype="", exclusive=exclusive)
        check_op(op, [x], axis=None, dtype="", exclusive=exclusive)
        check_op(op, [rand((4, 3), "int32")], axis=0, dtype="int64", exclusive=exclusive)


@pytest.mark.parametrize("upper", [True, False])
def test_trilu(upper):
    x = rand((2, 4, 5), "float32")
    for k in (-1, 0, 2):
        check_op("trilu", [x, np.array(k, "int32")], upper=upper)


@pytest.mark.parametrize("ascend", [True, False])
def test_sorts(ascend):
    x = np.array([[3.0, np.nan, 1.0, 3.0, -0.5, 1.0], [0, 0, 0, 1, 1, 0]], "float32")
    check_op("argsort", [x], axis=-1, is_ascend=ascend, dtype="int32")
    check_op("sort", [x], axis=-1, is_ascend=ascend, dtype="int32")
    check_op("argsort", [x], axis=0, is_ascend=ascend, dtype="int64")
    xi = rand((3, 7), "int32", seed=9, lo=-0.5, hi=0.5)
    check_op("sort", [xi], axis=1, is_ascend=ascend, dtype="int32")
    for ret in ("both", "values", "indices"):
        check_op("topk", [xi], k=3, axis=-1, ret_type=ret, is_ascend=ascend, dtype="int32")
    check_op("topk", [x], k=0, axis=1, ret_type="both", is_ascend=ascend, dtype="int64")


def test_init_ops():
    from tests.codegen_ops.lowering_harness import run_op
    for start, stop, step, dtype in ((0, 5, 1, "float32"), (2.5, -1.0, -0.75, "float32"),
                                     (1, 10, 3, "int32")):
        check_op("arange", [np.array(start, "float32"), np.array(stop, "float32"),
                            np.array(step, "float32")], start=start, stop=stop, step=step,
                 dtype=dtype)
    check_op("full", [np.array(3.5, "float32")], shape=(2, 3), dtype="int32")
    check_op("full", [np.array(3.5, "float32")], shape=(4,), dtype="")
    check_op("zeros", [], shape=(2, 2), dtype="float32")
    check_op("ones", [], shape=(3,), dtype="int8")
    x = rand((2, 3, 4), "float32")
    check_op("shape_of", [x], dtype="int32")
    check_op("shape_of", [x], dtype="int64")
    check_op("ndarray_size", [x], dtype="int64")
    got, _ = run_op("shape_of", [np.zeros((), "float32")], dtype="int32")
    assert got[0].shape == (0,)


@pytest.mark.parametrize("mode", ["update", "add", "mul", "min", "max"])
def test_scatter(mode):
    data = rand((4, 5), "float32", seed=30)
    ind = np.array([[1, -1, 3], [1, 0, 1], [3, 3, 0]], "int32")  # duplicates in column 0/1
    upd = rand(ind.shape, "float32", seed=31)
    check_op("scatter_elements", [data, ind, upd], axis=0, reduction=mode)
    check_op("scatter_elements", [data, ind % 5, upd], axis=1, reduction=mode)
    di = rand((3, 4), "int32", seed=32)
    nd = np.array([[0, 2, 0, -1], [1, 1, 1, 3]], "int64")  # (0,1) is hit twice
    check_op("scatter_nd", [di, nd, rand((4,), "int32", seed=33)], mode=mode)
    check_op("scatter_nd", [di, nd[:1], rand((4, 4), "int32", seed=34)], mode=mode)
