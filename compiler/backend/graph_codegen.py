"""Graph codegen: turn a fused `main` into TVM's graph JSON, with static memory planning.

Input: `main` after FuseOps and InferType, in which every computation is a call of a
Primitive function (the function itself, or after ToANormalForm a let-bound variable holding
it, looked through as TVM's LowerTE does), plus a map from each such function (by identity)
to the kernel name it was compiled to ("__nop" for reshape-only functions). Output: the graph
JSON text, the params (lifted constants) and memory statistics.

Node layout (what runtime.graph_json parses): one "null" node per main parameter (in order),
then, in post-DFS order of the body, one "null" node per distinct constant (named p0, p1,
...; the same constant object always gets the same name) and one "tvm_op" node per call.
Tuples and TupleGetItem only route entries; `let` binds its variable to the value's
entries. A main result that is an input or a constant is a head pointing at that input.

Memory planning: compiler.backend.memory_plan, given each op node as a step (a "__nop" as a
VIEW, a "__concat" as a CONCAT, a kernel with the outputs its library says it may write in
place), the graph inputs and constants as external tensors and the heads as results. The
storage ids and the offsets (attrs "storage_offset", where a concatenation's inputs lie
inside its output) go into the JSON.

Concatenations without copies (relayjit's addition): a primitive function that only
concatenates whole byte runs (is_byte_concat) compiles no kernel and becomes a "__concat"
node; where the memory plan lays its inputs out inside its output, the node does nothing at
run time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from compiler.backend.memory_plan import Step, StepKind, StoragePlan, plan_memory
from compiler.errors import CompilerError
from compiler.ir.expr import (Call, Constant, Function, Let, Op, RelayExpr, Tuple,
                              TupleGetItem, Var)
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType, TupleType, Type
from compiler.op.registry import get_def
from runtime.graph_json import CONCAT, NOP, concat_axis

__all__ = ["GraphCodegen", "GraphCodegenResult", "NOP", "CONCAT", "flatten_tensor_types",
           "function_calls", "is_byte_concat"]

# how the memory plan sees an op node (kernels: KERNEL)
_STEP_KIND = {NOP: StepKind.VIEW, CONCAT: StepKind.CONCAT}


def is_byte_concat(func: Function) -> bool:
    """Whether a primitive function only concatenates its parameters, in order, along an axis
    that only outer dims of size 1 precede: its output is their bytes one after another, so
    it runs as "__concat" (laid out in place by the memory plan, else copied), no kernel."""
    body = func.body
    if type(body) is not Call or not isinstance(body.op, Op) or \
            body.op.name != "concatenate" or len(body.args) != 1:
        return False
    arg = body.args[0]
    fields = list(arg.fields) if type(arg) is Tuple else [arg]
    if fields != list(func.params) or any(type(f) is not Var for f in fields):
        return False
    try:
        ins = [t for p in func.params
               for t in flatten_tensor_types(p.checked_type, "concatenate input")]
    except CompilerError:
        return False
    out = body.checked_type
    return isinstance(out, TensorType) and all(t.dtype == out.dtype for t in ins) and \
        concat_axis([tuple(t.shape) for t in ins], tuple(out.shape)) is not None


def flatten_tensor_types(ty: Type, where: str) -> list[TensorType]:
    """The tensors of a (possibly nested) tuple type, in order."""
    out, stack = [], [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TensorType):
            out.append(t)
        elif isinstance(t, TupleType):
            stack.extend(reversed(t.fields))
        else:
            raise CompilerError(f"graph codegen: {where} has type {t}; expected tensors or "
                                "tuples of tensors (static shapes)")
    return out


def _main_order(main: Function) -> tuple[list, dict]:
    """main's body in post order (not entering functions) and its let var -> value map."""
    order = post_order(main.body, expand=lambda e: not isinstance(e, Function))
    return order, {e.var: e.value for e in order if type(e) is Let}


def _callee(call: Call, let_values: dict) -> RelayExpr:
    """What a call runs: its op, looked through let-bound variables."""
    func = call.op
    while type(func) is Var and func in let_values:
        func = let_values[func]
    return func


def function_calls(main: Function) -> list[tuple[Call, Function]]:
    """Each call in main that runs a function, with that function, in evaluation order."""
    order, let_values = _main_order(main)
    calls = [(node, _callee(node, let_values)) for node in order if type(node) is Call]
    return [(call, func) for call, func in calls if isinstance(func, Function)]


def _nbytes(t: TensorType) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize


def unique_input_names(names: list[str]) -> list[str]:
    """Graph input names, one per parameter: a repeated name hint (four relay.var("w"))
    becomes w, w_1, w_2, ... as TVM makes them unique; set_input by index reaches each."""
    taken = set(names)
    seen: set[str] = set()
    out = []
    for name in names:
        unique, k = name, 0
        while unique in seen or (k and unique in taken):
            k += 1
            unique = f"{name}_{k}"
        seen.add(unique)
        out.append(unique)
    return out


