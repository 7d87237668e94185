"""Portable artefacts: a build for a named baseline CPU uses only that CPU's features (256-bit
vectors for x86-64-v3 on an AVX-512 host), runs correctly here, records what it needs, and a
module needing features this machine lacks is refused before any of its code runs."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import runtime
from codegen import cache, jit
from codegen.options import CodegenOptions
from compiler.driver import build as build_module
from compiler import relay
from compiler.errors import CompilerError
from compiler.ir.module import IRModule
from compiler.target import Target
from compiler.transform import PassContext
from runtime import export, graph_executor
from runtime.target import host_info, resolve_cpu_target

from .test_untrusted_module import _sections, _write

from tests.schedule_helpers import host

pytestmark = pytest.mark.skipif(not host_info().triple.startswith("x86_64"),
                                reason="the named baselines are x86-64 levels")
V3 = "llvm -mcpu=x86-64-v3"
RNG = np.random.default_rng(14)
X = RNG.standard_normal((1, 8, 10, 10)).astype("f4")
W = RNG.standard_normal((32, 8, 3, 3)).astype("f4")
D = RNG.standard_normal((16, 32 * 10 * 10)).astype("f4")


def _model() -> IRModule:
    x = relay.var("x", shape=X.shape)
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(W), padding=(1, 1)))
    out = relay.nn.dense(relay.reshape(y, (1, -1)), relay.const(D))
    return IRModule.from_expr(relay.Function([x], out))


def _reference() -> np.ndarray:
    pad = np.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(pad, (3, 3), axis=(2, 3))
    conv = np.einsum("nchwrs,kcrs->nkhw", windows, W)
    return np.maximum(conv, 0).reshape(1, -1) @ D.T


def _assembly(target: str) -> str:
    """Assembly of the model's kernels, lowered and compiled as relay.build does for target."""
    with PassContext(opt_level=3), build_module.build_target(Target(target)):
        _, funcs = build_module.lower_module(build_module.optimize(_model())["main"])
        return jit.get_assembly(funcs, options=host())


@pytest.fixture(scope="module")
def v3_module(tmp_path_factory):
    with PassContext(opt_level=3):
        factory = relay.build(_model(), target=V3)
    path = str(tmp_path_factory.mktemp("portable") / "model_v3.rjit")
    factory.export_library(path)
    return factory, path


def _run(factory) -> np.ndarray:
    m = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    m.run(x=X)
    return m.get_output(0).numpy()


def test_baseline_build_runs_correctly_here(v3_module):
    factory, _ = v3_module
    assert factory.get_lib().target.cpu == "x86-64-v3"
    enabled = factory.get_lib().target.enabled_features()
    assert "avx2" in enabled and "fma" in enabled and "avx512f" not in enabled
    np.testing.assert_allclose(_run(factory), _reference(), rtol=1e-4, atol=1e-3)


def test_schedules_take_vector_width_from_the_target(monkeypatch):
    monkeypatch.delenv("RELAYJIT_VECTOR_WIDTH", raising=False)
    assert CodegenOptions.for_cpu(resolve_cpu_target("x86-64-v3")).vector_width == 8
    assert CodegenOptions.for_cpu(resolve_cpu_target("x86-64-v4")).vector_width == 16
    assert build_module.codegen_options_for(Target(V3)).vector_width == 8
    monkeypatch.setenv("RELAYJIT_VECTOR_WIDTH", "16")  # the override, read by the driver
    assert build_module.codegen_options_for(Target(V3)).vector_width == 16


def test_compile_cache_keys_are_per_target(monkeypatch, tmp_path):
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(tmp_path))
    v3, v3_avx512 = resolve_cpu_target("x86-64-v3"), resolve_cpu_target("x86-64-v3",
                                                                        ["+avx512f"])
    host_key = jit.structural_key([], CodegenOptions.host(), 3)
    assert jit.structural_key([], CodegenOptions.for_cpu(v3), 3) != host_key  # in memory
    entries = {cache.entry_path(host_key, cpu) for cpu in (host_info(), v3, v3_avx512)}
    assert len(entries) == 3  # the disk cache


def test_baseline_assembly_has_no_avx512():
    v3 = _assembly(V3)
    assert re.search(r"%ymm\d+", v3), "x86-64-v3 code should use 256-bit vectors"
    assert not re.search(r"%zmm\d+|%k[1-7]\b", v3), "x86-64-v3 code must not use AVX-512"
    if "avx512f" in resolve_cpu_target().enabled_features():  # the host build does use them
        assert re.search(r"%zmm\d+", _assembly("llvm"))


def test_export_records_target_and_versions(v3_module):
    _, path = v3_module
    meta = json.loads(_sections(path)[3])
    assert meta["triple"] == host_info().triple and meta["cpu"] == "x86-64-v3"
    assert "+avx2" in meta["features"].split(",") and "avx512" not in meta["features"]
    assert meta["llvm_version"].count(".") == 2 and meta["relayjit_version"]
    np.testing.assert_allclose(_run(runtime.load_module(path)), _reference(), rtol=1e-4,
                               atol=1e-3)


def test_module_needing_missing_features_is_refused(v3_module, tmp_path):
    _, path = v3_module
    absent = [f[1:] for f in host_info().features.split(",") if f.startswith("-")][:2]
    sections = _sections(path)
    meta = json.loads(sections[3])
    meta["cpu"] = "imaginary-cpu"
    meta["features"] += "".join(",+" + f for f in absent)
    sections[3] = json.dumps(meta).encode()
    edited = str(tmp_path / "edited.rjit")
    _write(edited, sections)
    with pytest.raises(export.UnsupportedCPUError) as info:
        runtime.load_module(edited)
    message = str(info.value)
    assert edited in message and "'imaginary-cpu'" in message
    assert f"lacks: {', '.join(absent)}; rebuild it with target=\"llvm -mcpu=x86-64-v" in message


@pytest.mark.parametrize("target, message", [
    ("llvm -mcpu=pentium-mmx-turbo", "not a CPU relayjit can record features for"),
    ("llvm -mcpu=x86-64-v3 -mattr=avx2", "expected \\+feature or -feature"),
    ("llvm -mtriple=aarch64-linux-gnu", "builds for this machine's triple"),
])
def test_bad_targets_are_refused_by_name(target, message):
    with pytest.raises(CompilerError, match=message):
        relay.build(_model(), target=target)


def test_mattr_adjusts_the_baseline():
    cpu = resolve_cpu_target("x86-64-v2", ["+avx", "-popcnt"])
    assert "avx" in cpu.enabled_features() and "popcnt" not in cpu.enabled_features()
    assert "sse4.2" in cpu.enabled_features() and "avx2" not in cpu.enabled_features()
