from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import runtime
from runtime import GraphExecutorFactoryModule, graph_executor, load_module, nd

from tests.runtime import _runtime_kernels as K

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
P0 = np.linspace(-1, 1, 8).astype(np.float32)


@pytest.fixture(scope="module")
def factory():
    return GraphExecutorFactoryModule(K.chain_graph(), K.library(8, signed=True),
                                      {"p0": nd.array(P0)})


def test_factory_api(factory):
    assert json.loads(factory.get_graph_json())["arg_nodes"] == [0, 1]
    assert isinstance(factory.get_lib(), runtime.KernelLibrary)
    np.testing.assert_array_equal(factory.get_params()["p0"].numpy(), P0)
    m = graph_executor.GraphModule(factory["default"](runtime.cpu(0)))
    x = np.arange(8, dtype=np.float32) - 3
    m.run(x=x)  # p0 is loaded by the factory
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, P0), rtol=1e-6)
    assert m.get_input_info() == ({"x": (8,)}, {"x": "float32"})
    graph, lib, params = factory
    assert graph == factory.get_graph_json() and lib is factory.get_lib()
    assert list(params) == ["p0"]
    with pytest.raises(KeyError, match="not 'other'"):
        factory["other"]


def test_factory_modules_have_separate_storage(factory):
    a = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    b = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    a.run(x=np.ones(8, np.float32))
    b.run(x=np.zeros(8, np.float32))
    assert not np.array_equal(a.get_output(0).numpy(), b.get_output(0).numpy())


def test_factory_rejects_bad_graph():
    with pytest.raises(ValueError, match="graph JSON"):
        GraphExecutorFactoryModule("[]", K.library(8), {})
    with pytest.raises(TypeError, match="lib must be a KernelLibrary"):
        GraphExecutorFactoryModule(K.chain_graph(), None, {})


def test_export_and_load_in_process(factory, tmp_path):
    path = tmp_path / "model.relayjit"
    factory.export_library(str(path))
    loaded = load_module(str(path))
    assert loaded.get_graph_json() == factory.get_graph_json()
    assert loaded.get_lib().object_code == factory.get_lib().object_code
    m = graph_executor.GraphModule(loaded["default"](runtime.cpu()))
    x = np.arange(8, dtype=np.float32) - 3
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, P0), rtol=1e-6)


def test_load_in_fresh_process(factory, tmp_path):
    path = tmp_path / "model.relayjit"
    factory.export_library(str(path))
    code = (
        "import sys, numpy as np\n"
        "import runtime\n"
        "from runtime import graph_executor\n"
        f"lib = runtime.load_module({str(path)!r})\n"
        "m = graph_executor.GraphModule(lib['default'](runtime.cpu(0)))\n"
        "m.run(x=np.arange(8, dtype=np.float32) - 3)\n"
        "print(' '.join(repr(float(v)) for v in m.get_output(0).numpy()))\n"
        "assert 'compiler' not in sys.modules and 'codegen' not in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    got = np.array([float(v) for v in proc.stdout.split()], np.float32)
    expected = K.chain_reference(np.arange(8, dtype=np.float32) - 3, P0)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def _corrupt(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: b"NOTAJIT!" + d[8:], "bad magic"),
        (lambda d: d[:8] + (99).to_bytes(4, "little") + d[12:], "format version 99"),
        (lambda d: d[: len(d) // 2], "truncated"),
        (lambda d: d[:10], "truncated"),
        (lambda d: b"", "bad magic"),
        (lambda d: _corrupt(d, len(d) - 100), "checksum mismatch"),
        (lambda d: _corrupt(d, len(d) - 1), "checksum mismatch"),
        (lambda d: d + b"x", "checksum mismatch|unexpected bytes"),
    ],
)
def test_load_rejects_damaged_files(factory, tmp_path, damage, message):
    path = tmp_path / "model.relayjit"
    factory.export_library(str(path))
    bad = tmp_path / "bad.relayjit"
    bad.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=message) as info:
        load_module(str(bad))
    assert str(bad) in str(info.value)


def test_load_rejects_missing_cpu_features(factory, tmp_path, monkeypatch):
    import runtime.export as export

    path = tmp_path / "model.relayjit"
    factory.export_library(str(path))
    monkeypatch.setattr(export, "missing_features", lambda feats: ["avx9000"])
    with pytest.raises(ValueError, match="features this machine's CPU .* lacks: avx9000; rebuild"):
        load_module(str(path))


def test_load_missing_file(tmp_path):
    path = tmp_path / "absent.relayjit"
    with pytest.raises(FileNotFoundError, match="no such file; expected a relayjit module") \
            as info:
        load_module(path)
    assert str(path) in str(info.value)


def test_load_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="is a directory, not a module; expected a relayjit "
                                         "module file written by export_library") as info:
        load_module(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_export_into_missing_directory_names_the_target(factory, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "model.relayjit"
    with pytest.raises(FileNotFoundError) as info:
        factory.export_library(str(target))
    message = str(info.value)
    assert repr(str(target)) in message and "does not exist" in message
    assert ".tmp" not in message


def test_export_onto_a_directory_names_the_target(factory, tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory") as info:
        factory.export_library(str(tmp_path))
    assert repr(str(tmp_path)) in str(info.value) and ".tmp" not in str(info.value)
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_export_and_factory_do_not_import_each_other():
    """runtime.factory imports runtime.export; the format module never imports the factory."""
    import ast
    import runtime.export as export

    tree = ast.parse(open(export.__file__).read())
    runtime_imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)
                       and node.module == "factory"]
    assert runtime_imports == []
