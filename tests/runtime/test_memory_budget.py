"""The executor states what a graph needs and refuses, before allocating, more than there is."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.ir.module import IRModule
from runtime import graph_executor
from runtime.memory import format_bytes, memory_budget


def _build(shape):
    x = relay.var("x", shape=shape)
    return relay.build(IRModule.from_expr(relay.Function([x], relay.nn.relu(x + 1.0))))


def test_terabyte_graph_is_refused_before_allocating():
    lib = _build((1, 3, 400000, 400000))  # 1.7 TiB a tensor
    with pytest.raises(MemoryError, match=r"needs 3\.5 TiB, more than the .* available"):
        graph_executor.GraphModule(lib["default"](runtime.cpu()))


def test_configured_limit(monkeypatch):
    lib = _build((64, 1024))  # 256 KiB a tensor
    monkeypatch.setenv("RELAYJIT_MEMORY_LIMIT", "100K")
    with pytest.raises(MemoryError, match="needs 512.0 KiB, more than the 100.0 KiB"):
        graph_executor.GraphModule(lib["default"](runtime.cpu()))
    monkeypatch.setenv("RELAYJIT_MEMORY_LIMIT", "1M")
    m = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    m.run(x=np.ones((64, 1024), "f4"))
    assert (m.get_output(0).numpy() == 2).all()


@pytest.mark.parametrize("bad", ["0", "-5G", "lots", "G"])
def test_bad_limit_names_the_variable(monkeypatch, bad):
    monkeypatch.setenv("RELAYJIT_MEMORY_LIMIT", bad)
    with pytest.raises(ValueError, match="RELAYJIT_MEMORY_LIMIT"):
        memory_budget()


def test_format_bytes():
    assert format_bytes(512) == "512 bytes"
    assert format_bytes(3 << 39) == "1.5 TiB"
