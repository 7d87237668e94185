"""Complexity guards that do not depend on how busy the machine is.

A test that must stay linear (no quadratic pass over a 10,000-node chain, no exponential
printing of a shared DAG) times the same work at two sizes in this process's CPU time and
compares the ratio with the ratio of the sizes. Wall-clock bounds fail on a loaded machine and
pass a slow algorithm on a fast one; a ratio does neither.
"""
from __future__ import annotations

import time
from typing import Callable


def cpu_seconds(run: Callable[[], object], repeat: int = 3) -> float:
    """The least process CPU time of `repeat` calls of run (the least is the least disturbed)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def assert_scales_linearly(make: Callable[[int], Callable[[], object]], small: int, large: int,
                           slack: float = 2.5, repeat: int = 3) -> None:
    """make(n) gives the work at size n; its CPU time at `large` must stay within `slack` times
    the linear extrapolation from `small` (a quadratic algorithm grows by (large/small)**2)."""
    factor = large / small
    t_small = max(cpu_seconds(make(small), repeat), 1e-4)
    t_large = cpu_seconds(make(large), repeat)
    assert t_large <= slack * factor * t_small, (
        f"size {small} -> {large} ({factor:.0f}x) took {t_small * 1e3:.1f} -> "
        f"{t_large * 1e3:.1f} ms CPU ({t_large / t_small:.1f}x): worse than linear")
