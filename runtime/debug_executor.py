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

import csv
import io
import json
import math
import os
import shutil
import statistics
import time
from dataclasses import dataclass
from typing import Any

from .benchmark import BenchmarkResult, time_calls
from .debug_result import DEVICE_FOLDER, DebugResult
from .device import Device
from .dtypes import numpy_dtype
from .graph_executor import _HAS_RUN, GraphModule, executor_with_library_params
from .graph_json import GraphPlan, OpNode
from .graph_runtime import GraphExecutor
from .library import KernelLibrary
from .ndarray import NDArray, array

__all__ = ["create", "GraphModuleDebug", "NodeProfile", "ProfileReport"]

# Aim for rounds of at least this long, so timer resolution and scheduling jitter stay small.
_ROUND_SECONDS = 0.02
_MAX_NUMBER = 1000


def create(graph_json_str: str, libmod: KernelLibrary, device: Device | list,
           dump_root: str | None = None) -> GraphModuleDebug:
    """A GraphModuleDebug running `graph_json_str` with `libmod` on `device`; with dump_root,
    each run() writes the graph, every node's outputs and a trace there (debug_result)."""
    device = _one_device(device)
    return GraphModuleDebug(executor_with_library_params(graph_json_str, libmod, device),
                            dump_root=dump_root)


