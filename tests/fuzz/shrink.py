"""Shrinking a failing ONNX case to a minimal graph, and saving the repro.

Candidates, tried greedily until none still fails the same way (or the time is up):

1. keep a single graph output (the failing one first), dropping the nodes it does not need;
2. cut a node: its outputs that later nodes read become graph inputs, fed with the values
   the reference computed for them, so the rest of the graph sees exactly what it saw;
3. bypass a node: later nodes read one of its inputs (same shape and dtype) instead.

"The same way" is the same status and, for exceptions, the same exception type; the
predicate runs every candidate in the worker, so a candidate that crashes or hangs is
judged like any case.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from .generate import describe
from .reference import run_reference


def _types(model: onnx.ModelProto) -> dict:
    out = {}
    for info in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        out[info.name] = info
    return out


def _rebuild(model: onnx.ModelProto, nodes: list, inputs: list, outputs: list) -> onnx.ModelProto:
    """A copy with these nodes / input and output ValueInfos, dead nodes and unused
    inputs/initializers dropped."""
    needed = {o.name for o in outputs}
    kept = []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(i for i in node.input if i)
    kept.reverse()
    new = onnx.ModelProto()
    new.CopyFrom(model)
    graph = new.graph
    del graph.node[:]
    graph.node.extend(kept)
    del graph.input[:]
    graph.input.extend([i for i in inputs if i.name in needed])
    del graph.output[:]
    graph.output.extend(outputs)
    inits = [t for t in model.graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    produced = {o for n in kept for o in n.output}
    keep_info = [v for v in graph.value_info if v.name in produced]
    del graph.value_info[:]
    graph.value_info.extend(keep_info)
    return new


def _value_info(name: str, value: np.ndarray):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype),
                                         value.shape)


def _feeds(model: onnx.ModelProto, values: dict) -> dict:
    return {i.name: values[i.name] for i in model.graph.input}


def _valid(model: onnx.ModelProto) -> bool:
    if not model.graph.node or not model.graph.output:
        return False
    produced = {o for n in model.graph.node for o in n.output}
    if any(o.name not in produced for o in model.graph.output):
        return False
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception:  # noqa: BLE001 - an invalid candidate is simply not taken
        return False
    return True


def candidates(model: onnx.ModelProto, values: dict, first_output: str | None = None):
    """(model, needs_new_values) candidates, smallest changes to the graph's size first."""
    graph = model.graph
    nodes, inputs, outputs = list(graph.node), list(graph.input), list(graph.output)
    if len(outputs) > 1:
        order = sorted(outputs, key=lambda o: o.name != first_output)
        for out in order:
            yield _rebuild(model, nodes, inputs, [out]), False
    for index in reversed(range(len(nodes))):
        node = nodes[index]
        rest = nodes[:index] + nodes[index + 1:]
        read = {i for n in rest for i in n.input}
        outs = [o for o in outputs if o.name not in node.output]
        if len(outs) < len(outputs):  # it computed an output: expose what it read instead
            made = {o for n in rest for o in n.output}
            shown = {o.name for o in outs}
            for name in node.input:
                if name in made and name in values and name not in shown:
                    outs.append(_value_info(name, values[name]))
                    shown.add(name)
        new_inputs = list(inputs)
        for name in node.output:
            if name in read and name in values:
                new_inputs.append(_value_info(name, values[name]))
        if outs:
            yield _rebuild(model, rest, new_inputs, outs), False
        # bypass: readers of the output read a same-typed input instead
        if len(node.output) == 1 and node.output[0] in values:
            out = values[node.output[0]]
            for src in node.input:
                if src and src in values and values[src].shape == out.shape \
                        and values[src].dtype == out.dtype:
                    renamed = []
                    for n in rest:
                        copy = onnx.NodeProto()
                        copy.CopyFrom(n)
                        for k, name in enumerate(copy.input):
                            if name == node.output[0]:
                                copy.input[k] = src
                        renamed.append(copy)
                    new_outs = []
                    for o in outputs:
                        if o.name == node.output[0]:
                            continue
                        new_outs.append(o)
                    if new_outs:
                        yield _rebuild(model, renamed, inputs, new_outs), True
                    break


def shrink(model: onnx.ModelProto, feeds: dict, fails: Callable[[onnx.ModelProto, dict], bool],
           budget_s: float = 60.0, first_output: str | None = None) -> tuple:
    """The smallest model (and its feeds) found that still fails; also the number of tries."""
    deadline = time.perf_counter() + budget_s
    values = {**feeds, **run_reference(model, feeds, intermediate=True)}
    tries = 0
    progress = True
    while progress and time.perf_counter() < deadline:
        progress = False
        for cand, fresh in candidates(model, values, first_output):
            if time.perf_counter() > deadline:
                break
            if not _valid(cand):
                continue
            cand_values = values
            if fresh:
                try:
                    cand_values = {**values, **run_reference(cand, _feeds(cand, values),
                                                             intermediate=True)}
                except Exception:  # noqa: BLE001
                    continue
            tries += 1
            if fails(cand, _feeds(cand, cand_values)):
                model, values, progress = cand, cand_values, True
                break
    return model, _feeds(model, values), tries


def failing_output(detail: str) -> str | None:
    match = re.search(r"output '([^']+)'", detail or "")
    return match.group(1) if match else None


def one_line(result: dict, model: onnx.ModelProto) -> str:
    """The repro's description: status, where, the nodes, what differs."""
    ops = " -> ".join(n.op_type for n in model.graph.node)
    detail = re.sub(r"\s+", " ", result.get("detail", ""))[:400]
    return f"{result['status']}: [{ops}] (opset {_opset(model)}) {detail}"


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def save_repro(directory: Path, stem: str, model: onnx.ModelProto, feeds: dict,
               result: dict, extra: dict | None = None) -> Path:
    """<stem>.onnx, <stem>.npz (the feeds), <stem>.txt (one line), <stem>.json (details)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.onnx"
    onnx.save(model, path)
    np.savez(directory / f"{stem}.npz", **feeds)
    (directory / f"{stem}.txt").write_text(one_line(result, model) + "\n")
    info = {"result": {k: v for k, v in result.items() if k != "stderr"},
            "graph": describe(model).splitlines(), **(extra or {})}
    if result.get("stderr"):
        info["stderr_tail"] = result["stderr"][-2000:]
    (directory / f"{stem}.json").write_text(json.dumps(info, indent=1, default=str))
    return path
