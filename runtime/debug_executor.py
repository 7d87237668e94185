"""The debug (profiling) executor: where a run's time goes, node by node.

TVM's tvm.contrib.debugger.debug_executor shape: `create(graph_json, lib, dev)` returns a
GraphModuleDebug, a GraphModule that can also time every graph node. `profile()` runs the
graph once (warm-up), then `repeat` rounds; each round calls every node's kernel `number`
times back to back, nodes in execution order, so machine noise hits all nodes alike. A node's
time is the median over rounds of its per-call mean; the whole run is timed the same way
for comparison (the node times add up to it, less the per-call Python overhead).

Each row names the kernel, the Relay ops fused into it (the graph JSON's "relay_ops" node
attribute), its shapes, and a rate: GFLOP/s when the graph records the kernel's FLOPs (the
"flops" attribute, from the op registry's cost of conv, dense and matmul), else GB/s of the
bytes the kernel reads and writes.
"""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any

from .device import Device
from .dtypes import numpy_dtype
from .graph_executor import GraphModule
from .graph_json import GraphPlan, OpNode
from .graph_runtime import GraphExecutor
from .library import KernelLibrary

__all__ = ["create", "GraphModuleDebug", "NodeProfile", "ProfileReport"]

# Aim for rounds of at least this long, so timer resolution and scheduling jitter stay small.
_ROUND_SECONDS = 0.02
_MAX_NUMBER = 1000


def create(graph_json_str: str, libmod: KernelLibrary, device: Device | list,
           dump_root: str | None = None) -> GraphModuleDebug:
    """A GraphModuleDebug running `graph_json_str` with `libmod` on `device` (dump_root is
    accepted for TVM compatibility; nothing is dumped)."""
    if isinstance(device, (list, tuple)):
        if len(device) != 1:
            raise ValueError(f"create: expected one device, got {device}")
        device = device[0]
    return GraphModuleDebug(GraphExecutor(graph_json_str, libmod, device))


@dataclass(frozen=True)
class NodeProfile:
    """One graph node's timing; times in seconds."""

    name: str
    kernel: str
    ops: tuple[str, ...]  # Relay ops fused into the kernel, in execution order
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    median: float
    min: float
    max: float
    share: float  # of the sum of all node medians
    flops: int | None  # None when the cost of the fused ops is unknown
    bytes: int  # read and written by one call

    @property
    def gflops(self) -> float | None:
        """GFLOP/s at the median time, when the FLOPs are known."""
        return self.flops / self.median / 1e9 if self.flops is not None and self.median else None

    @property
    def gbytes_per_second(self) -> float | None:
        """GB/s of the bytes the kernel reads and writes, at the median time."""
        return self.bytes / self.median / 1e9 if self.median else None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kernel": self.kernel, "ops": list(self.ops),
                "input_shapes": [list(s) for s in self.input_shapes],
                "output_shapes": [list(s) for s in self.output_shapes],
                "median_ms": self.median * 1e3, "min_ms": self.min * 1e3,
                "max_ms": self.max * 1e3, "share": self.share, "flops": self.flops,
                "gflops_per_s": self.gflops, "bytes": self.bytes,
                "gbytes_per_s": self.gbytes_per_second}


@dataclass(frozen=True)
class ProfileReport:
    """Per-node times (execution order) beside the whole run's, and how they were measured."""

    nodes: tuple[NodeProfile, ...]
    whole_run: float  # median seconds of one run() (the native loop)
    repeat: int
    number: int

    @property
    def total(self) -> float:
        """Sum of the node medians, in seconds."""
        return sum(n.median for n in self.nodes)

    def sorted(self) -> list[NodeProfile]:
        """Nodes, slowest first."""
        return sorted(self.nodes, key=lambda n: -n.median)

    def table(self, sort: bool = True, top: int | None = None) -> str:
        """A fixed-width text table (slowest first unless sort=False), with the totals."""
        rows = self.sorted() if sort else list(self.nodes)
        shown = rows[:top] if top else rows
        head = (f"{'node':<40} {'fused ops':<44} {'median ms':>10} {'min..max ms':>17} "
                f"{'share':>6} {'rate':>13}  shapes (in -> out)")
        lines = [head, "-" * len(head)]
        for n in shown:
            spread = f"{n.min * 1e3:.4f}..{n.max * 1e3:.4f}"
            rate = (f"{n.gflops:8.2f} GF/s" if n.gflops is not None else
                    f"{n.gbytes_per_second:8.2f} GB/s" if n.gbytes_per_second is not None else "")
            shapes = f"{_shapes(n.input_shapes)} -> {_shapes(n.output_shapes)}"
            name = n.name.removeprefix("tvmgen_default_")
            lines.append(f"{_cut(name, 40):<40} {_cut(', '.join(n.ops), 44):<44} "
                         f"{n.median * 1e3:>10.4f} {spread:>17} {n.share * 100:>5.1f}% "
                         f"{rate:>13}  {shapes}")
        if len(shown) < len(rows):
            lines.append(f"... {len(rows) - len(shown)} more nodes")
        lines.append(f"sum of {len(rows)} nodes {self.total * 1e3:.3f} ms; whole run "
                     f"{self.whole_run * 1e3:.3f} ms (median of {self.repeat} rounds, "
                     f"{self.number} calls each)")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: nodes (execution order), total_ms, whole_run_ms, repeat, number."""
        return {"nodes": [n.as_dict() for n in self.nodes], "total_ms": self.total * 1e3,
                "whole_run_ms": self.whole_run * 1e3, "repeat": self.repeat,
                "number": self.number}

    def json(self) -> str:
        """as_dict() as JSON text (TVM's Report.json)."""
        return json.dumps(self.as_dict(), indent=2)

    def chrome_trace(self) -> dict[str, Any]:
        """A Chrome / Perfetto trace (open in ui.perfetto.dev or chrome://tracing): one
        complete ("ph": "X") event per node laid end to end at its median time; "ts" and
        "dur" in microseconds; "args" holds kernel, ops, shapes and spread."""
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 1, "tid": 1,
             "args": {"name": "relayjit graph run (node medians)"}}]
        start = 0.0
        for n in self.nodes:
            events.append({
                "name": n.name, "cat": "kernel", "ph": "X", "pid": 1, "tid": 1,
                "ts": start * 1e6, "dur": n.median * 1e6,
                "args": {"kernel": n.kernel, "ops": ",".join(n.ops),
                         "input_shapes": str(_shapes(n.input_shapes)),
                         "output_shapes": str(_shapes(n.output_shapes)),
                         "min_ms": n.min * 1e3, "max_ms": n.max * 1e3,
                         "share": n.share}})
            start += n.median
        return {"traceEvents": events, "displayTimeUnit": "ms"}


