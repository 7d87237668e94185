from __future__ import annotations

import struct

import numpy as np
import pytest

from runtime import NDArray, load_param_dict, nd, save_param_dict
from runtime.params import NDARRAY_LIST_MAGIC, NDARRAY_MAGIC

DTYPES = ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4)])
def test_roundtrip(dtype, shape):
    rng = np.random.default_rng(0)
    value = (rng.standard_normal(shape) * 10).astype(dtype)
    loaded = load_param_dict(save_param_dict({"w": value, "b": nd.array(value)}))
    assert list(loaded) == ["w", "b"]
    for arr in loaded.values():
        assert isinstance(arr, NDArray)
        assert arr.dtype == dtype and arr.shape == shape
        np.testing.assert_array_equal(arr.numpy(), value)


def _expected_layout(name: str, value: np.ndarray, code: int, bits: int) -> bytes:
    raw = name.encode()
    out = struct.pack("<QQQ", NDARRAY_LIST_MAGIC, 0, 1) + struct.pack("<Q", len(raw)) + raw
    out += struct.pack("<Q", 1)
    out += struct.pack("<QQiii", NDARRAY_MAGIC, 0, 1, 0, value.ndim)
    out += struct.pack("<BBH", code, bits, 1) + struct.pack(f"<{value.ndim}q", *value.shape)
    return out + struct.pack("<q", value.nbytes) + value.tobytes()


@pytest.mark.parametrize(
    "dtype, code, bits",
    [("float32", 2, 32), ("int64", 0, 64), ("uint8", 1, 8), ("bool", 1, 1), ("int8", 0, 8)],
)
def test_exact_tvm_layout(dtype, code, bits):
    value = np.arange(6).reshape(2, 3).astype(dtype)
    assert save_param_dict({"p0": value}) == _expected_layout("p0", value, code, bits)


def test_empty_dict():
    assert load_param_dict(save_param_dict({})) == {}


GOOD = save_param_dict({"p0": np.arange(4, dtype=np.float32)})


def _patched(offset: int, fmt: str, value: int) -> bytes:
    blob = bytearray(GOOD)
    struct.pack_into(fmt, blob, offset, value)
    return bytes(blob)


# offsets in GOOD: list header 24, name len 8 + "p0" 2 = 34, array count 8 = 42, array header
# starts at 42: magic 42, reserved 50, device 58/62, ndim 66, dtype 70..73, shape 74, size 82
@pytest.mark.parametrize(
    "blob, message",
    [
        (_patched(0, "<Q", 123), "not a params blob: magic"),
        (_patched(42, "<Q", 99), "array 'p0' magic"),
        (_patched(34, "<Q", 2), "2 arrays"),
        (_patched(16, "<Q", 1 << 40), "does not fit"),
        (_patched(24, "<Q", 1 << 40), "truncated or corrupted"),
        (_patched(66, "<i", 1000), "ndim 1000"),
        (_patched(70, "<B", 9), "unsupported DLDataType"),
        (_patched(74, "<q", 5), "needs 20 bytes, header says 16"),
        (_patched(82, "<q", 1 << 40), "header says"),
        (_patched(58, "<i", 2), "device_type 2"),
        (GOOD[:-1], "truncated"),
        (GOOD[:10], "truncated"),
        (GOOD + b"\0", "trailing bytes"),
        (b"", "truncated"),
    ],
)
def test_corrupted_blobs_raise_value_error(blob, message):
    with pytest.raises(ValueError, match=message):
        load_param_dict(blob)


def test_non_bytes_and_bad_names():
    with pytest.raises(TypeError, match="expects bytes"):
        load_param_dict("abc")
    with pytest.raises(TypeError, match="param names must be str"):
        save_param_dict({1: np.zeros(1)})
    with pytest.raises(TypeError, match="unsupported dtype"):
        save_param_dict({"c": np.zeros(1, np.complex64)})
