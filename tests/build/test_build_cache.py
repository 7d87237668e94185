"""The build cache (compiler.driver.build_cache): a rebuild of the same program loads the result."""
from __future__ import annotations

import glob
import mmap
import os
from dataclasses import fields, replace

import numpy as np
import pytest

from codegen import jit
from codegen.options import CodegenOptions, freeze_schedule_config
from codegen.parallel import ParallelPolicy
from compiler import relay
from compiler.driver import build as build_module, build_cache
from compiler.ir.module import IRModule
from compiler.target import Target
from compiler.transform import PassContext, PassInstrument, pass_instrument
from runtime.target import resolve_cpu_target
from runtime import cpu, digest
from runtime.graph_executor import GraphModule


RNG_WEIGHT = np.random.default_rng(11)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty cache directory; every build is stored, however quick."""
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAYJIT_BUILD_CACHE", "1")
    monkeypatch.setattr(build_cache, "MIN_BUILD_SECONDS", 0.0)
    yield tmp_path
    build_cache.flush()  # no writer thread outlives the test (others count threads)


def _program(weight: np.ndarray):
    x = relay.var("x", shape=(1, 4, 8, 8), dtype="float32")
    w = relay.var("w", shape=weight.shape, dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=weight.shape[0],
                                      kernel_size=(3, 3)))
    return relay.Function([x, w], y), {"w": weight}


def _build(weight: np.ndarray, opt_level: int = 3, **ctx):
    func, params = _program(weight)
    with PassContext(opt_level=opt_level, **ctx):
        return relay.build(func, target="llvm", params=params)


def _run(factory, x: np.ndarray) -> np.ndarray:
    m = GraphModule(factory["default"](cpu()))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


def _hits(factory) -> int:
    return factory.build_timing.counts["build_cache_hits"]


def _entries(root) -> list[str]:
    build_cache.flush()  # entries are written in the background
    return glob.glob(os.path.join(str(root), "builds", "*", "*.rjbuild"))


def test_a_rebuild_loads_the_stored_build(cache_dir):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((8, 4, 3, 3)).astype("float32")
    x = rng.standard_normal((1, 4, 8, 8)).astype("float32")
    first = _build(weight)
    assert _hits(first) == 0 and len(_entries(cache_dir)) == 1
    again = _build(weight)
    assert _hits(again) == 1
    assert "loaded from the build cache" in again.build_timing.table()
    assert "build cache lookup" in again.build_timing.table()
    np.testing.assert_array_equal(_run(again, x), _run(first, x))
    assert again.memory_stats == first.memory_stats
    assert [p.name_hint for p in again.ir_mod["main"].params] == ["x"]


def test_a_different_weight_or_setting_is_another_build(cache_dir):
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((8, 4, 3, 3)).astype("float32")
    x = rng.standard_normal((1, 4, 8, 8)).astype("float32")
    _build(weight)
    changed = weight.copy()
    changed[3, 1, 2, 0] += 1.0
    other = _build(changed)
    assert _hits(other) == 0
    reference = _build(changed, disabled_pass=["AlterOpLayout"])  # another setting: a miss
    assert _hits(reference) == 0
    np.testing.assert_allclose(_run(other, x), _run(reference, x), rtol=1e-5, atol=1e-5)
    assert _hits(_build(weight, opt_level=2)) == 0
    assert len(_entries(cache_dir)) == 4


def test_a_forced_vector_width_is_another_build(cache_dir, monkeypatch):
    weight = np.ones((8, 4, 3, 3), "float32")
    _build(weight)
    other = "8" if CodegenOptions.host().vector_width == 16 else "16"
    monkeypatch.setenv("RELAYJIT_VECTOR_WIDTH", other)
    assert _hits(_build(weight)) == 0


def _key(target: str = "llvm", opt_level: int = 3, **ctx) -> str:
    """The build key of the test program under a target and PassContext arguments."""
    func, params = _program(np.ones((8, 4, 3, 3), "float32"))
    mod = IRModule.from_expr(relay.bind(func, {func.params[1]: relay.const(params["w"])}))
    with PassContext(opt_level=opt_level, **ctx):
        return build_cache.build_key(mod, build_module.codegen_options_for(Target(target)),
                                     "default")


def test_every_setting_that_changes_code_changes_the_key(cache_dir, monkeypatch):
    """Each override of a schedule configuration, the vector width, kernel families, the
    target's features, the blocked layout, opt_level and disabled passes: another key."""
    def config(**c):
        return {"config": c}
    keys = {"default": _key()}
    for name, overrides in [("pixel_major", {"conv2d_nchw.direct": {"pixel_major": False}}),
                            ("tile", {"conv2d_nchw.direct": {"tile_pixels": 4}}),
                            ("prefetch", {"conv2d_nchw.direct": {"prefetch_weights": False}}),
                            ("gemm", {"dense.gemm": {"k_block": 128}}),
                            ("winograd", {"conv2d_nchw.winograd": {"tile_size": 2}}),
                            ("rows", {"softmax.rows": {"row_group": 2}})]:
        keys[name] = _key(**config(**{"relayjit.schedule_config": overrides}))
    keys["blocked"] = _key(**config(**{"relayjit.blocked_layout": False}))
    keys["guard"] = _key(**config(**{"relayjit.blocked_layout_guard": {
        "max_transform_elements_per_flop": 1.0}}))
    keys["no_vectors"] = _key(**config(**{"tir.disable_vectorize": True}))
    keys["opt2"] = _key(opt_level=2)
    keys["disabled"] = _key(disabled_pass=["AlterOpLayout"])
    if resolve_cpu_target().triple.startswith("x86_64"):
        keys["v3"] = _key("llvm -mcpu=x86-64-v3")
        keys["v3-fma"] = _key("llvm -mcpu=x86-64-v3 -mattr=-fma")
    width = CodegenOptions.host().vector_width
    monkeypatch.setenv("RELAYJIT_VECTOR_WIDTH", "8" if width == 16 else "16")
    keys["width"] = _key()
    monkeypatch.delenv("RELAYJIT_VECTOR_WIDTH")
    monkeypatch.setenv("RELAYJIT_KERNEL_FAMILIES", "0")
    keys["families"] = _key()
    monkeypatch.delenv("RELAYJIT_KERNEL_FAMILIES")
    assert _key() == keys["default"]  # and the key is stable
    assert len(set(keys.values())) == len(keys), keys


