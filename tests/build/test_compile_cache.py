"""The persistent compile cache (codegen.cache): a rebuild in a new process skips LLVM."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from codegen import cache, jit
from codegen.compile_objects import PARALLEL_MIN_KERNELS
from codegen.compile_stats import record_compile_stats

from runtime.target import host_info
from tests.schedule_helpers import host

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Builds a small conv net (with a constant subgraph for FoldConstant) in a fresh process and
# prints the cache counters, the output and a digest of the object code.
BUILD_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    from compiler import relay
    from compiler.transform import PassContext
    from codegen import cache, jit
    from runtime import cpu, graph_executor

    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.const(rng.standard_normal((4, 3, 3, 3)).astype("float32"))
    scale = relay.const(rng.standard_normal((4, 1, 1, 1)).astype("float32"))
    y = relay.nn.conv2d(x, relay.multiply(w, scale), padding=(1, 1), channels=4,
                        kernel_size=(3, 3))
    y = relay.nn.relu(relay.add(y, relay.const(np.float32(0.5))))
    y = relay.exp(relay.nn.batch_flatten(y))
    config = {"relayjit.disable_disk_cache": True} if "--no-disk" in sys.argv else {}
    with PassContext(opt_level=3, config=config):
        factory = relay.build(relay.Function([x], y))
    gmod = graph_executor.GraphModule(factory["default"](cpu(0)))
    gmod.run(x=np.linspace(-1, 1, 192, dtype="float32").reshape(1, 3, 8, 8))
    out = gmod.get_output(0).numpy()
    print(json.dumps({"jit": jit.cache_stats(), "disk": cache.disk_cache_stats(),
                      "out": out.tobytes().hex(),
                      "object": hashlib.sha256(b"".join(factory.get_lib().objects)).hexdigest()}))
""")


