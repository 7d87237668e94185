"""VirtualMachineProfiler: the time of every kernel a VM program calls (TVM's profiler_vm).

A program with control flow calls a kernel from a loop body many times, at shapes that may
change from one iteration to the next, so the unit of the report is a kernel at one set of
argument shapes: its calls in one invoke summed (a row says how many calls), over `repeat`
invokes; median, min and max are over those invokes, as the graph profiler's are over its
rounds (runtime.debug_executor's ProfileReport, so the CLI prints, writes JSON and traces
both alike). Every kernel call goes through the interpreter here (no native runs), each
timed around the call with its argument checks; the whole run is timed on its own.
"""
from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from typing import Any

from ..debug_executor import NodeProfile, ProfileReport
from ..dtypes import numpy_dtype
from .machine import VirtualMachine

__all__ = ["VirtualMachineProfiler"]


class VirtualMachineProfiler(VirtualMachine):
    """A VirtualMachine that can time each kernel of an invoke (profile)."""

    native_runs = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._times: dict[tuple, list] | None = None  # (kernel, shapes) -> [calls, seconds]

    def _invoke_packed(self, inst: tuple, regs: list) -> None:
        if self._times is None:
            return super()._invoke_packed(inst, regs)
        start = time.perf_counter()
        super()._invoke_packed(inst, regs)
        spent = time.perf_counter() - start
        arrays = [regs[r] for r in inst[3]]
        key = (inst[1], inst[2], tuple((a.shape, a.dtype.name) for a in arrays))
        entry = self._times.setdefault(key, [0, 0.0])
        entry[0] += 1
        entry[1] += spent

    def profile(self, *args: Any, func_name: str = "main", repeat: int = 10,
                **kwargs: Any) -> ProfileReport:
        """Invoke func_name on these arguments `repeat` times timing each kernel (after a
        warm-up invoke, which also compiles what the compile hook specialises), and as many
        times without; rows in order of their first call."""
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"profile: repeat must be an int >= 1, got {repeat!r}")
        self.invoke(func_name, *args, **kwargs)
        rounds: list[dict[tuple, list]] = []
        whole = []
        for _ in range(repeat):  # interleaved, so a noisy moment hits both alike
            self._times = {}
            try:
                self.invoke(func_name, *args, **kwargs)
            finally:
                rounds.append(self._times)
                self._times = None
            start = time.perf_counter()
            self.invoke(func_name, *args, **kwargs)
            whole.append(time.perf_counter() - start)
        per_key: dict[tuple, list[float]] = defaultdict(list)
        calls: dict[tuple, int] = {}
        for times in rounds:
            for key, (n, seconds) in times.items():
                per_key[key].append(seconds)
                calls[key] = n
        for t in per_key.values():  # a kernel some invokes did not call: 0 s in those
            t += [0.0] * (repeat - len(t))
        medians = {key: statistics.median(t) for key, t in per_key.items()}
        total = sum(medians.values()) or 1.0
        rows = tuple(self._row(key, calls[key], per_key[key], medians[key], total)
                     for key in per_key)
        return ProfileReport(rows, statistics.median(whole), repeat, 1)

    def _row(self, key: tuple, calls: int, times: list[float], median: float,
             total: float) -> NodeProfile:
        index, num_outputs, args = key
        name = self.exe.kernels[index].name
        shapes = [shape for shape, _ in args]
        nbytes = sum(math.prod(shape) * _itemsize(dtype) for shape, dtype in args) * calls
        first_output = len(args) - num_outputs
        return NodeProfile(
            name=f"{name} x{calls}" if calls > 1 else name, kernel=name, ops=(),
            input_shapes=tuple(shapes[:first_output]),
            output_shapes=tuple(shapes[first_output:]),
            median=median, min=min(times), max=max(times), share=median / total,
            flops=None, bytes=nbytes)


def _itemsize(dtype: str) -> int:
    return numpy_dtype(dtype).itemsize
