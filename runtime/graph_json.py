"""Parse and validate TVM's graph JSON into a plan; every malformed field is a ValueError.

Two relayjit additions to TVM's format, both optional:
- attrs["storage_offset"] = ["list_int", [...]]: each entry's byte offset inside its storage
  (0 when absent), a multiple of STORAGE_ALIGNMENT so kernels see aligned buffers;
- op nodes with func_name "__concat": concatenation along an axis that only outer dims of
  size 1 precede, i.e. the inputs' bytes one after another. The planner lays the inputs out
  inside the output's storage (then the node does nothing) or the runtime copies them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .dtypes import dtype_name

NOP = "__nop"
CONCAT = "__concat"
STORAGE_ALIGNMENT = 64


@dataclass(frozen=True)
class OpNode:
    """A tvm_op node: call `func_name` on input entries, writing output entries."""

    nid: int
    name: str
    func_name: str
    inputs: tuple[int, ...]  # entry ids
    outputs: tuple[int, ...]  # entry ids


@dataclass(frozen=True)
class GraphPlan:
    """Everything the executor needs from the JSON, with entries already resolved to ids."""

    input_names: tuple[str, ...]  # arg nodes, in arg_nodes order
    input_entries: tuple[int, ...]
    ops: tuple[OpNode, ...]  # in execution (node) order
    outputs: tuple[int, ...]  # entry ids of the heads
    shapes: tuple[tuple[int, ...], ...]  # per entry
    dtypes: tuple[str, ...]  # per entry
    storage_ids: tuple[int, ...]  # per entry
    storage_offsets: tuple[int, ...]  # per entry: bytes into its storage


def _fail(msg: str) -> ValueError:
    return ValueError(f"graph JSON: {msg}")


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise _fail(f"{what} must be a list, got {type(value).__name__}")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)  # TVM writes num_inputs etc. as strings
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(f"{what} must be an int, got {value!r}")
    return value


def _attr_list(attrs: dict, key: str, kind: str, count: int) -> list:
    if key not in attrs:
        raise _fail(f'attrs has no "{key}"')
    pair = _list(attrs[key], f'attrs["{key}"]')
    if len(pair) != 2 or pair[0] != kind:
        raise _fail(f'attrs["{key}"] must be ["{kind}", [...]], got {pair!r:.80}')
    values = _list(pair[1], f'attrs["{key}"] values')
    if len(values) != count:
        raise _fail(f'attrs["{key}"] has {len(values)} entries, the graph has {count}')
    return values


def parse_graph(graph_json: str | dict) -> GraphPlan:
    """Parse `graph_json` (text or already-decoded dict) into a validated GraphPlan."""
    if isinstance(graph_json, (str, bytes)):
        try:
            graph = json.loads(graph_json)
        except json.JSONDecodeError as err:
            raise _fail(f"not valid JSON: {err}") from err
    else:
        graph = graph_json
    if not isinstance(graph, dict):
        raise _fail(f"top level must be an object, got {type(graph).__name__}")
    for key in ("nodes", "arg_nodes", "heads", "attrs"):
        if key not in graph:
            raise _fail(f'missing "{key}"')
    nodes = _list(graph["nodes"], "nodes")
    row_ptr = _row_ptr(graph, nodes)
    num_entries = row_ptr[-1]

    def entry(ref: Any, what: str) -> int:
        ref = _list(ref, what)
        if len(ref) not in (2, 3):
            raise _fail(f"{what} must be [node_id, index, version], got {ref!r}")
        nid, idx = _int(ref[0], what), _int(ref[1], what)
        if not 0 <= nid < len(nodes) or not 0 <= idx < row_ptr[nid + 1] - row_ptr[nid]:
            raise _fail(f"{what} refers to missing output [{nid}, {idx}]")
        return row_ptr[nid] + idx

    ops = []
    for nid, node in enumerate(nodes):
        if not isinstance(node, dict) or "op" not in node or "name" not in node:
            raise _fail(f"node {nid} must be an object with op and name")
        if node["op"] == "null":
            continue
        if node["op"] != "tvm_op":
            raise _fail(f'node {nid} ({node["name"]}) has op {node["op"]!r}, expected "tvm_op"')
        ops.append(_op_node(nid, node, row_ptr, entry))
    attrs = graph["attrs"]
    if not isinstance(attrs, dict):
        raise _fail("attrs must be an object")
    shapes = tuple(
        tuple(_int(d, f"shape of entry {i}") for d in _list(s, f"shape of entry {i}"))
        for i, s in enumerate(_attr_list(attrs, "shape", "list_shape", num_entries))
    )
    for i, shape in enumerate(shapes):
        if any(d < 0 for d in shape):
            raise _fail(f"entry {i} has negative shape {shape}")
    dtypes = tuple(
        _dtype(d, i) for i, d in enumerate(_attr_list(attrs, "dltype", "list_str", num_entries))
    )
    storage = tuple(
        _int(s, f"storage_id of entry {i}")
        for i, s in enumerate(_attr_list(attrs, "storage_id", "list_int", num_entries))
    )
    if any(s < 0 for s in storage):
        raise _fail(f"storage_id must be >= 0, got {storage}")
    offsets = (0,) * num_entries
    if "storage_offset" in attrs:
        offsets = tuple(
            _int(o, f"storage_offset of entry {i}")
            for i, o in enumerate(_attr_list(attrs, "storage_offset", "list_int", num_entries)))
        bad = [i for i, o in enumerate(offsets) if o < 0 or o % STORAGE_ALIGNMENT]
        if bad:
            raise _fail(f"storage_offset of entry {bad[0]} is {offsets[bad[0]]}; expected a "
                        f"multiple of {STORAGE_ALIGNMENT} >= 0")
    arg_nodes = [_int(a, "arg_nodes item") for a in _list(graph["arg_nodes"], "arg_nodes")]
    for a in arg_nodes:
        if not 0 <= a < len(nodes) or nodes[a]["op"] != "null":
            raise _fail(f"arg_nodes item {a} is not a null (input) node")
    names = tuple(str(nodes[a]["name"]) for a in arg_nodes)
    if len(set(names)) != len(names):
        raise _fail(f"duplicate input names in {names}")
    heads = tuple(
        entry(h, f"heads[{i}]") for i, h in enumerate(_list(graph["heads"], "heads"))
    )
    for op in ops:
        if op.func_name == CONCAT:
            _check_concat(op, shapes, dtypes)
    return GraphPlan(names, tuple(row_ptr[a] for a in arg_nodes), tuple(ops), heads, shapes,
                     dtypes, storage, offsets)


def concat_axis(shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> int | None:
    """The axis along which `shapes` concatenate into `out` as whole byte runs (only outer
    dims of size 1 before it), or None when they do not."""
    if not shapes or not out or any(len(s) != len(out) for s in shapes):
        return None
    differ = [a for a in range(len(out)) if any(s[a] != out[a] for s in shapes)]
    if len(differ) > 1:
        return None
    axis = differ[0] if differ else 0
    if any(d != 1 for d in out[:axis]) or sum(s[axis] for s in shapes) != out[axis]:
        return None
    return axis


def _check_concat(op: OpNode, shapes, dtypes) -> None:
    (out,) = op.outputs if len(op.outputs) == 1 else (None,)
    if out is None or not op.inputs:
        raise _fail(f"node {op.nid} ({op.name}): __concat must have inputs and one output")
    if any(dtypes[e] != dtypes[out] for e in op.inputs) or concat_axis(
            [shapes[e] for e in op.inputs], shapes[out]) is None:
        raise _fail(f"node {op.nid} ({op.name}): __concat of {[shapes[e] for e in op.inputs]} "
                    f"into {shapes[out]} is not a concatenation of whole byte runs (same "
                    f"dtype, one axis, only outer dims of size 1 before it)")


def _row_ptr(graph: dict, nodes: list) -> list[int]:
    """node_row_ptr from the JSON, or computed from each node's num_outputs when absent."""
    if "node_row_ptr" in graph:
        ptr = [_int(p, "node_row_ptr item") for p in _list(graph["node_row_ptr"], "node_row_ptr")]
        if len(ptr) != len(nodes) + 1 or ptr[0] != 0:
            raise _fail(f"node_row_ptr must have {len(nodes) + 1} items starting at 0")
        if any(b < a for a, b in zip(ptr, ptr[1:])):
            raise _fail("node_row_ptr must be non-decreasing")
        return ptr
    ptr = [0]
    for node in nodes:
        outs = 1
        if isinstance(node, dict) and isinstance(node.get("attrs"), dict):
            outs = _int(node["attrs"].get("num_outputs", 1), "num_outputs")
        ptr.append(ptr[-1] + outs)
    return ptr