def _one_device(device: Device | list) -> Device:
    if isinstance(device, (list, tuple)):
        if len(device) != 1:
            raise ValueError(f"create: expected one device, got {device}")
        device = device[0]
    return device


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

    def aggregated(self) -> list[NodeProfile]:
        """One row per distinct fused-op list (TVM's aggregate): times and bytes summed over
        the nodes that run it, named by the ops and the node count."""
        groups: dict[tuple[str, ...], list[NodeProfile]] = {}
        for n in self.nodes:
            groups.setdefault(n.ops or (n.kernel,), []).append(n)
        rows = []
        for ops, nodes in groups.items():
            flops = [n.flops for n in nodes]
            rows.append(NodeProfile(
                name=f"{', '.join(ops)} (x{len(nodes)})", kernel=nodes[0].kernel, ops=ops,
                input_shapes=nodes[0].input_shapes, output_shapes=nodes[0].output_shapes,
                median=sum(n.median for n in nodes), min=sum(n.min for n in nodes),
                max=sum(n.max for n in nodes), share=sum(n.share for n in nodes),
                flops=None if None in flops else sum(flops), bytes=sum(n.bytes for n in nodes)))
        return rows

    def table(self, sort: bool = True, top: int | None = None, aggregate: bool = False,
              col_sums: bool = True) -> str:
        """A fixed-width text table (slowest first unless sort=False), with the totals
        (col_sums); aggregate=True gives one row per fused-op list, as TVM's Report.table."""
        rows = self.aggregated() if aggregate else list(self.nodes)
        rows = sorted(rows, key=lambda n: -n.median) if sort else rows
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
        if col_sums:
            lines.append(f"sum of {len(self.nodes)} nodes {self.total * 1e3:.3f} ms; whole "
                         f"run {self.whole_run * 1e3:.3f} ms (median of {self.repeat} rounds, "
                         f"{self.number} calls each)")
        return "\n".join(lines)

    def csv(self) -> str:
        """One CSV row per node (execution order), as TVM's Report.csv."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["name", "kernel", "ops", "median_ms", "min_ms", "max_ms", "share",
                         "flops", "bytes", "input_shapes", "output_shapes"])
        for n in self.nodes:
            writer.writerow([n.name, n.kernel, ";".join(n.ops), f"{n.median * 1e3:.6f}",
                             f"{n.min * 1e3:.6f}", f"{n.max * 1e3:.6f}", f"{n.share:.6f}",
                             "" if n.flops is None else n.flops, n.bytes,
                             _shapes(n.input_shapes), _shapes(n.output_shapes)])
        return out.getvalue()

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
    """A GraphModule that can also time each graph node and keep each node's outputs
    (TVM's GraphModuleDebug). TVM's constructor form (module, device, graph_json_str,
    dump_root) is accepted; the module already knows its device and graph."""

    def __init__(self, module: GraphExecutor | GraphModule, device: Any = None,
                 graph_json_str: str | None = None, dump_root: str | None = None) -> None:
        super().__init__(module)
        if device is not None and _one_device(device) != self._ex.device:
            raise ValueError(f"GraphModuleDebug: device {device} is not the module's "
                             f"({self._ex.device})")
        if graph_json_str is not None and graph_json_str != self._ex.graph_json:
            raise ValueError("GraphModuleDebug: graph_json_str differs from the module's graph")
        self._dump_root = dump_root
        path = os.path.join(dump_root, DEVICE_FOLDER) if dump_root is not None else None
        self.debug_datum = DebugResult(self._ex.graph_json, path)

    def run(self, **input_dict: Any) -> None:
        """Run node by node, keeping every node's outputs (debug_get_output) and time; with
        a dump_root, write them there."""
        if input_dict:
            self.set_input(**input_dict)
        self._ex.check_inputs_set()
        ex, datum = self._ex, self.debug_datum
        steps_of: dict[str, list[int]] = {}
        for i, (_, _, name) in enumerate(ex.steps):
            steps_of.setdefault(name, []).append(i)
        datum.outputs, datum.times = {}, []
        for name, entry in zip(ex.plan.input_names, ex.plan.input_entries):
            datum.outputs[datum.node_index(name)] = [ex.entries[entry].copy()]
        for op in ex.plan.ops:
            start = time.perf_counter()
            for i in steps_of.get(op.name, ()):
                ex.run_step(i)
            datum.times.append((op.name, time.perf_counter() - start))
            datum.outputs[op.nid] = [ex.entries[e].copy() for e in op.outputs]
        _HAS_RUN.add(ex)
        datum.dump()

    def debug_get_output(self, node: int | str, out: NDArray | None = None) -> NDArray:
        """Output 0 of graph node `node` (index or name) from the last run()."""
        index = self.debug_datum.node_index(node)
        values = self.debug_datum.outputs.get(index)
        if values is None:
            raise RuntimeError(f"debug_get_output({node!r}): run() has not been called on "
                               "this debug module yet")
        return out.copyfrom(values[0]) if out is not None else array(values[0])

    def run_individual(self, number: int, repeat: int = 1, min_repeat_ms: float = 0,
                       limit_zero_time_iterations: int = 100, cooldown_interval_ms: float = 0,
                       repeats_to_cooldown: int = 1) -> list[float]:
        """Mean seconds per call of each executed node (execution order), over `repeat`
        rounds of `number` calls each (more calls while a round is under min_repeat_ms).
        The cooldown and zero-time arguments are accepted; rounds run back to back."""
        _check_count("number", number)
        _check_count("repeat", repeat)
        self._ex.check_inputs_set()
        rounds = []
        for _ in range(repeat):
            calls = number
            while True:
                start = time.perf_counter()
                times = self._ex.time_steps(calls)
                elapsed_ms = (time.perf_counter() - start) * 1e3
                if elapsed_ms >= (min_repeat_ms or 0) or calls >= _MAX_NUMBER * number:
                    break
                calls *= 2
            rounds.append(times)
        return [statistics.fmean(times) for times in zip(*rounds)]

    def run_individual_node(self, index: int, number: int = 10, repeat: int = 1,
                            min_repeat_ms: float = 0, **_cooldown: Any) -> BenchmarkResult:
        """Time graph node `index` (its graph JSON index) alone, as TVM's."""
        node = self.debug_datum.node_index(index)
        steps = [i for i, (_, _, name) in enumerate(self._ex.steps)
                 if name == self.debug_datum.nodes[node]["name"]]
        if not steps:
            raise ValueError(f"run_individual_node({index}): node "
                             f"{self.debug_datum.nodes[node]['name']!r} runs no kernel")
        self._ex.check_inputs_set()

        def call() -> None:
            for i in steps:
                self._ex.run_step(i)
        return time_calls(call, repeat, number, min_repeat_ms or 0)

    def exit(self) -> None:
        """Delete the dump folder (TVM's exit)."""
        if self._dump_root is not None and os.path.isdir(self._dump_root):
            shutil.rmtree(self._dump_root)

    def profile(self, repeat: int = 10, number: int | None = None,
                **input_dict: Any) -> ProfileReport:
        """Set `input_dict`, then time every node and the whole run (see the module doc).

        number (calls per node per round) defaults to enough for a round of ~20 ms.
        """
        _check_count("repeat", repeat)
        if input_dict:
            self.set_input(**input_dict)
        GraphModule.run(self)  # warm-up; also makes the outputs readable afterwards
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
