from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime import nd


def test_device_forms():
    assert repr(runtime.cpu()) == "cpu(0)"
    assert runtime.device("cpu", 0) == runtime.cpu(0)
    assert runtime.device("llvm") == runtime.Device(1, 0)
    assert repr(runtime.cpu(1)) == "cpu(1)"
    assert runtime.cpu(0) != runtime.cpu(1)
    assert hash(runtime.cpu(0)) == hash(runtime.Device())


@pytest.mark.parametrize("bad", ["cuda", "", "gpu"])
def test_unknown_device_name(bad):
    with pytest.raises(ValueError, match="unknown device"):
        runtime.device(bad)


def test_unknown_device_type():
    with pytest.raises(ValueError, match="device_type 2"):
        runtime.Device(2, 0)


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "bool"]
)
def test_array_roundtrip_is_aligned_copy(dtype):
    src = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    a = nd.array(src)
    assert a.shape == (2, 3, 4)
    assert a.dtype == dtype
    assert a.device == runtime.cpu(0)
    assert a.data_ptr % 64 == 0
    np.testing.assert_array_equal(a.numpy(), src)
    src[0, 0, 0] = 1
    out = a.numpy()
    out[...] = 0
    assert a.numpy().sum() == (np.arange(24) % 3).astype(dtype).sum()


def test_array_from_list_dtype_and_asnumpy():
    a = nd.array([[1, 2], [3, 4]], dtype="float32")
    assert a.dtype == "float32"
    np.testing.assert_array_equal(a.asnumpy(), [[1, 2], [3, 4]])
    assert nd.array(3.5).shape == ()


def test_array_from_non_contiguous_and_big_endian():
    base = np.arange(16, dtype=np.float32).reshape(4, 4)
    a = nd.array(base[:, ::2])
    np.testing.assert_array_equal(a.numpy(), base[:, ::2])
    b = nd.array(np.arange(4, dtype=">i4"))
    assert b.dtype == "int32" and b.numpy().dtype.isnative
    np.testing.assert_array_equal(b.numpy(), [0, 1, 2, 3])


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="unsupported dtype 'complex64'"):
        nd.array(np.zeros(2, np.complex64))
    with pytest.raises(TypeError, match="unsupported dtype"):
        nd.empty((2,), "str")


def test_empty():
    e = nd.empty((3, 5), "int64")
    assert e.shape == (3, 5) and e.dtype == "int64" and e.data_ptr % 64 == 0
    assert nd.empty(4).shape == (4,) and nd.empty(4).dtype == "float32"
    with pytest.raises(ValueError, match="shape dimensions"):
        nd.empty((2, -1))


def test_copyfrom_and_copyto():
    a = nd.empty((2, 3))
    a.copyfrom(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(a.numpy(), np.ones((2, 3)))
    b = nd.empty((2, 3))
    assert a.copyto(b) is b
    np.testing.assert_array_equal(b.numpy(), 1)
    c = a.copyto(runtime.cpu(0))
    assert c.data_ptr != a.data_ptr
    np.testing.assert_array_equal(c.numpy(), 1)
    a.copyfrom(nd.array(np.full((2, 3), 2, np.float32)))
    np.testing.assert_array_equal(a.numpy(), 2)


def test_copyfrom_mismatch_messages():
    a = nd.empty((2, 3))
    with pytest.raises(ValueError, match=r"expected \(2, 3\) float32, got \(3, 2\) float32"):
        a.copyfrom(np.zeros((3, 2), np.float32))
    with pytest.raises(TypeError, match=r"expected \(2, 3\) float32, got \(2, 3\) float64"):
        a.copyfrom(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="copyto: expected NDArray or Device"):
        a.copyto("cpu")


def test_repr_and_array_protocol():
    a = nd.array(np.arange(3, dtype=np.int32))
    assert repr(a).startswith("<runtime.NDArray shape=(3,), cpu(0)>")
    np.testing.assert_array_equal(np.asarray(a), [0, 1, 2])


def test_ndarray_wraps_aligned_view_without_copy():
    base = nd.empty((4,))
    view = runtime.NDArray(base._view())
    assert view.data_ptr == base.data_ptr
    with pytest.raises(TypeError, match="wraps a numpy.ndarray"):
        runtime.NDArray([1, 2])
