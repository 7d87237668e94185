from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys

import llvmlite.binding as llvm
import numpy as np
import pytest

import runtime
from runtime import GraphExecutorFactoryModule, KernelLibrary, graph_executor, load_module, nd
from runtime import export
from runtime.library import signature_table_ir

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
    assert loaded.get_lib().objects == factory.get_lib().objects
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


def _file(sections: list[bytes], version: int) -> bytes:
    """A module file around these five sections (checksum recomputed)."""
    body = export.MAGIC + struct.pack("<I", version)
    body += b"".join(struct.pack("<Q", len(s)) + s for s in sections)
    return body + hashlib.sha256(body).digest()


def _sections_of(data: bytes) -> list[bytes]:
    pos, sections = 12, []
    for _ in range(5):
        (n,) = struct.unpack_from("<Q", data, pos)
        sections.append(data[pos + 8:pos + 8 + n])
        pos += 8 + n
    return sections


def _objects_section(objects: list[bytes], count: int | None = None) -> bytes:
    return struct.pack("<I", len(objects) if count is None else count) + b"".join(
        struct.pack("<Q", len(o)) + o for o in objects)


def _two_object_factory() -> GraphExecutorFactoryModule:
    """The chain graph's kernels in two objects, the signature table in the second."""
    names = list(K.kernels_ir())
    first, _ = K.object_code(8, names[:3])
    tm = runtime.host_target_machine()
    irs = K.kernels_ir(8)
    text = "\n\n".join(irs[k] for k in names[3:]) + "\n" + signature_table_ir(
        (((8,), "float32"),) * K._ARITY[k] for k in names)
    mod = llvm.parse_assembly(text)
    mod.triple = tm.triple
    rest = tm.emit_object(mod)
    return GraphExecutorFactoryModule(K.chain_graph(), KernelLibrary([first, rest], names),
                                      {"p0": nd.array(P0)})


def test_several_objects_export_and_load(tmp_path):
    factory = _two_object_factory()
    path = tmp_path / "two.relayjit"
    factory.export_library(str(path))
    loaded = load_module(str(path))
    assert loaded.get_lib().objects == factory.get_lib().objects
    assert len(loaded.get_lib().objects) == 2
    m = graph_executor.GraphModule(loaded["default"](runtime.cpu()))
    x = np.arange(8, dtype=np.float32) - 3
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, P0), rtol=1e-6)


def test_version_1_files_with_one_object_still_load(factory, tmp_path):
    path = tmp_path / "model.relayjit"
    factory.export_library(str(path))
    sections = _sections_of(path.read_bytes())
    (obj,) = factory.get_lib().objects
    sections[2] = obj  # version 1: the third section is the object file itself
    old = tmp_path / "old.relayjit"
    old.write_bytes(_file(sections, 1))
    loaded = load_module(str(old))
    assert loaded.get_lib().objects == (obj,)
    m = graph_executor.GraphModule(loaded["default"](runtime.cpu()))
    x = np.arange(8, dtype=np.float32) - 3
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), K.chain_reference(x, P0), rtol=1e-6)


@pytest.mark.parametrize("objects_section, message", [
    (lambda objs: b"", "its count needs 4"),
    (lambda objs: _objects_section([]), "holds no object file"),
    (lambda objs: _objects_section(objs, count=3), "object file 2 of 3 has no length"),
    (lambda objs: _objects_section(objs)[:-10], "object file 1 of 2 needs"),
    (lambda objs: _objects_section(objs) + b"xy", "2 unexpected bytes after object file 1"),
    (lambda objs: _objects_section(objs, count=1), "unexpected bytes after object file 0"),
    (lambda objs: _objects_section([objs[0], objs[0]]), "defined by object 0 and by object 1"),
    (lambda objs: _objects_section([objs[0]]), "does not define function"),
])
def test_load_rejects_a_bad_objects_section(tmp_path, objects_section, message):
    factory = _two_object_factory()
    path = tmp_path / "two.relayjit"
    factory.export_library(str(path))
    sections = _sections_of(path.read_bytes())
    sections[2] = objects_section(list(factory.get_lib().objects))
    bad = tmp_path / "bad.relayjit"
    bad.write_bytes(_file(sections, 2))
    with pytest.raises(ValueError, match=message) as info:
        load_module(str(bad))
    assert str(bad) in str(info.value)
