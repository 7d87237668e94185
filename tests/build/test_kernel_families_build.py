"""relay.build with kernel families: a DenseNet-style dense block, whose 1x1 convs differ only
in their input channels, compiles them as shared bodies, computes what the build without
families does, and exports and loads like any module."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from codegen import jit
from codegen.compile_stats import record_compile_stats
from compiler import relay
from compiler.driver.build import FAMILIES_ENV
from compiler.transform import PassContext
from runtime import graph_executor

RNG = np.random.default_rng(21)
IN, GROWTH, LAYERS, SIZE = 256, 32, 4, 14  # DenseNet-121's third block, shorter


def _const(*shape) -> relay.Expr:
    return relay.const(RNG.standard_normal(shape).astype("float32"))


def dense_block():
    """LAYERS layers of relu(x * scale + shift) -> 1x1 conv onto 128 -> 3x3 conv onto GROWTH,
    each layer's input the concatenation of the block input and every earlier layer's output
    (so each layer's BN+ReLU and 1x1 conv differ from the others only in channels)."""
    x = relay.var("x", shape=(1, IN, SIZE, SIZE))
    features = [x]
    channels = IN
    for _ in range(LAYERS):
        inp = relay.concatenate(features, axis=1) if len(features) > 1 else x
        act = relay.nn.relu(relay.add(relay.multiply(inp, _const(channels, 1, 1)),
                                      _const(channels, 1, 1)))
        mid = relay.nn.relu(relay.nn.conv2d(act, _const(128, channels, 1, 1), channels=128,
                                            kernel_size=(1, 1)))
        features.append(relay.nn.conv2d(mid, _const(GROWTH, 128, 3, 3), channels=GROWTH,
                                        kernel_size=(3, 3), padding=(1, 1)))
        channels += GROWTH
    return relay.Function([x], relay.concatenate(features, axis=1))


def _build(func, families: str, monkeypatch):
    monkeypatch.setenv(FAMILIES_ENV, families)
    jit.clear_cache()
    with PassContext(opt_level=3, config={"relayjit.disable_disk_cache": True}):
        return relay.build(func)


def _run(factory, data):
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.run(x=data)
    return gmod.get_output(0).numpy()


@pytest.fixture(autouse=True)
def no_build_cache(monkeypatch):
    monkeypatch.setenv("RELAYJIT_BUILD_CACHE", "0")
    yield
    jit.clear_cache()


def test_dense_block_compiles_families_and_matches_the_build_without(tmp_path, monkeypatch):
    data = RNG.standard_normal((1, IN, SIZE, SIZE)).astype("float32")
    func = dense_block()
    plain = _build(func, "0", monkeypatch)
    with record_compile_stats() as stats:
        shared = _build(func, "1", monkeypatch)
    assert stats.families >= 1 and stats.family_members >= LAYERS  # the 1x1 convs
    assert "families" in str(shared.build_timing)
    assert shared.get_lib().function_names == plain.get_lib().function_names
    want = _run(plain, data)
    got = _run(shared, data)
    np.testing.assert_array_equal(got, want)  # the same code but for the extent argument
    path = tmp_path / "families.so"
    shared.export_library(str(path))
    loaded = runtime.load_module(str(path))
    np.testing.assert_array_equal(_run(loaded, data), want)
