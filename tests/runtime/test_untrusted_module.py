"""A module file is untrusted: every field of its graph, edited (checksum recomputed so only the
content is wrong), is refused with a clear error or runs correctly; the process never crashes.

The mutated files load and run in one subprocess, so a crash would show as its exit status."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime import export, graph_executor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(5)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """conv -> relu -> reshape -> dense exported; its input and expected output."""
    x = relay.var("x", shape=(1, 4, 12, 12))
    w = relay.const(RNG.standard_normal((8, 4, 3, 3)).astype("f4"))
    d = relay.const(RNG.standard_normal((10, 8 * 12 * 12)).astype("f4"))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    out = relay.nn.dense(relay.reshape(y, (1, -1)), d)
    with PassContext(opt_level=3):
        lib = relay.build(IRModule.from_expr(relay.Function([x], out)), target="llvm")
    path = str(tmp_path_factory.mktemp("untrusted") / "model.rjit")
    lib.export_library(path)
    xa = RNG.standard_normal((1, 4, 12, 12)).astype("f4")
    m = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    m.run(x=xa)
    return path, xa, m.get_output(0).numpy()


def _sections(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        data = f.read()
    pos, sections = len(export.MAGIC) + 4, []
    for _ in range(5):
        (n,) = struct.unpack_from("<Q", data, pos)
        sections.append(data[pos + 8: pos + 8 + n])
        pos += 8 + n
    return sections


def _write(path: str, sections: list[bytes]) -> None:
    body = export.MAGIC + struct.pack("<I", export.VERSION)
    body += b"".join(struct.pack("<Q", len(s)) + s for s in sections)
    with open(path, "wb") as f:
        f.write(body + hashlib.sha256(body).digest())


def _graph_mutations(graph: dict):
    """(label, mutated graph) for every field a graph file has."""
    attrs = graph["attrs"]
    for i in range(len(attrs["shape"][1])):
        for new in ([d + 1 for d in attrs["shape"][1][i]], [d * 1000 for d in attrs["shape"][1][i]],
                    attrs["shape"][1][i][:-1], [0] * len(attrs["shape"][1][i])):
            g = copy.deepcopy(graph)
            g["attrs"]["shape"][1][i] = new
            yield f"shape[{i}]={new}", g
        for dtype in ("int8", "float64", "bool", "nonsense"):
            g = copy.deepcopy(graph)
            g["attrs"]["dltype"][1][i] = dtype
            yield f"dtype[{i}]={dtype}", g
        for sid in {0, 1, max(attrs["storage_id"][1]), 10**9, -1}:
            g = copy.deepcopy(graph)
            g["attrs"]["storage_id"][1][i] = sid
            yield f"storage_id[{i}]={sid}", g
    for n, node in enumerate(graph["nodes"]):
        for k in range(len(node["inputs"])):
            for entry in ([0, 0, 0], [len(graph["nodes"]) - 1, 0, 0], [10**6, 0, 0], [n, 5, 0]):
                g = copy.deepcopy(graph)
                g["nodes"][n]["inputs"][k] = entry
                yield f"node {n} input {k}={entry}", g
        g = copy.deepcopy(graph)
        g["nodes"][n]["inputs"] = []
        yield f"node {n} without inputs", g
        if node["op"] == "tvm_op":
            for func in ("no_such_kernel", "__nop", *[m["attrs"]["func_name"] for m in
                                                      graph["nodes"] if m["op"] == "tvm_op"]):
                g = copy.deepcopy(graph)
                g["nodes"][n]["attrs"]["func_name"] = func
                yield f"node {n} func_name={func}", g
            for key in ("num_inputs", "num_outputs"):
                g = copy.deepcopy(graph)
                g["nodes"][n]["attrs"][key] = "7"
                yield f"node {n} {key}=7", g
    for key, values in (("arg_nodes", [[], [1], [0, 0], [99]]),
                        ("heads", [[], [[0, 0, 0]], [[99, 0, 0]], [[1, 3, 0]]]),
                        ("node_row_ptr", [[0], list(range(len(graph["node_row_ptr"]) + 2))])):
        for v in values:
            g = copy.deepcopy(graph)
            g[key] = v
            yield f"{key}={v}", g


def test_every_graph_edit_is_refused_or_harmless(exported, tmp_path):
    path, xa, expected = exported
    sections = _sections(path)
    graph = json.loads(sections[0])
    labels = []
    for k, (label, g) in enumerate(_graph_mutations(graph)):
        mutated = list(sections)
        mutated[0] = json.dumps(g).encode()
        _write(str(tmp_path / f"m{k}.rjit"), mutated)
        labels.append(label)
    # a graph whose output is its input is another model, not a corrupt one
    outputs_input = {k for k, label in enumerate(labels) if label == "heads=[[0, 0, 0]]"}
    np.save(tmp_path / "x.npy", xa)
    np.save(tmp_path / "expected.npy", expected)
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import runtime
        from runtime import graph_executor
        d = {str(tmp_path)!r}
        x, expected = np.load(d + "/x.npy"), np.load(d + "/expected.npy")
        for k in range({len(labels)}):
            try:
                lib = runtime.load_module(f"{{d}}/m{{k}}.rjit")
                m = graph_executor.GraphModule(lib["default"](runtime.cpu()))
                m.set_input(0, x)
                m.run()
                out = m.get_output(0).numpy()
                ref = x if k in {sorted(outputs_input)!r} else expected
                same = out.shape == ref.shape and np.array_equal(out, ref)
                print(json.dumps(["ran", k, bool(same)]), flush=True)
            except (ValueError, KeyError, TypeError, IndexError, MemoryError) as err:
                print(json.dumps(["refused", k, type(err).__name__ + ": " + str(err)]),
                      flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"crashed after: {proc.stdout[-500:]}\n{proc.stderr[-2000:]}"
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(labels)
    wrong = [labels[k] for kind, k, detail in results if kind == "ran" and not detail]
    assert wrong == [], f"edits that ran with a wrong answer: {wrong}"
    refused = [detail for kind, _, detail in results if kind == "refused"]
    assert len(refused) > len(labels) // 2  # most edits break the graph and must be refused
    assert all(len(msg) > 20 for msg in refused)


def test_signature_table_comes_from_the_object_code(exported):
    path, _, _ = exported
    lib = runtime.load_module(path).get_lib()
    sigs = lib.signatures
    assert set(sigs) == set(lib.function_names)
    conv = next(v for k, v in sigs.items() if "conv2d" in k)
    assert conv[0] == ((1, 4, 12, 12), "float32")