def _kernels_program() -> IRModule:
    """Two 3x3 convs (blocked: NCHWc), a one-row dense (GEMV) and a 16-row one (GEMM)."""
    rng = np.random.default_rng(3)

    def const(*shape):
        return relay.const(rng.standard_normal(shape).astype("float32"))
    x = data = relay.var("x", shape=(1, 64, 14, 14), dtype="float32")
    rows = relay.var("rows", shape=(16, 64), dtype="float32")
    for _ in range(2):
        x = relay.nn.relu(relay.nn.conv2d(x, const(64, 64, 3, 3), padding=(1, 1), channels=64,
                                          kernel_size=(3, 3)))
    gemv = relay.nn.dense(relay.reshape(x, (1, -1)), const(96, 64 * 14 * 14))
    gemm = relay.nn.dense(rows, const(48, 64))
    return IRModule.from_expr(relay.Function([data, rows], relay.Tuple([gemv, gemm])))


def _kernel_key(options: CodegenOptions, opt_level: int = 3, **ctx) -> str:
    """The kernel-cache key (codegen.jit.structural_key) of the program's kernels, lowered as
    relay.build does under `options` and PassContext arguments."""
    with PassContext(opt_level=3, **ctx), \
            build_module.build_target(Target("llvm"), options):
        _, funcs = build_module.lower_module(build_module.optimize(_kernels_program())["main"],
                                             "default", options)
    return jit.structural_key(funcs, options, opt_level)


