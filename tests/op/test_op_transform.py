"""Transform ops: reshape special values, slicing, concatenation, indexing, layouts, init ops."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op._opcheck import check, infer, reference
from compiler.errors import CompilerError, TypeInferenceError
from compiler.ir.expr import Tuple, TupleWrapper, const, var
from compiler.ir.types import TensorType, TupleType
from compiler.op import transform as T
from compiler.op.registry import OpPattern, get_def

RNG = np.random.default_rng(3)


def x(shape, dtype="float32", name="x"):
    return var(name, shape=shape, dtype=dtype)


@pytest.mark.parametrize("shape,newshape,expected", [
    ((2, 3, 4), (6, 4), (6, 4)),
    ((2, 3, 4), (0, -1), (2, 12)),
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (4, 0, 2), (4, 3, 2)),
    ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (2, -2), (2, 3, 4)),
    ((2, 3, 4), (-3, 4), (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, 4), (2, 1, 3, 4)),
    ((2, 3, 4), (-3, -2), (6, 4)),
    ((2, 3, 4, 5), (-3, -3), (6, 20)),
])
def test_reshape_special_values(shape, newshape, expected):
    call = T.reshape(x(shape), newshape)
    assert call.attrs.newshape == newshape and call.attrs.type_key == "relay.attrs.ReshapeAttrs"
    d = RNG.standard_normal(shape).astype("float32")
    np.testing.assert_array_equal(check(call, d), d.reshape(expected))


def test_reshape_errors():
    with pytest.raises(TypeInferenceError,
                       match=r"reshape: cannot infer the -1 in newshape \(5, -1\)"):
        infer(T.reshape(x((2, 3)), (5, -1)))
    with pytest.raises(TypeInferenceError, match=r"reshape: newshape \(4, 2\) gives .* 6"):
        infer(T.reshape(x((2, 3)), (4, 2)))
    with pytest.raises(TypeInferenceError, match="more than one -1"):
        infer(T.reshape(x((2, 3)), (-1, -1)))


def test_reshape_like_transpose():
    d = RNG.standard_normal((2, 3, 4)).astype("float32")
    out = check(T.reshape_like(x((2, 3, 4)), x((6, 4), name="y")), d, np.zeros((6, 4), "f4"))
    assert out.shape == (6, 4)
    out = check(T.reshape_like(x((2, 3, 4)), x((6, 9), name="y"), lhs_end=2, rhs_end=1), d,
                np.zeros((6, 9), "f4"))
    assert out.shape == (6, 4)
    np.testing.assert_array_equal(check(T.transpose(x(d.shape)), d), d.transpose())
    np.testing.assert_array_equal(check(T.transpose(x(d.shape), (1, -1, 0)), d),
                                  d.transpose(1, 2, 0))
    with pytest.raises(TypeInferenceError, match="transpose: axes .* is not a permutation"):
        infer(T.transpose(x(d.shape), (0, 0, 1)))


def test_concatenate_stack_split():
    a, b = RNG.standard_normal((2, 3)).astype("f4"), RNG.standard_normal((2, 5)).astype("f4")
    call = T.concatenate([x((2, 3)), x((2, 5), name="y")], axis=-1)
    assert isinstance(call.args[0], Tuple) and call.attrs.axis == -1
    assert infer(call) == TensorType((2, 8))
    np.testing.assert_array_equal(check(call, (a, b)), np.concatenate([a, b], -1))
    with pytest.raises(TypeInferenceError, match=r"concatenate: data\[1\] shape \(2, 5\) "
                                                 r"differs from data\[0\] \(2, 3\) on axis 1"):
        infer(T.concatenate([x((2, 3)), x((2, 5), name="y")], axis=0))
    with pytest.raises(TypeInferenceError, match=r"concatenate: data\[1\] has dtype int32"):
        infer(T.concatenate([x((2, 3)), x((2, 3), "int32", "y")], axis=0))
    with pytest.raises(CompilerError, match="at least one"):
        T.concatenate([], 0)
    st = T.stack([x((2, 3)), x((2, 3), name="y")], axis=1)
    np.testing.assert_array_equal(check(st, (a, a * 2)), np.stack([a, a * 2], 1))
    parts = T.split(x((6, 4)), 3, axis=0)
    assert isinstance(parts, TupleWrapper) and len(parts) == 3
    d = RNG.standard_normal((6, 4)).astype("f4")
    out = check(parts, d)
    for got, want in zip(out, np.split(d, 3)):
        np.testing.assert_array_equal(got, want)
    idx = T.split(x((6, 4)), (1, 4), axis=0)
    assert len(idx) == 3
    assert infer(idx.astuple()) == TupleType([TensorType((1, 4)), TensorType((3, 4)),
                                              TensorType((2, 4))])
    with pytest.raises(TypeInferenceError, match="split: indices_or_sections=4 must evenly"):
        infer(T.split(x((6, 4)), 4).astuple())


def test_squeeze_expand_dims_reverse():
    d = RNG.standard_normal((1, 3, 1)).astype("f4")
    assert check(T.squeeze(x(d.shape)), d).shape == (3,)
    assert check(T.squeeze(x(d.shape), axis=[-1]), d).shape == (1, 3)
    with pytest.raises(TypeInferenceError, match="squeeze: axis 1 of shape .* has size 3"):
        infer(T.squeeze(x(d.shape), axis=[1]))
    assert check(T.expand_dims(x(d.shape), 1, 2), d).shape == (1, 1, 1, 3, 1)
    assert check(T.expand_dims(x(d.shape), -1), d).shape == (1, 3, 1, 1)
    with pytest.raises(TypeInferenceError, match="expand_dims: axis=5 is out of range"):
        infer(T.expand_dims(x(d.shape), 5))
    np.testing.assert_array_equal(check(T.reverse(x(d.shape), 1), d), d[:, ::-1])


@pytest.mark.parametrize("begin,end,strides,axes", [
    ((0, 1), (2, 3), None, None),
    ((-1,), (-4,), (-1,), None),
    ((1, 0), (100, -1), (2, 1), None),
    ((-100,), (100,), None, None),
    ((1,), (3,), None, (2,)),
    ((3, 0), (0, 5), (-1, 2), None),
])
def test_strided_slice_is_numpy_slicing(begin, end, strides, axes):
    d = RNG.standard_normal((4, 5, 6)).astype("f4")
    call = T.strided_slice(x(d.shape), begin, end, strides, axes)
    index = [slice(None)] * 3
    for i, ax in enumerate(axes or range(len(begin))):
        index[ax] = slice(begin[i], end[i], strides[i] if strides else 1)
    np.testing.assert_array_equal(check(call, d), d[tuple(index)])


def test_strided_slice_size_mode_and_errors():
    d = RNG.standard_normal((4, 5)).astype("f4")
    call = T.strided_slice(x(d.shape), (1, 2), (2, -1), slice_mode="size")
    np.testing.assert_array_equal(check(call, d), d[1:3, 2:])
    # a begin below -dim clamps to 0 before the size is added (as TVM canonicalizes begin)
    call = T.strided_slice(x(d.shape), (-7, -9), (2, 2), slice_mode="size")
    np.testing.assert_array_equal(check(call, d), d[0:2, 0:2])
    with pytest.raises(TypeInferenceError, match="strided_slice: stride on axis 0"):
        infer(T.strided_slice(x(d.shape), (0,), (1,), (0,)))


def test_tile_repeat_broadcast_to():
    d = RNG.standard_normal((2, 3)).astype("f4")
    np.testing.assert_array_equal(check(T.tile(x(d.shape), (2, 1, 2)), d), np.tile(d, (2, 1, 2)))
    np.testing.assert_array_equal(check(T.repeat(x(d.shape), 2, 1), d), np.repeat(d, 2, 1))
    np.testing.assert_array_equal(check(T.broadcast_to(x((3,)), (2, 3)), d[0]),
                                  np.broadcast_to(d[0], (2, 3)))
    with pytest.raises(TypeInferenceError, match="broadcast_to"):
        infer(T.broadcast_to(x((2, 3)), (3,)))
    assert get_def("broadcast_to").pattern == OpPattern.BROADCAST


def test_take_modes():
    d = np.arange(12, dtype="float32").reshape(3, 4)
    idx = np.array([[0, 5], [-1, 2]], "int32")
    out = check(T.take(x(d.shape), x((2, 2), "int32", "i"), axis=1), d, idx)
    np.testing.assert_array_equal(out, np.take(d, np.clip(idx, 0, 3), axis=1))
    out = check(T.take(x(d.shape), x((2, 2), "int32", "i"), axis=1, mode="wrap"), d, idx)
    np.testing.assert_array_equal(out, np.take(d, idx % 4, axis=1))
    out = check(T.take(x(d.shape), x((2, 2), "int32", "i")), d, idx)
    np.testing.assert_array_equal(out, d.reshape(-1)[np.clip(idx, 0, 11)])
    out = check(T.take(x(d.shape), x((3, 2), "int32", "i"), axis=1, batch_dims=1), d,
                np.array([[0, 1], [2, 3], [3, 0]], "int32"))
    np.testing.assert_array_equal(out, [[0, 1], [6, 7], [11, 8]])
    with pytest.raises(TypeInferenceError, match="take: indices must have an integer dtype"):
        infer(T.take(x(d.shape), x((2,), name="i")))


def test_gather_gather_nd_one_hot():
    d = np.arange(6, dtype="float32").reshape(2, 3)
    idx = np.array([[2, 0], [1, 1]], "int64")
    call = T.gather(x(d.shape), 1, x((2, 2), "int64", "i"))
    assert call.attrs.axis == 1 and call.args[1].name_hint == "i"
    np.testing.assert_array_equal(check(call, d, idx), [[2, 0], [4, 4]])
    nd_idx = np.array([[1, 0], [2, 0]], "int32")
    out = check(T.gather_nd(x(d.shape), x((2, 2), "int32", "i")), d, nd_idx)
    np.testing.assert_array_equal(out, [d[1, 2], d[0, 0]])
    oh = T.one_hot(x((3,), "int32"), const(5.0), const(-1.0), depth=4, axis=-1, dtype="float32")
    out = check(oh, np.array([0, 3, 7], "int32"), np.array(5.0, "f4"), np.array(-1.0, "f4"))
    np.testing.assert_array_equal(out, [[5, -1, -1, -1], [-1, -1, -1, 5], [-1, -1, -1, -1]])


def test_cumsum_trilu_sorts():
    d = np.array([[3, 1, 2], [0, 5, 4]], "int32")
    np.testing.assert_array_equal(check(T.cumsum(x(d.shape, "int32"), axis=1), d),
                                  np.cumsum(d, 1))
    np.testing.assert_array_equal(check(T.cumsum(x(d.shape, "int32")), d), np.cumsum(d))
    np.testing.assert_array_equal(check(T.cumsum(x(d.shape, "int32"), 1, exclusive=True), d),
                                  [[0, 3, 4], [0, 0, 5]])
    assert check(T.cumsum(x(d.shape, "int32"), 0, dtype="float32"), d).dtype == np.float32
    m = np.arange(9, dtype="f4").reshape(3, 3)
    call = T.trilu(x((3, 3)), 1)
    np.testing.assert_array_equal(check(call, m, np.array(1, "int32")), np.triu(m, 1))
    call = T.trilu(x((3, 3)), 0, upper=False)
    np.testing.assert_array_equal(check(call, m, np.array(0, "int32")), np.tril(m))
    f = np.array([3.0, 1.0, 3.0, 2.0], "f4")
    np.testing.assert_array_equal(check(T.argsort(x((4,))), f), [1, 3, 0, 2])
    np.testing.assert_array_equal(check(T.argsort(x((4,)), is_ascend=False), f), [0, 2, 3, 1])
    np.testing.assert_array_equal(check(T.sort(x((4,))), f), [1, 2, 3, 3])
    values, indices = check(T.topk(x((4,)), k=2), f)
    np.testing.assert_array_equal(values, [3, 3])
    np.testing.assert_array_equal(indices, [0, 2])


def test_init_ops():
    call = T.full(const(2.5), (2, 3))
    assert infer(call) == TensorType((2, 3), "float32")
    np.testing.assert_array_equal(check(call, np.array(2.5, "f4")), np.full((2, 3), 2.5))
    assert check(T.full(3, (2,), "int64"), np.array(3, "int64")).dtype == np.int64
    np.testing.assert_array_equal(check(T.zeros((2, 2), "int32")), np.zeros((2, 2)))
    np.testing.assert_array_equal(check(T.ones((3,), "float16")), np.ones(3))
    np.testing.assert_allclose(check(T.arange(const(1.0), const(2.0), const(0.25)),
                                     *[np.array(v, "f4") for v in (1, 2, .25)]),
                               [1, 1.25, 1.5, 1.75])
    out = check(T.arange(5, dtype="int32"), *[np.array(v, "int32") for v in (0, 5, 1)])
    np.testing.assert_array_equal(out, np.arange(5))
    dynamic = T.arange(x(()))  # a computed stop: the length is known at run time (TVM's)
    assert dynamic.attrs.stop is None and str(infer(dynamic)) == "Tensor[(?), float32]"
    np.testing.assert_array_equal(
        reference(dynamic, *[np.array(v, "f4") for v in (0, 3.5, 1)]), [0, 1, 2, 3])
    sh = T.shape_of(x((2, 3, 4)))
    np.testing.assert_array_equal(check(sh, np.zeros((2, 3, 4), "f4")), [2, 3, 4])
    assert check(T.ndarray_size(x((2, 3)), "int64"), np.zeros((2, 3), "f4")) == 6


@pytest.mark.parametrize("src,dst,shape", [("NCHW", "NHWC", (2, 8, 3, 4)),
                                           ("NHWC", "NCHW", (2, 3, 4, 8)),
                                           ("NCHW", "NCHW4c", (2, 8, 3, 4)),
                                           ("NCHW4c", "NCHW", (2, 2, 3, 4, 4)),
                                           ("NCHW4c", "NCHW2c", (2, 2, 3, 4, 4))])
def test_layout_transform(src, dst, shape):
    d = RNG.standard_normal(shape).astype("f4")
    out = check(T.layout_transform(x(shape), src, dst), d)
    if (src, dst) == ("NCHW", "NHWC"):
        np.testing.assert_array_equal(out, d.transpose(0, 2, 3, 1))
    if (src, dst) == ("NCHW", "NCHW4c"):
        np.testing.assert_array_equal(out, d.reshape(2, 2, 4, 3, 4).transpose(0, 1, 3, 4, 2))
    back = check(T.layout_transform(x(out.shape), dst, src), out)
    np.testing.assert_array_equal(back, d)


def test_layout_transform_errors():
    with pytest.raises(TypeInferenceError, match="layout_transform: axis C of size 6 cannot be "
                                                 "split by 4"):
        infer(T.layout_transform(x((1, 6, 2, 2)), "NCHW", "NCHW4c"))
    with pytest.raises(TypeInferenceError, match="different axes"):
        infer(T.layout_transform(x((1, 6, 2, 2)), "NCHW", "NCDW"))
