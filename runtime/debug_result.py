"""What a debug-executor run leaves behind (TVM's debug_result.DebugResult): every graph node's
outputs, copied as the run reached it (the memory plan reuses buffers, so the final storage
no longer holds them), and the dump folder TVM's tools read:
<dump_root>/_tvmdbg_device_CPU_0/ with _tvmdbg_graph_dump.json, output_tensors.params (keys
"<node>____topo-index:<i>____output-num:<j>") and _tvmdbg_execution_trace.json."""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from .ndarray import NDArray, array
from .params import save_param_dict

DEVICE_FOLDER = "_tvmdbg_device_CPU_0"


def output_key(name: str, index: int, output: int) -> str:
    """TVM's key of a node output: node names are not unique, the index makes them so."""
    return f"{name}____topo-index:{index}____output-num:{output}"


class DebugResult:
    """The graph's nodes, their outputs from the last run and per-node times."""

    def __init__(self, graph_json: str, dump_path: str | None) -> None:
        self.graph_json = graph_json
        self.nodes: list[dict[str, Any]] = json.loads(graph_json)["nodes"]
        self.dump_path = dump_path
        self.outputs: dict[int, list[np.ndarray]] = {}  # node index -> its output arrays
        self.times: list[tuple[str, float]] = []  # (node name, seconds) in execution order

    def get_graph_nodes(self) -> list[dict[str, Any]]:
        return self.nodes

    def node_index(self, node: int | str) -> int:
        """A node's index in the graph JSON from its index or name."""
        if isinstance(node, str):
            for i, graph_node in enumerate(self.nodes):
                if graph_node["name"] == node:
                    return i
            raise ValueError(f"debug_get_output: no node named {node!r} in this graph")
        if isinstance(node, bool) or not isinstance(node, (int, np.integer)):
            raise TypeError(f"debug_get_output: expected a node index or name, got "
                            f"{type(node).__name__}")
        if not 0 <= node < len(self.nodes):
            raise IndexError(f"debug_get_output: node {node} out of range; the graph has "
                             f"{len(self.nodes)} nodes")
        return int(node)

    def get_output_tensors(self) -> dict[str, NDArray]:
        """Every node output of the last run, under TVM's keys."""
        return {output_key(self.nodes[i]["name"], i, j): array(value)
                for i, values in sorted(self.outputs.items()) for j, value in enumerate(values)}

    def dump(self) -> None:
        """Write the graph, the node outputs and a Chrome trace into dump_path (if set)."""
        if self.dump_path is None:
            return
        os.makedirs(self.dump_path, mode=0o700, exist_ok=True)
        with open(os.path.join(self.dump_path, "_tvmdbg_graph_dump.json"), "w") as f:
            f.write(self.graph_json)
        with open(os.path.join(self.dump_path, "output_tensors.params"), "wb") as f:
            f.write(save_param_dict(self.get_output_tensors()))
        events, start = [], 0.0
        for name, seconds in self.times:
            events.append({"name": name, "cat": "kernel", "ph": "X", "pid": 1, "tid": 1,
                           "ts": start * 1e6, "dur": seconds * 1e6})
            start += seconds
        with open(os.path.join(self.dump_path, "_tvmdbg_execution_trace.json"), "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
