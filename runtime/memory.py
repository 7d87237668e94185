"""Aligned host storage: kernels may use aligned vector loads, so buffers start on 64 bytes."""
from __future__ import annotations

import mmap
import os
from collections.abc import Sequence

import numpy as np

ALIGNMENT = 64
MEMORY_LIMIT_ENV = "RELAYJIT_MEMORY_LIMIT"  # bytes (suffixes K, M, G, T); default: RAM free


def memory_budget() -> int:
    """Bytes a module may allocate: $RELAYJIT_MEMORY_LIMIT, else the memory the system says
    is available (MemAvailable; physical memory where that is unknown)."""
    text = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if text:
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
        unit = scale.get(text[-1].upper(), 1)
        try:
            value = float(text[:-1] if unit > 1 else text)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise ValueError(f"environment variable {MEMORY_LIMIT_ENV} must be a byte count > 0 "
                             f"(optionally with K, M, G or T), got {text!r}")
        return int(value * unit)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 1 << 62  # unknown: no limit


def check_memory(nbytes: int, what: str) -> None:
    """Refuse, before allocating, `nbytes` that exceed memory_budget(), stating both."""
    budget = memory_budget()
    if nbytes > budget:
        raise MemoryError(f"{what} needs {format_bytes(nbytes)}, more than the "
                          f"{format_bytes(budget)} this machine has available (set "
                          f"{MEMORY_LIMIT_ENV} to change the limit)")


def format_bytes(n: int) -> str:
    """n bytes as a short human figure (3.6 TiB)."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


HUGE_PAGE = 2 << 20
HUGE_PAGE_MIN_BYTES = 1 << 20  # aligned_bytes(huge_pages=True) from this size


def _huge_page_bytes(nbytes: int) -> np.ndarray | None:
    """Zeroed anonymous memory on a 2 MB boundary that the kernel is asked to back with
    transparent huge pages (MADV_HUGEPAGE; None where Python cannot ask). With 4 KB pages
    a kernel reading a line from each of hundreds of channel planes misses the TLB on
    most of them (same-process A/B, one thread: ResNet-50 1.3%, Inception-v2 3% faster)."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    size = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    region = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(region, dtype=np.uint8)
    start = (-raw.ctypes.data) % HUGE_PAGE
    try:
        region.madvise(mmap.MADV_HUGEPAGE, start, size)
    except OSError:
        pass  # THP disabled: ordinary pages, still zeroed and aligned
    return raw[start:start + nbytes]


def aligned_bytes(nbytes: int, alignment: int = ALIGNMENT,
                  huge_pages: bool = False) -> np.ndarray:
    """A zeroed uint8 buffer of `nbytes` whose first byte sits on an `alignment` boundary;
    with huge_pages, from HUGE_PAGE_MIN_BYTES on transparent huge pages (for memory kernels
    read over and over, such as a graph's storage: a fresh huge page costs more to fault in,
    which made FoldConstant's many one-off arrays 3x slower)."""
    if nbytes < 0:
        raise ValueError(f"buffer size must be >= 0, got {nbytes}")
    if huge_pages and nbytes >= HUGE_PAGE_MIN_BYTES and alignment <= HUGE_PAGE:
        huge = _huge_page_bytes(nbytes)
        if huge is not None:
            return huge
    raw = np.zeros(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + nbytes]


def aligned_empty(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A zeroed, C-contiguous, 64-byte-aligned array of `shape` and `dtype`."""
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"shape dimensions must be >= 0, got {shape}")
    count = int(np.prod(shape, dtype=np.int64))
    return view_as(aligned_bytes(count * dtype.itemsize), shape, dtype)


def view_as(buffer: np.ndarray, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """View the leading bytes of a uint8 `buffer` as a C-contiguous array of `shape`/`dtype`."""
    shape = tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes > buffer.nbytes:
        raise ValueError(f"buffer of {buffer.nbytes} bytes cannot hold {shape} {dtype.name}")
    return buffer[:nbytes].view(dtype).reshape(shape)


def is_aligned(array: np.ndarray, alignment: int = ALIGNMENT) -> bool:
    """True when `array`'s data starts on an `alignment` boundary."""
    return array.ctypes.data % alignment == 0
