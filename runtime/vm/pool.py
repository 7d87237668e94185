"""StoragePool: where the VM's AllocStorage gets memory, so a steady-state run allocates nothing.

A storage is a 64-byte-aligned uint8 buffer leased from the pool. Its lifetime is Python's
reference count: the lease is a fresh ndarray over the pooled buffer, every tensor the VM
places in it is a view of the lease (numpy keeps the lease as the views' base), and a
weak reference's callback on the lease puts the buffer back on the free list the moment the last
register, tuple, closure or user-held output letting go of it drops. The compiler emits
KillRegister after a value's last use, so within a run a buffer comes back as soon as the
program is done with it and the next allocation of its size class reuses it; across runs at
a repeated shape every allocation is served from the free list.

Sizes are rounded up to a size class (8 classes per power of two above 4 KiB, multiples of
64 bytes below), so a dynamic shape that changes a little reuses the same buffers, at most
12.5% of the request wasted. New system memory is checked against the memory budget
(runtime.memory.memory_budget) before it is taken: a data-dependent allocation past it is
a MemoryError naming the size, never an out-of-memory kill.
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from ..memory import ALIGNMENT, aligned_bytes, check_memory
from .bytecode import STATIC_STORAGE

SMALL = 4096
CLASSES_PER_OCTAVE = 8


def size_class(nbytes: int) -> int:
    """The bytes actually reserved for a request of nbytes (see the module docstring)."""
    if nbytes <= SMALL:
        return max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT)
    octave = 1 << (nbytes.bit_length() - 1)
    step = octave // CLASSES_PER_OCTAVE
    return -(-nbytes // step) * step


class StoragePool:
    """Aligned buffers by size class, leased to the VM and returned when no longer referenced."""

    def __init__(self) -> None:
        self._free: dict[int, list[np.ndarray]] = {}
        # id(weak ref to a live lease) -> (that ref, its buffer, size class)
        self._leases: dict[int, tuple[weakref.ref, np.ndarray, int]] = {}
        self._address: dict[int, int] = {}  # id(buffer the pool owns) -> its address
        self.system_allocations = 0  # buffers taken from the system
        self.reuses = 0  # leases served from the free list
        self.held_bytes = 0  # bytes of all buffers the pool owns (leased or free)
        self.leased_bytes = 0

    def alloc(self, nbytes: int, what: str = "a tensor") -> np.ndarray:
        """A zero-offset uint8 lease of at least nbytes (64-byte aligned), 'what' naming the
        allocation in a MemoryError."""
        return self.alloc_at(nbytes, what)[0]

    def alloc_at(self, nbytes: int, what: str = "a tensor") -> tuple[np.ndarray, int]:
        """(alloc's lease, the address of its first byte), the address known beside it."""
        return self._lease(nbytes, what, np.uint8, None)

    def alloc_tensor(self, nbytes: int, shape: tuple, dtype: np.dtype) -> tuple[np.ndarray, int]:
        """(a tensor of this shape and dtype leasing storage of nbytes of its own, its
        address): one lease viewed as the tensor, as AllocStorage + AllocTensor make it."""
        return self._lease(nbytes, "a tensor", dtype, shape)

    def _lease(self, nbytes: int, what: str, dtype: np.dtype, shape) -> tuple[np.ndarray, int]:
        if nbytes < 0:
            raise ValueError(f"storage for {what}: size must be >= 0 bytes, got {nbytes}")
        size = size_class(nbytes)
        free = self._free.get(size)
        if free:
            buffer = free.pop()
            self.reuses += 1
        else:
            check_memory(size, f"the VM's storage for {what}")
            buffer = aligned_bytes(size, huge_pages=True)
            self._address[id(buffer)] = buffer.ctypes.data
            self.system_allocations += 1
            self.held_bytes += size
        self.leased_bytes += size
        if shape is None:
            lease = np.frombuffer(memoryview(buffer), dtype=np.uint8)
        else:  # the tensor's views keep it (their base), as a storage's tensors keep it
            lease = np.frombuffer(memoryview(buffer), dtype=dtype, count=math.prod(shape))
        ref = weakref.ref(lease, self._release)  # cheaper than weakref.finalize
        self._leases[id(ref)] = (ref, buffer, size)
        return (lease if shape is None else lease.reshape(shape)), self._address[id(buffer)]

    def _release(self, ref: weakref.ref) -> None:
        _, buffer, size = self._leases.pop(id(ref))
        self.leased_bytes -= size
        self._free.setdefault(size, []).append(buffer)

    def trim(self) -> int:
        """Give every free buffer back to the system; returns the bytes freed."""
        freed = sum(len(buffers) * size for size, buffers in self._free.items())
        for buffers in self._free.values():
            for buffer in buffers:
                del self._address[id(buffer)]
        self._free.clear()
        self.held_bytes -= freed
        return freed

    def stats(self) -> dict[str, int]:
        """Counters: system allocations, reuses, bytes held and leased."""
        return {"system_allocations": self.system_allocations, "reuses": self.reuses,
                "held_bytes": self.held_bytes, "leased_bytes": self.leased_bytes,
                "free_buffers": sum(len(b) for b in self._free.values())}


def static_storages(functions) -> list[dict[int, np.ndarray]]:
    """Per function, {pc of a StaticStorage: its buffer}: one arena for all of them, taken once
    per VirtualMachine (checked against the memory budget first), each buffer 64-byte aligned."""
    sizes = [{pc: -(-inst[1] // ALIGNMENT) * ALIGNMENT for pc, inst in enumerate(f.code)
              if inst[0] == STATIC_STORAGE} for f in functions]
    total = sum(sum(s.values()) for s in sizes)
    check_memory(total, f"the VM's static storage ({sum(map(len, sizes))} buffers)")
    arena = aligned_bytes(total, huge_pages=True)
    out, at = [], 0
    for per_function in sizes:
        buffers = {}
        for pc, n in per_function.items():
            buffers[pc] = arena[at:at + n]
            at += n
        out.append(buffers)
    return out