def build_in_new_process(cache_dir, *args):
    env = dict(os.environ, RELAYJIT_CACHE_DIR=str(cache_dir),
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def entries(cache_dir):
    return sorted(os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "relayjit-cache"
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(path))
    jit.clear_cache()
    cache.reset_disk_cache_stats()
    yield path
    jit.clear_cache()


def test_second_build_in_fresh_process_hits_the_cache(cache_dir):
    cold = build_in_new_process(cache_dir)
    assert cold["jit"]["misses"] > 0 and cold["jit"]["disk"] == 0
    # one entry per kernel set, one per micro-kernel (compiled once per machine)
    assert cold["jit"]["microkernels"] > 0
    assert cold["disk"]["writes"] == cold["jit"]["misses"] + cold["jit"]["microkernels"]
    files = entries(cache_dir)
    assert files and all(f.endswith(".rjc") for f in files)  # no temporary files left
    warm = build_in_new_process(cache_dir)
    assert warm["jit"]["misses"] == 0, warm
    assert warm["jit"]["disk"] == cold["jit"]["misses"]
    # the kernel sets and the micro-kernels' objects, each loaded from disk
    assert warm["disk"]["hits"] == cold["jit"]["misses"] + cold["jit"]["microkernels"]
    assert warm["disk"]["writes"] == 0
    assert warm["out"] == cold["out"]
    assert warm["object"] == cold["object"]
    assert entries(cache_dir) == files


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_corrupted_entry_is_ignored_and_rebuilt(cache_dir, damage):
    cold = build_in_new_process(cache_dir)
    files = entries(cache_dir)
    for path in files:
        data = open(path, "rb").read()
        if damage == "truncate":
            data = data[:len(data) // 2]
        elif damage == "flip":
            data = data[:len(data) // 3] + bytes([data[len(data) // 3] ^ 0x40]) + \
                data[len(data) // 3 + 1:]
        elif damage == "empty":
            data = b""
        else:
            data = cache.MAGIC + b"\xff" * 100
        with open(path, "wb") as f:
            f.write(data)
    again = build_in_new_process(cache_dir)
    assert again["disk"]["corrupt"] == len(files)
    assert again["jit"]["misses"] == cold["jit"]["misses"] and again["jit"]["disk"] == 0
    assert again["out"] == cold["out"] and again["object"] == cold["object"]
    warm = build_in_new_process(cache_dir)  # the rebuilt entries are good
    assert warm["jit"]["misses"] == 0 and warm["disk"]["corrupt"] == 0
    assert warm["out"] == cold["out"]


def test_empty_cache_dir_disables_the_disk_cache(cache_dir, monkeypatch):
    result = build_in_new_process("")
    assert result["disk"]["writes"] == 0 and result["disk"]["hits"] == 0
    assert not os.path.exists(cache_dir)
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", "")
    assert cache.cache_dir() is None and not cache.enabled()


def test_pass_config_disables_the_disk_cache(cache_dir):
    result = build_in_new_process(cache_dir, "--no-disk")
    assert result["jit"]["misses"] > 0
    assert result["disk"] == {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "errors": 0}
    assert entries(cache_dir) == []


def test_in_process_roundtrip_and_renamed_kernels(cache_dir):
    from codegen import te

    def delta(before):
        now = jit.cache_stats()
        return {k: now[k] - before[k] for k in now}

    a = te.placeholder((16,), "float32", "a")
    b = te.compute((16,), lambda i: a[i] * 2.0 + 1.0, name="b")
    start = jit.cache_stats()
    f1 = jit.build_te([a], [b], name="first")
    x = np.arange(16, dtype="float32")
    expected = f1(x)[0]
    assert delta(start)["misses"] == 1 and len(entries(cache_dir)) == 1
    jit.clear_cache()  # as in a new process: only the disk remembers
    f2 = jit.build_te([a], [b], name="first")
    assert delta(start)["disk"] == 1 and delta(start)["misses"] == 1
    jit.clear_cache()
    f3 = jit.build_te([a], [b], name="second")  # same structure, other name: renamed
    assert delta(start)["disk"] == 2 and delta(start)["misses"] == 1
    np.testing.assert_array_equal(f2(x)[0], expected)
    np.testing.assert_array_equal(f3(x)[0], expected)


def test_key_covers_environment_and_codegen_version(cache_dir):
    key = jit.structural_key([], host(), 3)
    path = cache.entry_path(key, host_info())
    assert path.startswith(str(cache_dir))
    assert cache.entry_path(jit.structural_key([], host(), 2), host_info()) != path  # opt
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cache, "CODEGEN_VERSION", "test-other-version")
        cache._codegen_digest.cache_clear()
        cache.environment_key.cache_clear()
        try:
            assert cache.entry_path(key, host_info()) != path
        finally:
            mp.undo()
            cache._codegen_digest.cache_clear()
            cache.environment_key.cache_clear()
    assert cache.entry_path(key, host_info()) == path


def test_decode_rejects_damaged_entries():
    entry = cache.Entry(("k", "l"), (b"object-bytes", b"second object"), (b"bitcode", b"bc2"))
    data = cache._encode(entry)
    assert cache._decode(data) == entry
    for bad in (data[:-1], data[1:], data + b"x", b"", data[:40],
                data.replace(b"object-bytes", b"object-bytez")):
        assert cache._decode(bad) is None


def _forged(header: dict, payload: bytes, magic: bytes = cache.MAGIC) -> bytes:
    """An entry with a valid checksum around whatever header it is given."""
    text = json.dumps(header).encode()
    body = magic + len(text).to_bytes(4, "little") + text + payload
    return body + hashlib.sha256(body).digest()


@pytest.mark.parametrize("header, payload", [
    ({"names": ["k"], "objects": [4, 4], "bitcodes": []}, b"abcdefg"),    # lengths past the end
    ({"names": ["k"], "objects": [2], "bitcodes": [2]}, b"abcdefg"),      # bytes left over
    ({"names": ["k"], "objects": [-1], "bitcodes": [8]}, b"abcdefg"),     # negative
    ({"names": ["k"], "objects": [True], "bitcodes": [6]}, b"abcdefg"),   # not a number
    ({"names": ["k"], "objects": 7, "bitcodes": []}, b"abcdefg"),         # not a list
    ({"names": ["k"], "objects": [], "bitcodes": []}, b""),               # nothing stored
    ({"names": [""], "objects": [7], "bitcodes": []}, b"abcdefg"),        # empty name
    ({"names": ["k"], "object": 7, "bitcode": 0}, b"abcdefg"),            # version 1 header
])
def test_decode_rejects_headers_that_lie(header, payload):
    assert cache._decode(_forged(header, payload)) is None
    good = {"names": ["k"], "objects": [3], "bitcodes": [4]}
    assert cache._decode(_forged(good, b"abcdefg")) == cache.Entry(("k",), (b"abc",), (b"defg",))
    old_magic = b"RELAYJIT-OBJCACHE-1\n"  # another format version is not read
    assert cache._decode(_forged(good, b"abcdefg", old_magic)) is None


def test_prune_removes_least_recently_used(cache_dir):
    for k in range(4):
        assert cache.store(f"key{k}", cache.Entry(("k",), (b"o" * 1000,), ()), host_info())
        path = cache.entry_path(f"key{k}", host_info())
        os.utime(path, (1000 + k, 1000 + k))
    assert cache.prune(max_bytes=2500) == 2
    assert cache.lookup("key0", host_info()) is None
    assert cache.lookup("key1", host_info()) is None
    assert cache.lookup("key3", host_info()).objects == (b"o" * 1000,)


def test_test_session_does_not_use_the_home_cache():
    home = os.path.join(os.path.expanduser("~"), ".cache", "relayjit")
    assert cache.cache_dir() and not cache.cache_dir().startswith(home)


def test_parallel_compile_jobs_give_the_same_results(tmp_path, monkeypatch):
    """RELAYJIT_COMPILE_JOBS=2 optimises shares of the kernels in forked processes."""
    from codegen import te
    from codegen.lower import lower

    monkeypatch.setenv("RELAYJIT_CACHE_DIR", "")
    a = te.placeholder((8, 8), "float32", "a")
    funcs = []
    for k in range(16):
        b = te.compute((8, 8), lambda i, j, k=k: a[i, j] * float(k + 1) + a[j, i], name="b")
        funcs.append(lower(f"kernel_{k}", [a], [b]))
    x = np.arange(64, dtype="float32").reshape(8, 8)
    results = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("RELAYJIT_COMPILE_JOBS", jobs)
        jit.clear_cache()
        lib = jit.build_library(funcs, options=host())
        assert len(lib.objects) == int(jobs)  # one object per job
        outs = []
        for f in funcs:
            out = np.empty((8, 8), dtype="float32")
            lib[f.name](x, out)
            outs.append(out)
        results[jobs] = outs
    jit.clear_cache()
    for k, (one, two) in enumerate(zip(results["1"], results["2"])):
        np.testing.assert_array_equal(one, two)
        np.testing.assert_array_equal(one, x * (k + 1) + x.T)


def test_several_objects_round_trip_through_the_disk_cache_and_renaming(cache_dir, monkeypatch):
    """A kernel set two jobs compiled is two objects on disk; a fresh process loads them, and
    the same kernels under other names rename the functions in each object's bitcode."""
    from codegen import te
    from codegen.lower import lower

    def kernels(prefix):
        a = te.placeholder((8, 8), "float32", "a")
        return [lower(f"{prefix}_{k}", [a], [te.compute(
            (8, 8), lambda i, j, k=k: a[i, j] * float(k + 1) - a[j, i], name="b")])
            for k in range(2 * PARALLEL_MIN_KERNELS)]

    def outputs(lib, funcs):
        x = np.arange(64, dtype="float32").reshape(8, 8)
        outs = []
        for f in funcs:
            outs.append(np.empty((8, 8), dtype="float32"))
            lib[f.name](x, outs[-1])
        return outs

    monkeypatch.setenv("RELAYJIT_COMPILE_JOBS", "2")
    funcs = kernels("first")
    with record_compile_stats() as cold:
        lib = jit.build_library(funcs, options=host())
    assert cold.misses == 1 and cold.jobs == 2 and len(lib.objects) == 2
    expected = outputs(lib, funcs)
    jit.clear_cache()  # as in a new process
    with record_compile_stats() as warm:
        again = jit.build_library(funcs, options=host())
    assert warm.disk_hits == 1 and warm.misses == 0 and again.objects == lib.objects
    jit.clear_cache()
    other = kernels("second")  # same structure, other names
    with record_compile_stats() as renamed:
        lib2 = jit.build_library(other, options=host())
    assert renamed.disk_hits == 1 and renamed.misses == 0 and len(lib2.objects) == 2
    assert lib2.objects != lib.objects  # the functions' names are in the object code
    for got, want in zip(outputs(lib2, other), expected):
        np.testing.assert_array_equal(got, want)
    assert list(lib2.signatures.values()) == list(lib.signatures.values())
