"""runtime.params_file: aligned params mapped back without copies; damaged files refused."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from runtime.digest import content_digest
from runtime.memory import ALIGNMENT
from runtime.params_file import MAGIC, PAGE, ParamsFileWriter, map_params, seal, write_unsealed

_PREFIX = len(MAGIC) + 32 + 16


def _params() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"p0": rng.standard_normal((3, 5, 7)).astype("float32"),
            "p1": np.arange(13, dtype="int8"),
            "p2": rng.standard_normal(1000).astype("float16"),
            "empty": np.zeros((0, 4), "float32"),
            "p3": np.float32(2.5).reshape(()),
            "p4": rng.integers(-9, 9, (4, 64), dtype=np.int64)}


def _written(tmp_path, params=None) -> str:
    params = _params() if params is None else params
    path = str(tmp_path / "entry.params")
    seal(write_unsealed(str(tmp_path), params), path)
    return path


def test_round_trip_gives_aligned_writeable_views(tmp_path):
    params = _params()
    path = _written(tmp_path, params)
    assert [f for f in os.listdir(tmp_path)] == ["entry.params"]  # no temporary left
    loaded = map_params(path)
    assert list(loaded) == list(params)
    for name, value in params.items():
        got = loaded[name]
        assert got.dtype == value.dtype and got.shape == value.shape, name
        np.testing.assert_array_equal(got, value)
        assert got.ctypes.data % ALIGNMENT == 0 and got.flags.writeable and \
            got.flags.c_contiguous
    loaded["p0"][...] = 0  # a private mapping: the file keeps its values
    np.testing.assert_array_equal(map_params(path)["p0"], params["p0"])


def test_the_expected_digest_must_match(tmp_path):
    tmp = write_unsealed(str(tmp_path), _params())
    digest = seal(tmp, str(tmp_path / "a.params"))
    assert map_params(str(tmp_path / "a.params"), digest)
    with pytest.raises(ValueError, match="the params of another build"):
        map_params(str(tmp_path / "a.params"), "0" * 64)


def _flip(path: str, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x01]))


def _header_len(path: str) -> int:
    with open(path, "rb") as f:
        return struct.unpack_from("<QQ", f.read(_PREFIX), _PREFIX - 16)[1]


@pytest.mark.parametrize("where", ["data", "last data byte", "header", "digest"])
def test_one_flipped_bit_is_refused(tmp_path, where):
    path = _written(tmp_path)
    size = os.path.getsize(path)
    at = {"data": PAGE + 100, "last data byte": size - _header_len(path) - 1,
          "header": size - 5, "digest": len(MAGIC) + 5}[where]
    _flip(path, at)
    with pytest.raises(ValueError, match="entry.params: not a params file"):
        map_params(path)


@pytest.mark.parametrize("keep", [0, 10, _PREFIX + 5, PAGE, -1])
def test_a_truncated_file_is_refused(tmp_path, keep):
    path = _written(tmp_path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(keep if keep >= 0 else size - 1)
    with pytest.raises(ValueError, match="truncated"):
        map_params(path)


def test_a_padded_file_is_refused(tmp_path):
    path = _written(tmp_path)
    with open(path, "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match="truncated or padded"):
        map_params(path)


def _forged(tmp_path, arrays: list, data: bytes = bytes(256)) -> str:
    """A file with a valid digest over a hostile header (anyone can compute the digest)."""
    header = json.dumps({"arrays": arrays}).encode()
    digest = content_digest([data], header)
    prefix = MAGIC + bytes.fromhex(digest) + struct.pack("<QQ", len(data), len(header))
    path = tmp_path / "forged.params"
    path.write_bytes(prefix + bytes(PAGE - len(prefix)) + data + header)
    return str(path)


@pytest.mark.parametrize("arrays, message", [
    ([["w", "float32", [100], 0, 400]], "bytes 0..400 are not inside the 256-byte"),
    ([["w", "float32", [4], -64, 16]], "is not a 64-aligned place"),
    ([["w", "float32", [4], 8, 16]], "offset 8 is not a 64-aligned place"),
    ([["w", "float32", [4], 0, 8]], "needs 16 bytes, header says 8"),
    ([["w", "float32", [-4], 0, -16]], "is not a list of sizes"),
    ([["w", "object", [1], 0, 8]], "dtype"),
    ([["w", "float32", [1], 0, 4], ["w", "float32", [1], 64, 4]], "is not a new string"),
    ([["w", "float32", [1]]], "is not \\[name, dtype, shape, offset, nbytes\\]"),
])
def test_a_hostile_header_is_refused(tmp_path, arrays, message):
    path = _forged(tmp_path, arrays)
    with pytest.raises(ValueError, match=message):
        map_params(path)


def test_a_forged_but_consistent_file_loads(tmp_path):
    """The forging helper itself writes loadable files (the refusals above are the checks)."""
    data = np.arange(64, dtype=np.float32).tobytes()
    loaded = map_params(_forged(tmp_path, [["w", "float32", [8, 8], 0, 256]], data))
    np.testing.assert_array_equal(loaded["w"], np.arange(64, dtype=np.float32).reshape(8, 8))


def test_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.params"):
        map_params(str(tmp_path / "nothing.params"))


def test_arrays_are_named_after_they_are_written(tmp_path):
    """The writer takes arrays as they come and names them at the end; two names may share
    one array's bytes, and an unnamed array is simply not handed out."""
    params = _params()
    writer = ParamsFileWriter(str(tmp_path))
    offsets = {name: writer.add(value) for name, value in reversed(params.items())}
    table = {name: (params[name], offsets[name]) for name in ("p2", "p0")}
    table["alias"] = (params["p0"], offsets["p0"])
    path = str(tmp_path / "late.params")
    seal(writer.finish(table), path)
    loaded = map_params(path)
    assert list(loaded) == ["p2", "p0", "alias"]
    for name, (value, _) in table.items():
        np.testing.assert_array_equal(loaded[name], value)


def test_a_discarded_writer_leaves_nothing(tmp_path):
    writer = ParamsFileWriter(str(tmp_path))
    writer.add(np.ones(1000, "float32"))
    writer.discard()
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="C-contiguous"):
        ParamsFileWriter(str(tmp_path)).add(np.ones((4, 4), "float32")[:, ::2])
