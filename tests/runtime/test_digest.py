"""runtime.digest: the parallel digest of many buffers depends on every byte and position,
with BLAKE3 pieces and with the SHA-256 pieces used where the blake3 package is missing."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from runtime import digest
from runtime.digest import content_digest


@pytest.fixture(params=["blake3", "sha256"])
def small_pieces(request, monkeypatch):
    """Pieces of 1 KB, so a few KB of data spread over many pieces and threads; each test
    runs with both piece hashes."""
    monkeypatch.setattr(digest, "CHUNK", 1024)
    if request.param == "sha256":
        monkeypatch.setattr(digest, "_blake3", None)
    elif digest._blake3 is None:
        pytest.skip("the blake3 package is not installed")
    assert digest.algorithm() == request.param
    return request.param


def _data(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_every_byte_changes_the_digest(small_pieces):
    data = _data(5000)
    base = content_digest([data])
    for at in (0, 1, 1023, 1024, 2500, 4095, 4999):  # piece edges, middles, the last byte
        changed = data.copy()
        changed[at] ^= 1
        assert content_digest([changed]) != base, at


def test_position_counts(small_pieces):
    data = _data(4096)
    swapped = np.concatenate([data[1024:2048], data[:1024], data[2048:]])  # two pieces swapped
    assert content_digest([swapped]) != content_digest([data])
    rotated = np.roll(data, 1)
    assert content_digest([rotated]) != content_digest([data])


def test_the_split_into_buffers_and_the_header_count(small_pieces):
    data = _data(3000)
    whole = content_digest([data])
    assert content_digest([data[:1000], data[1000:]]) != whole
    assert content_digest([data[:1000], data[1000:]]) != content_digest([data[:1001],
                                                                         data[1001:]])
    assert content_digest([data], b"a") != whole
    assert content_digest([data, b""]) != whole


def test_parallel_and_serial_agree(small_pieces, monkeypatch):
    buffers = [_data(n, seed=n) for n in (10, 5000, 1, 0, 2048, 700)]
    parallel = content_digest(buffers, b"head")
    monkeypatch.setattr(digest, "_threads", lambda: 1)
    assert content_digest(buffers, b"head") == parallel
    assert content_digest([bytes(b) for b in buffers], b"head") == parallel


def test_pieces_are_the_named_hash_of_their_bytes(small_pieces):
    """The result is a tree of cryptographic hashes, not a weaker checksum: one piece is the
    plain BLAKE3 or SHA-256 of its length-prefixed bytes."""
    data = _data(100)
    (piece,) = digest._pieces([memoryview(data)])
    message = len(data).to_bytes(8, "little") + data.tobytes()
    if small_pieces == "sha256":
        expected = hashlib.sha256(message).digest()
    else:
        expected = digest._blake3(message).digest()
    assert digest._piece_digest(piece) == expected


def test_the_two_piece_hashes_never_agree(monkeypatch):
    if digest._blake3 is None:
        pytest.skip("the blake3 package is not installed")
    data = _data(3000)
    with_blake3 = content_digest([data])
    monkeypatch.setattr(digest, "_blake3", None)
    assert content_digest([data]) != with_blake3


def test_arrays_of_any_shape_and_dtype_digest_their_bytes():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert content_digest([a]) == content_digest([a.tobytes()])
    assert content_digest([np.float32(1.5).reshape(())]) == \
        content_digest([np.float32(1.5).tobytes()])


def test_empty_arrays_digest_as_no_bytes():
    """A constant with a zero in its shape (a fuzzed model's empty Add operand crashed the
    build-cache key): no bytes, the same as any other empty buffer, and counted as a buffer."""
    empty = content_digest([np.zeros((0, 3), np.float32)])
    assert empty == content_digest([b""]) == content_digest([np.zeros((2, 0), np.int64)])
    assert empty != content_digest([]) and empty != content_digest([b"", b""])