def _shapes(shapes: tuple[tuple[int, ...], ...]) -> str:
    return ", ".join("x".join(map(str, s)) or "scalar" for s in shapes)


def _cut(text: str, width: int) -> str:
    """`text` in `width` characters, eliding the middle (node names differ at their end)."""
    if len(text) <= width:
        return text
    tail = width // 3
    return text[:width - tail - 3] + "..." + text[-tail:]


class GraphModuleDebug(GraphModule):
    """A GraphModule that can also time each graph node (TVM's GraphModuleDebug)."""

    def run_individual(self, number: int, repeat: int = 1) -> list[float]:
        """Mean seconds per call of each executed node (execution order), over `repeat`
        rounds of `number` calls each."""
        _check_count("number", number)
        _check_count("repeat", repeat)
        rounds = [self._ex.time_steps(number) for _ in range(repeat)]
        return [statistics.fmean(times) for times in zip(*rounds)]

    def profile(self, repeat: int = 10, number: int | None = None,
                **input_dict: Any) -> ProfileReport:
        """Set `input_dict`, then time every node and the whole run (see the module doc).

        number (calls per node per round) defaults to enough for a round of ~20 ms.
        """
        _check_count("repeat", repeat)
        if input_dict:
            self.set_input(**input_dict)
        self.run()  # warm-up; also makes the outputs readable afterwards
        if number is None:
            start = time.perf_counter()
            self._ex.run()
            once = max(time.perf_counter() - start, 1e-7)
            number = min(_MAX_NUMBER, max(1, math.ceil(_ROUND_SECONDS / once)))
        _check_count("number", number)
        node_rounds, whole_rounds = [], []
        for _ in range(repeat):  # interleaved, so a noisy moment hits both alike
            node_rounds.append(self._ex.time_steps(number))
            start = time.perf_counter()
            for _ in range(number):
                self._ex.run()
            whole_rounds.append((time.perf_counter() - start) / number)
        per_node = list(zip(*node_rounds))
        medians = [statistics.median(t) for t in per_node]
        total = sum(medians) or 1.0
        ops = {op.name: op for op in self._ex.plan.ops}
        attrs = _node_attrs(self._ex)
        nodes = tuple(
            _node_profile(self._ex.plan, ops[step[2]], attrs, times, med / total)
            for step, times, med in zip(self._ex.steps, per_node, medians))
        return ProfileReport(nodes, statistics.median(whole_rounds), repeat, number)


def _node_profile(plan: GraphPlan, op: OpNode, node_attrs: list[dict],
                  times: tuple[float, ...], share: float) -> NodeProfile:
    attrs = node_attrs[op.nid]
    flops = attrs.get("flops")
    nbytes = sum(math.prod(plan.shapes[e]) * numpy_dtype(plan.dtypes[e]).itemsize
                 for e in op.inputs + op.outputs)
    return NodeProfile(
        name=op.name, kernel=op.func_name,
        ops=tuple(o for o in str(attrs.get("relay_ops", "")).split(",") if o),
        input_shapes=tuple(tuple(plan.shapes[e]) for e in op.inputs),
        output_shapes=tuple(tuple(plan.shapes[e]) for e in op.outputs),
        median=statistics.median(times), min=min(times), max=max(times), share=share,
        flops=int(flops) if flops is not None else None, bytes=nbytes)


def _node_attrs(ex: GraphExecutor) -> list[dict]:
    """Each graph node's attrs (the plan keeps only what running needs)."""
    return [node.get("attrs") or {} for node in json.loads(ex.graph_json)["nodes"]]


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"profile: {name} must be an int >= 1, got {value!r}")