def _op_node(nid: int, node: dict, row_ptr: list[int], entry: Any) -> OpNode:
    name = str(node["name"])
    attrs = node.get("attrs")
    if not isinstance(attrs, dict) or "func_name" not in attrs:
        raise _fail(f"op node {nid} ({name}) has no attrs.func_name")
    inputs = tuple(
        entry(ref, f"input {i} of node {nid} ({name})")
        for i, ref in enumerate(_list(node.get("inputs", []), f"inputs of node {nid}"))
    )
    if any(e >= row_ptr[nid] for e in inputs):
        raise _fail(f"node {nid} ({name}) reads an entry produced at or after itself")
    num_inputs = _int(attrs.get("num_inputs", len(inputs)), f"num_inputs of node {nid}")
    if num_inputs != len(inputs):
        raise _fail(f"node {nid} ({name}): num_inputs {num_inputs} but {len(inputs)} inputs")
    num_outputs = _int(attrs.get("num_outputs", 1), f"num_outputs of node {nid}")
    if num_outputs != row_ptr[nid + 1] - row_ptr[nid]:
        raise _fail(f"node {nid} ({name}): num_outputs {num_outputs} disagrees with node_row_ptr")
    outputs = tuple(range(row_ptr[nid], row_ptr[nid + 1]))
    func = str(attrs["func_name"])
    if func == NOP and (len(inputs) != 1 or len(outputs) != 1):
        raise _fail(f"node {nid} ({name}): __nop must have one input and one output")
    return OpNode(nid, name, func, inputs, outputs)


def _dtype(value: Any, index: int) -> str:
    try:
        return dtype_name(value)
    except TypeError as err:
        raise _fail(f"entry {index}: {err}") from None
