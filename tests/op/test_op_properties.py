"""Property tests: type relations agree with the shapes the numpy references produce."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.op._opcheck import check
from compiler.errors import TypeInferenceError
from compiler.ir.expr import var
from compiler.op import nn, tensor, transform
from compiler.op.registry import OpPattern, get_def, list_ops

dims = st.integers(1, 4)
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)


def x(shape, name="x", dtype="float32"):
    return var(name, shape=shape, dtype=dtype)


def zeros(shape, dtype="float32"):
    return np.zeros(shape, dtype)


@settings(max_examples=60, deadline=None)
@given(shapes, shapes, st.sampled_from(["add", "maximum", "less", "floor_mod"]))
def test_broadcast_rel_matches_numpy(a, b, name):
    call = getattr(tensor, name)(x(a), x(b, "y"))
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(TypeInferenceError, match=name):
            check(call, zeros(a), zeros(b))
        return
    out = check(call, np.ones(a, "f4"), np.ones(b, "f4"))
    assert out.shape == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(dims, min_size=1, max_size=4).map(tuple), st.data())
def test_reshape_and_transpose(shape, data):
    d = np.arange(int(np.prod(shape)), dtype="f4").reshape(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    np.testing.assert_array_equal(check(transform.transpose(x(shape), perm), d),
                                  d.transpose(perm))
    # a random target: keep some dims (0), infer one (-1), or flatten
    target = [data.draw(st.sampled_from([0, "keep"])) for _ in shape]
    newshape = [0 if t == 0 else s for t, s in zip(target, shape)]
    newshape[data.draw(st.integers(0, len(shape) - 1))] = -1
    np.testing.assert_array_equal(check(transform.reshape(x(shape), newshape), d),
                                  d.reshape([s if v == 0 else v for v, s in zip(newshape,
                                                                                shape)]))


@settings(max_examples=50, deadline=None)
@given(st.lists(dims, min_size=1, max_size=3).map(tuple), st.integers(1, 3), st.data())
def test_concatenate(shape, count, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for i in range(count):
        s = list(shape)
        s[axis] = data.draw(dims)
        parts.append(np.full(s, i, "f4"))
    call = transform.concatenate([x(p.shape, f"x{i}") for i, p in enumerate(parts)], axis)
    np.testing.assert_array_equal(check(call, tuple(parts)), np.concatenate(parts, axis))




@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple), st.data())
def test_strided_slice_matches_python_slicing(shape, data):
    n = data.draw(st.integers(1, len(shape)))
    begin = [data.draw(st.integers(-7, 7)) for _ in range(n)]
    end = [data.draw(st.integers(-7, 7)) for _ in range(n)]
    strides = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in range(n)]
    d = np.arange(int(np.prod(shape)), dtype="f4").reshape(shape)
    out = check(transform.strided_slice(x(shape), begin, end, strides), d)
    np.testing.assert_array_equal(out, d[tuple(slice(b, e, s) for b, e, s in
                                               zip(begin, end, strides))])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 7), st.integers(1, 7),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2),
       st.lists(st.integers(0, 2), min_size=4, max_size=4), st.sampled_from([1, 2]))
def test_conv2d_rel_matches_reference(n, cg, h, w, kh, kw, stride, dil, pad, groups):
    c, o = cg * groups, 2 * groups
    call = nn.conv2d(x((n, c, h, w)), x((o, cg, kh, kw), "w"), strides=stride, padding=pad,
                     dilation=dil, groups=groups)
    oh = (h + pad[0] + pad[2] - dil * (kh - 1) - 1) // stride + 1
    ow = (w + pad[1] + pad[3] - dil * (kw - 1) - 1) // stride + 1
    if oh <= 0 or ow <= 0:
        with pytest.raises(TypeInferenceError, match="nn.conv2d"):
            check(call, zeros((n, c, h, w)), zeros((o, cg, kh, kw)))
        return
    out = check(call, np.ones((n, c, h, w), "f4"), np.ones((o, cg, kh, kw), "f4"))
    assert out.shape == (n, o, oh, ow)
    if pad == [0, 0, 0, 0]:  # no padding: every tap sees a one
        assert np.all(out == cg * kh * kw)


def test_every_op_is_complete():
    for name in list_ops():
        opdef = get_def(name)
        assert isinstance(opdef.pattern, OpPattern), name
        assert callable(opdef.type_rel) and callable(opdef.reference), name
        assert opdef.op is not None and opdef.op.name == name
        if opdef.attrs:
            assert opdef.attrs_type_key.startswith("relay.attrs."), name
