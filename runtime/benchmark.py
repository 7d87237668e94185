"""Timing in TVM's shape: `repeat` measurements, each the mean of `number` calls."""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence


class BenchmarkResult:
    """Per-repeat mean times in seconds, with TVM's summary statistics."""

    def __init__(self, results: Sequence[float]) -> None:
        if not results:
            raise ValueError("BenchmarkResult needs at least one result")
        self.results = list(results)
        self.mean = statistics.fmean(self.results)
        self.median = statistics.median(self.results)
        self.max = max(self.results)
        self.min = min(self.results)
        self.std = statistics.pstdev(self.results)

    def __str__(self) -> str:
        cols = ("mean", "median", "max", "min", "std")
        head = "".join(f"{c + ' (ms)':>14}" for c in cols)
        row = "".join(f"{getattr(self, c) * 1e3:>14.4f}" for c in cols)
        return f"Execution time summary:\n{head}\n{row}\n"

    def __repr__(self) -> str:
        return (
            f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, "
            f"max={self.max}, std={self.std}, results={self.results})"
        )


def time_calls(
    fn: Callable[[], None], repeat: int, number: int, min_repeat_ms: float = 0
) -> BenchmarkResult:
    """Time `fn`: each repeat runs it `number` times, growing `number` to reach min_repeat_ms."""
    for name, value in (("repeat", repeat), ("number", number)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"benchmark: {name} must be an int >= 1, got {value!r}")
    if min_repeat_ms is None:
        min_repeat_ms = 0
    if min_repeat_ms < 0:
        raise ValueError(f"benchmark: min_repeat_ms must be >= 0, got {min_repeat_ms}")
    fn()  # warm-up: first-touch page faults and caches are not what we measure
    results = []
    for _ in range(repeat):
        while True:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= min_repeat_ms:
                break
            per_call_ms = max(elapsed * 1e3 / number, 1e-6)
            number = max(math.ceil(min_repeat_ms / per_call_ms * 1.1), number * 2)
        results.append(elapsed / number)
    return BenchmarkResult(results)