def _fused_op_attrs(func: Function) -> dict[str, str]:
    """Node attrs naming the Relay ops fused into a kernel ("relay_ops", comma-separated, in
    execution order) and, when the registry knows their cost, "flops" (the profiler reads
    both; kernel names are truncated and shared, so they cannot tell)."""
    ops = [n for n in post_order(func.body) if type(n) is Call and isinstance(n.op, Op)]
    attrs = {"relay_ops": ",".join(call.op.name for call in ops)}
    costs = [get_def(call.op.name).flops for call in ops]
    if any(costs):
        attrs["flops"] = str(sum(
            int(cost([a.checked_type for a in call.args], call.attrs, call.checked_type))
            for cost, call in zip(costs, ops) if cost is not None))
    return attrs


@dataclass
class GraphCodegenResult:
    graph_json: str
    params: dict  # name -> NDArray
    memory_stats: dict
    nodes: list = field(default_factory=list)


class GraphCodegen:
    """Builds nodes/entries from main; see the module docstring."""

    def __init__(self, main: Function, kernel_names: dict, in_place: dict | None = None):
        self.main = main
        self.kernel_names = kernel_names  # id(primitive Function) -> name or NOP
        self.in_place = in_place or {}  # kernel name -> runtime.library.InPlace
        self.nodes: list[dict] = []
        self.entry_types: list[TensorType] = []  # per entry id
        self.node_entries: list[list[int]] = []  # node id -> its entry ids
        self.entry_owner: list[tuple[int, int]] = []  # entry id -> (node id, output index)
        self.let_values: dict = {}
        self.expr_entries: dict = {}  # expr -> list of entry ids
        self.params: dict = {}
        self.const_names: dict = {}  # id(Constant) -> name
        self.op_names: dict[str, int] = {}
        self.ops: list[tuple[int, list[int], list[int], str]] = []  # nid, ins, outs, func

    # ---- nodes ------------------------------------------------------------------------
    def _add_node(self, node: dict, types: list[TensorType]) -> list[int]:
        nid = len(self.nodes)
        self.nodes.append(node)
        first = len(self.entry_types)
        self.entry_types.extend(types)
        entries = list(range(first, first + len(types)))
        self.node_entries.append(entries)
        self.entry_owner.extend((nid, k) for k in range(len(types)))
        return entries

    def _input(self, name: str, ty: Type, where: str) -> list[int]:
        types = flatten_tensor_types(ty, where)
        if len(types) != 1:
            raise CompilerError(f"graph codegen: {where} must be a tensor, got {ty}")
        return self._add_node({"op": "null", "name": name, "inputs": []}, types)

    def _unique_op_name(self, name: str) -> str:
        count = self.op_names.get(name, 0)
        self.op_names[name] = count + 1
        return name if count == 0 else f"{name}_{count}"

    def _constant(self, const: Constant, reserved: set) -> list[int]:
        name = self.const_names.get(id(const))
        if name is None:
            k = len(self.params)
            while f"p{k}" in reserved or f"p{k}" in self.params:
                k += 1
            name = f"p{k}"
            self.const_names[id(const)] = name
            self.params[name] = const.data
        return self._input(name, TensorType(const.data.shape, const.data.dtype),
                           f"constant {name}")

    def _call(self, call: Call) -> list[int]:
        func = _callee(call, self.let_values)
        if not isinstance(func, Function) or not func.is_primitive:
            what = getattr(func, "name", type(func).__name__)
            raise CompilerError(f"graph codegen: main calls {what!r} directly; every call must "
                                "be a fused Primitive function (run FuseOps first)")
        kernel = self.kernel_names.get(id(func))
        if kernel is None:
            raise CompilerError("graph codegen: a primitive function has no compiled kernel")
        inputs: list[int] = []
        for arg in call.args:
            inputs.extend(self._entries_of(arg))
        outs = flatten_tensor_types(call.checked_type, f"result of {kernel}")
        if kernel == NOP and (len(inputs) != 1 or len(outs) != 1):
            raise CompilerError(f"graph codegen: a reshape-only function must map one tensor "
                                f"to one tensor, got {len(inputs)} inputs, {len(outs)} outputs")
        if kernel == CONCAT and len(outs) != 1:
            raise CompilerError(f"graph codegen: a concatenation must give one tensor, got "
                                f"{len(outs)}")
        name = self._unique_op_name({NOP: "reshape_nop", CONCAT: "concatenate"}.get(kernel,
                                                                                  kernel))
        node = {"op": "tvm_op", "name": name,
                "attrs": {"func_name": kernel, "flatten_data": "0",
                          "num_inputs": str(len(inputs)), "num_outputs": str(len(outs)),
                          **_fused_op_attrs(func)},
                "inputs": [self._ref(e) for e in inputs]}
        entries = self._add_node(node, outs)
        self.ops.append((len(self.nodes) - 1, inputs, entries, kernel))
        return entries

    def _ref(self, entry: int) -> list[int]:
        nid, index = self.entry_owner[entry]
        return [nid, index, 0]

    # ---- walk -------------------------------------------------------------------------
    def run(self) -> GraphCodegenResult:
        main = self.main
        names = unique_input_names([p.name_hint for p in main.params])
        reserved = set(names)
        for p, name in zip(main.params, names):
            self.expr_entries[p] = self._input(name, p.checked_type, f"input {name!r}")
        arg_nodes = list(range(len(main.params)))
        order, self.let_values = _main_order(main)
        for expr in order:
            kind = type(expr)
            if kind is Constant:
                first = len(self.nodes)
                self.expr_entries[expr] = self._constant(expr, reserved)
                if len(self.nodes) > first:
                    arg_nodes.append(first)
            elif kind is Call:
                self.expr_entries[expr] = self._call(expr)
            elif kind is Tuple:
                self.expr_entries[expr] = [e for f in expr.fields for e in self._entries_of(f)]
            elif kind is TupleGetItem:
                ents = self._entries_of(expr.tuple_value)
                sizes = [len(flatten_tensor_types(t, "tuple field"))
                         for t in expr.tuple_value.checked_type.fields]
                start = sum(sizes[:expr.index])
                self.expr_entries[expr] = ents[start:start + sizes[expr.index]]
            elif kind is Let:
                self.expr_entries[expr] = self._entries_of(expr.body)
            elif kind not in (Var, Function):
                raise CompilerError(f"graph codegen: {kind.__name__} is not supported in main "
                                    "(the graph executor has no control flow)")
        heads = self._entries_of(main.body)
        return self._finish(arg_nodes, heads)

    def _entries_of(self, expr: RelayExpr) -> list[int]:
        """Entries computing expr; a let variable resolves to its value's entries."""
        while expr not in self.expr_entries and type(expr) is Var and expr in self.let_values:
            expr = self.let_values[expr]
        try:
            return self.expr_entries[expr]
        except KeyError:
            raise CompilerError(f"graph codegen: {type(expr).__name__} "
                                f"{getattr(expr, 'name_hint', '')!r} is used but never defined "
                                "(a free variable of main?)") from None

    # ---- memory planning and JSON -----------------------------------------------------
    def _plan(self, arg_nodes: list[int], heads: list[int]) -> tuple[StoragePlan, dict]:
        """The memory plan (compiler.backend.memory_plan) and its memory statistics."""
        sizes = [_nbytes(t) for t in self.entry_types]
        steps = [Step(tuple(ins), tuple(outs), _STEP_KIND.get(func, StepKind.KERNEL),
                      tuple((o - len(ins), q) for o, q in self.in_place.get(func, {}).items()))
                 for _, ins, outs, func in self.ops]
        external = [e for nid in arg_nodes for e in self.node_entries[nid]]
        plan = plan_memory(sizes, steps, external, heads)
        params_bytes = sum(sizes[e] for nid in arg_nodes for e in self.node_entries[nid]
                           if self.nodes[nid]["name"] in self.params)
        stats = {
            "num_storage": len(plan.storage_sizes),
            "intermediate_bytes": plan.internal_bytes,  # peak: the plan holds all at once
            "naive_intermediate_bytes": sum(sizes[e] for _, _, outs, func in self.ops
                                            if func != NOP for e in outs),
            "input_bytes": plan.external_bytes - params_bytes,
            "param_bytes": params_bytes,
            "total_bytes": sum(plan.storage_sizes),
        }
        return plan, stats

    def _finish(self, arg_nodes: list[int], heads: list[int]) -> GraphCodegenResult:
        plan, stats = self._plan(arg_nodes, heads)
        row_ptr = [0]
        for entries in self.node_entries:
            row_ptr.append(row_ptr[-1] + len(entries))
        graph = {
            "nodes": self.nodes,
            "arg_nodes": arg_nodes,
            "heads": [self._ref(e) for e in heads],
            "attrs": {
                "dltype": ["list_str", [t.dtype for t in self.entry_types]],
                "storage_id": ["list_int", list(plan.storage_ids)],
                "shape": ["list_shape", [list(t.shape) for t in self.entry_types]],
                **({"storage_offset": ["list_int", list(plan.offsets)]}
                   if any(plan.offsets) else {}),
            },
            "node_row_ptr": row_ptr,
        }
        return GraphCodegenResult(json.dumps(graph, indent=2), dict(self.params), stats,
                                  self.nodes)

