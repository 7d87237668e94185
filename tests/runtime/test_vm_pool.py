"""StoragePool: leases come back when nothing holds them, sizes share classes."""
from __future__ import annotations

import numpy as np
import pytest

from runtime.vm.pool import StoragePool, size_class


def test_size_classes_round_up_at_most_an_eighth():
    assert size_class(0) == 64 and size_class(1) == 64 and size_class(65) == 128
    for n in (4097, 10_000, 123_457, 1 << 20, (1 << 20) + 1, 3_000_001):
        c = size_class(n)
        assert n <= c <= n * 1.125 + 64 and c % 64 == 0


def test_a_lease_returns_when_its_last_view_is_dropped():
    pool = StoragePool()
    lease = pool.alloc(1000)
    assert lease.ctypes.data % 64 == 0 and lease.nbytes >= 1000
    view = lease[:400].view(np.float32).reshape(10, 10)
    del lease
    assert pool.stats()["leased_bytes"] > 0  # the view still holds it
    address = view.ctypes.data
    del view
    assert pool.stats()["leased_bytes"] == 0
    again = pool.alloc(990)  # same size class (1024): the same buffer
    assert again.ctypes.data == address
    assert pool.system_allocations == 1 and pool.reuses == 1


def test_trim_gives_free_buffers_back():
    pool = StoragePool()
    pool.alloc(5000)
    assert pool.stats()["free_buffers"] == 1
    assert pool.trim() == size_class(5000)
    assert pool.stats()["held_bytes"] == 0


def test_allocation_past_the_memory_budget_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("RELAYJIT_MEMORY_LIMIT", "1M")
    with pytest.raises(MemoryError, match="the VM's storage for a float32 tensor needs"):
        StoragePool().alloc(8 << 20, "a float32 tensor")