def test_every_setting_that_changes_code_changes_the_kernel_key():
    """The kernel cache keys the kernels' TIR (what the vector width, the schedule
    configurations, the parallel policy and the blocked layout made of them) with the
    target CPU, kernel families and the LLVM pipelines: toggling each gives another key,
    and every CodegenOptions field is toggled here."""
    base = build_module.codegen_options_for(Target("llvm"))
    other_width = 8 if base.vector_width == 16 else 16
    variants = {
        "cpu": replace(base, cpu=resolve_cpu_target("x86-64-v2")
                       if base.cpu.triple.startswith("x86_64") else base.cpu._replace(
                           features=base.cpu.features + ",-neon")),
        "vector_width": replace(base, vector_width=other_width),
        "kernel_families": replace(base, kernel_families=False),
        "parallel": replace(base, parallel=ParallelPolicy(min_thread_ns=1 << 40)),
        "vectorize": replace(base, vectorize=False),
        "strategies": replace(base, strategies=False),
    }
    for name, overrides in [("nchwc", {"conv2d_nchwc.direct": {"prefetch_weights": False}}),
                            ("gemm", {"dense.gemm": {"k_block": 32}}),
                            ("gemv", {"dense.gemv": {"panels": 1}})]:
        variants[f"schedule_config/{name}"] = replace(
            base, schedule_config=freeze_schedule_config(overrides))
    assert {f.name for f in fields(CodegenOptions)} == {n.split("/")[0] for n in variants}
    keys = {"default": _kernel_key(base)}
    keys.update({name: _kernel_key(options) for name, options in variants.items()})
    keys["opt2"] = _kernel_key(base, opt_level=2)
    nchw = {"config": {"relayjit.blocked_layout": False}}  # the convs NCHW: the direct family
    keys["nchw"] = _kernel_key(base, **nchw)
    keys["nchw/direct"] = _kernel_key(replace(base, schedule_config=freeze_schedule_config(
        {"conv2d_nchw.direct": {"prefetch_weights": False}})), **nchw)
    assert _kernel_key(base) == keys["default"]  # and the key is stable
    assert len(set(keys.values())) == len(keys), keys


def test_a_damaged_entry_is_removed_and_rebuilt(cache_dir):
    weight = np.ones((8, 4, 3, 3), "float32")
    _build(weight)
    (entry,) = _entries(cache_dir)
    data = bytearray(open(entry, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(entry, "wb").write(bytes(data))
    rebuilt = _build(weight)
    assert _hits(rebuilt) == 0
    x = np.ones((1, 4, 8, 8), "float32")
    assert _run(rebuilt, x).max() == pytest.approx(36.0)  # 4 channels x 9 taps inside
    assert _hits(_build(weight)) == 1  # stored again, readable


def test_the_switch_turns_it_off(cache_dir, monkeypatch):
    monkeypatch.setenv("RELAYJIT_BUILD_CACHE", "0")
    _build(np.ones((8, 4, 3, 3), "float32"))
    assert _entries(cache_dir) == []
    monkeypatch.setenv("RELAYJIT_BUILD_CACHE", "maybe")
    with pytest.raises(ValueError, match="RELAYJIT_BUILD_CACHE"):
        _build(np.ones((8, 4, 3, 3), "float32"))


def test_builds_with_instruments_or_without_disk_cache_are_not_stored(cache_dir):
    @pass_instrument
    class Seen(PassInstrument):
        def __init__(self):
            self.names = []

        def run_before_pass(self, mod, info):
            self.names.append(info.name)

    weight = np.ones((8, 4, 3, 3), "float32")
    seen = Seen()
    _build(weight, instruments=[seen])
    assert "FoldConstant" in seen.names and _entries(cache_dir) == []
    _build(weight, config={"relayjit.disable_disk_cache": True})
    assert _entries(cache_dir) == []


def test_quick_builds_are_not_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAYJIT_BUILD_CACHE", "1")
    monkeypatch.setattr(build_cache, "MIN_BUILD_SECONDS", 1e9)
    _build(np.ones((8, 4, 3, 3), "float32"))
    assert _entries(tmp_path) == []


def test_prune_keeps_the_most_recent_builds(cache_dir):
    for k in range(3):
        _build(np.full((8, 4, 3, 3), float(k), "float32"))
    entries = sorted(_entries(cache_dir), key=os.path.getmtime)
    assert len(entries) == 3
    size = sum(os.path.getsize(entries[-1][:-len(".rjbuild")] + suffix)
               for suffix in (".rjbuild", ".params", ".json"))  # the entry's three files
    assert build_cache.prune(max_bytes=size) == 2
    assert _entries(cache_dir) == [entries[-1]]
    assert build_cache.prune(max_bytes=size - 1) == 1
    assert _entries(cache_dir) == [] and os.listdir(os.path.dirname(entries[-1])) == []


def test_builds_with_big_params_are_not_stored(cache_dir, monkeypatch):
    monkeypatch.setattr(build_cache, "MAX_STORED_PARAMS", 8 * 4 * 9 * 4 - 1)  # the weight: 1152 B
    _build(np.ones((8, 4, 3, 3), "float32"))
    assert _entries(cache_dir) == []
    monkeypatch.setattr(build_cache, "MAX_STORED_PARAMS", 8 * 4 * 9 * 4 * 4)
    _build(np.ones((8, 4, 3, 3), "float32"))
    assert len(_entries(cache_dir)) == 1


def test_the_stored_params_are_a_copy(cache_dir):
    """Writing into the factory's params after the build does not reach the entry."""
    weight = RNG_WEIGHT.standard_normal((8, 4, 3, 3)).astype("float32")
    x = RNG_WEIGHT.standard_normal((1, 4, 8, 8)).astype("float32")
    first = _build(weight)
    want = _run(first, x)
    for value in first.get_params().values():
        value.copyfrom(np.zeros(value.shape, value.dtype))
    again = _build(weight)
    assert _hits(again) == 1
    np.testing.assert_array_equal(_run(again, x), want)


def _entry_file(root, suffix: str) -> str:
    (entry,) = _entries(root)
    return entry[:-len(".rjbuild")] + suffix


def _base(array: np.ndarray):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array.obj if isinstance(array, memoryview) else array


def test_a_hit_maps_the_params_instead_of_copying(cache_dir):
    weight = RNG_WEIGHT.standard_normal((8, 4, 3, 3)).astype("float32")
    _build(weight)
    again = _build(weight)
    assert _hits(again) == 1
    assert all(isinstance(_base(v._view()), mmap.mmap) for v in again.params.values())


@pytest.mark.parametrize("damage", ["flip a weight byte", "truncate", "another build's"])
def test_damaged_params_are_a_clean_miss(cache_dir, damage):
    weight = RNG_WEIGHT.standard_normal((8, 4, 3, 3)).astype("float32")
    x = RNG_WEIGHT.standard_normal((1, 4, 8, 8)).astype("float32")
    want = _run(_build(weight), x)
    params = _entry_file(cache_dir, ".params")
    if damage == "another build's":  # a consistent params file, but not this entry's
        other = _build(weight * 2)
        assert _hits(other) == 0
        build_cache.flush()
        other_params = [p for p in glob.glob(os.path.join(str(cache_dir), "builds", "*",
                                                           "*.params")) if p != params]
        os.replace(other_params[0], params)
    else:
        data = bytearray(open(params, "rb").read())
        if damage == "truncate":
            del data[-100:]
        else:
            data[-50] ^= 0x10  # inside the last array
        open(params, "wb").write(bytes(data))
    rebuilt = _build(weight)
    assert _hits(rebuilt) == 0
    np.testing.assert_array_equal(_run(rebuilt, x), want)
    again = _build(weight)  # stored again, readable
    assert _hits(again) == 1
    np.testing.assert_array_equal(_run(again, x), want)


def test_one_byte_of_a_large_weight_is_another_build(cache_dir, monkeypatch):
    """The key digests every byte: a weight spread over many digest pieces (CHUNK made
    small) changed in one byte of a late piece misses, and the rebuild computes with it."""
    monkeypatch.setattr(digest, "CHUNK", 256)
    weight = RNG_WEIGHT.standard_normal((8, 4, 3, 3)).astype("float32")  # 1152 B: 5 pieces
    x = RNG_WEIGHT.standard_normal((1, 4, 8, 8)).astype("float32")
    first = _build(weight)
    changed = weight.copy()
    changed.view(np.uint8).reshape(-1)[1100] ^= 0x01  # one bit of one byte, in piece 5
    other = _build(changed)
    assert _hits(other) == 0 and _hits(_build(weight)) == 1
    assert not np.array_equal(_run(other, x), _run(first, x))
    with PassContext(opt_level=3, config={"relayjit.disable_disk_cache": True}):
        func, params = _program(changed)
        reference = relay.build(func, target="llvm", params=params)
    np.testing.assert_array_equal(_run(other, x), _run(reference, x))


def _leftovers(root) -> list[str]:
    build_cache.flush()
    return glob.glob(os.path.join(str(root), "builds", "*", ".tmp-*"))


@pytest.mark.parametrize("early", ["all", "none"])
def test_params_written_during_the_build_or_after_load_the_same(cache_dir, monkeypatch, early):
    """Weights written while LLVM compiles (start_params) and params written only at the end
    (store) make the same entry."""
    if early == "none":
        real = build_cache.start_params
        monkeypatch.setattr(build_cache, "start_params", lambda key, arrays: real(key, []))
    weight = RNG_WEIGHT.standard_normal((8, 4, 3, 3)).astype("float32")
    x = RNG_WEIGHT.standard_normal((1, 4, 8, 8)).astype("float32")
    want = _run(_build(weight), x)
    again = _build(weight)
    assert _hits(again) == 1 and _leftovers(cache_dir) == []
    np.testing.assert_array_equal(_run(again, x), want)


def test_builds_not_stored_leave_no_params_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAYJIT_BUILD_CACHE", "1")
    monkeypatch.setattr(build_cache, "MIN_BUILD_SECONDS", 1e9)  # too quick to store
    _build(np.ones((8, 4, 3, 3), "float32"))
    assert _entries(tmp_path) == [] and _leftovers(tmp_path) == []
    monkeypatch.setattr(build_cache, "MIN_BUILD_SECONDS", 0.0)

    def fail(*args, **kwargs):
        raise RuntimeError("LLVM fell over")

    monkeypatch.setattr(build_module.jit, "build_library", fail)  # a build that fails
    with pytest.raises(RuntimeError, match="LLVM fell over"):
        _build(np.full((8, 4, 3, 3), 2.0, "float32"))
    assert _entries(tmp_path) == [] and _leftovers(tmp_path) == []


def test_an_empty_constant_is_digested_and_stored(cache_dir):
    """A program with a constant of no elements (a fuzzed model's empty Add operand crashed
    the key's digest) builds, is stored and is found again."""
    x = relay.var("x", shape=(0, 3), dtype="float32")
    func = relay.Function([x], relay.add(x, relay.const(np.zeros((0, 3), "float32"))))
    first = relay.build(func, target="llvm")
    assert _entries(cache_dir)
    again = relay.build(func, target="llvm")
    assert _hits(first) == 0 and _hits(again) == 1


def test_the_key_covers_the_compiler_source():
    """Every source file of compiler/, codegen/ and runtime/ is in the key, so a build made
    before a change to a pass or a schedule is never loaded after it."""
    files = build_cache.source_files()
    for path in ("compiler/driver/build_cache.py", "compiler/passes/fuse_ops.py",
                 "codegen/schedules/gemm.py", "runtime/graph_executor.py"):
        assert path in files
    assert not [f for f in files if "__pycache__" in f]
