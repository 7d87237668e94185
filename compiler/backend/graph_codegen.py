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

Memory planning (as TVM's GraphPlanMemory): every entry gets a storage token. Inputs and
constants get their own tokens, never reused. Walking the op nodes in execution order,
each output requests a free token whose size is within a factor 16 of the need (the
smallest big-enough first, else the largest smaller one, which grows), or a new one; after
the node, each input's token drops one reference and returns to the free list at zero. A
"__nop" output takes its input's token. Heads are pinned. The token index is the
storage_id, so two intermediates whose lifetimes do not overlap share one storage.

Outputs written in place (relayjit's addition): where the kernel's library says an output
may share an input's storage (runtime.library.InPlace: a residual added in a conv's
epilogue) and this node is that input's last reader, the output takes the input's token,
as onnxruntime's Conv+Sum writes over the residual: one stream of memory instead of two.

Concatenations without copies (relayjit's addition): a primitive function that only
concatenates whole byte runs (is_byte_concat) compiles no kernel and becomes a "__concat"
node. Where it can, the plan lays its inputs out inside its output (_concat_layout: nested
concatenations, as DenseNet's, inside the outermost one): the group's token is requested by
its first member's producer, holds the references of every member, and each member gets a
byte offset (attrs "storage_offset"); the node then does nothing at run time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import (Call, Constant, Function, Let, Op, RelayExpr, Tuple,
                              TupleGetItem, Var)
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType, TupleType, Type
from compiler.op.registry import get_def
from runtime.graph_json import CONCAT, NOP, STORAGE_ALIGNMENT, concat_axis

__all__ = ["GraphCodegen", "GraphCodegenResult", "NOP", "CONCAT", "flatten_tensor_types",
           "function_calls", "is_byte_concat"]

MATCH_RANGE = 16


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


@dataclass(eq=False)
class _Token:
    size: int
    sid: int
    refs: int = 0
    pinned: bool = False


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
        reserved = {p.name_hint for p in main.params}
        for p in main.params:
            self.expr_entries[p] = self._input(p.name_hint, p.checked_type,
                                               f"input {p.name_hint!r}")
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
    def _plan(self, arg_nodes: list[int], heads: list[int]) -> tuple[list[int], dict]:
        sizes = [_nbytes(t) for t in self.entry_types]
        uses = [0] * len(sizes)
        for _, ins, _, _ in self.ops:
            for e in ins:
                uses[e] += 1
        tokens: list[_Token] = []
        entry_token: list = [None] * len(sizes)
        free: list[_Token] = []

        def new_token(size: int, refs: int, pinned: bool) -> _Token:
            tok = _Token(size, len(tokens), refs, pinned)
            tokens.append(tok)
            return tok

        head_set = set(heads)
        for nid in arg_nodes:
            for e in self.node_entries[nid]:
                entry_token[e] = new_token(sizes[e], uses[e], True)
        inputs = {e for nid in arg_nodes for e in self.node_entries[nid]}
        root, offsets = self._concat_layout(sizes, inputs | head_set)
        members: dict[int, list[int]] = {}
        for e, r in root.items():
            members.setdefault(r, []).append(e)
        for _, ins, outs, func in self.ops:
            if func == NOP:
                tok = entry_token[ins[0]]
                tok.refs += uses[outs[0]]
                tok.pinned = tok.pinned or outs[0] in head_set
                entry_token[outs[0]] = tok
            else:
                for o, q in self.in_place.get(func, {}).items():
                    src, dst = ins[q], outs[o - len(ins)]
                    tok = entry_token[src]
                    if tok.refs == 1 and not tok.pinned and sizes[src] == sizes[dst] \
                            and src not in root and dst not in root and dst not in head_set:
                        tok.refs += uses[dst]  # the output takes over its last input's bytes
                        entry_token[dst] = tok
                for e in outs:
                    if entry_token[e] is not None:  # in place, or in a placed concatenation
                        continue
                    whole = root.get(e, e)
                    group = members.get(whole, [e])
                    tok = self._request(free, sizes[whole], sum(uses[m] for m in group),
                                        new_token)
                    tok.pinned = any(m in head_set for m in group)
                    for m in group:
                        entry_token[m] = tok
            for e in ins:
                tok = entry_token[e]
                tok.refs -= 1
                if tok.refs == 0 and not tok.pinned:
                    free.append(tok)
            for e in outs:  # an output nobody reads is dead right away
                tok = entry_token[e]
                if tok.refs == 0 and not tok.pinned and tok not in free:
                    free.append(tok)
        storage_ids = [entry_token[e].sid for e in range(len(sizes))]
        input_sids = {entry_token[e].sid for nid in arg_nodes for e in self.node_entries[nid]}
        op_entries = [e for _, _, outs, func in self.ops if func != NOP for e in outs]
        inter = sum(t.size for t in tokens if t.sid not in input_sids)
        params_bytes = sum(sizes[e] for nid in arg_nodes for e in self.node_entries[nid]
                           if self.nodes[nid]["name"] in self.params)
        stats = {
            "num_storage": len(tokens),
            "intermediate_bytes": inter,  # peak: the static plan holds all of it at once
            "naive_intermediate_bytes": sum(sizes[e] for e in op_entries),
            "input_bytes": sum(t.size for t in tokens if t.sid in input_sids) - params_bytes,
            "param_bytes": params_bytes,
            "total_bytes": sum(t.size for t in tokens),
        }
        return storage_ids, [offsets.get(e, 0) for e in range(len(sizes))], stats

    def _concat_layout(self, sizes: list[int], fixed: set[int]) -> tuple[dict, dict]:
        """Concatenations laid out in place: ({entry: the outermost concatenation output it
        lies in}, {entry: its byte offset there}), roots mapping to themselves.

        An input is placed inside its concatenation's output when a kernel or another placed
        concatenation writes it, it is not a graph input, constant or output, no other
        concatenation claims it, and its offset keeps kernels' buffers aligned; a
        concatenation places all its inputs or none (the runtime copies the rest)."""
        producer = {e: func for _, _, outs, func in self.ops for e in outs}
        parent: dict[int, tuple[int, int]] = {}  # entry -> (concat output, byte offset)
        for _, ins, outs, func in self.ops:
            if func != CONCAT:
                continue
            at, places = 0, []
            for e in ins:
                places.append(at)
                at += sizes[e]
            if len(set(ins)) == len(ins) and all(
                    e not in fixed and e not in parent and producer.get(e) not in (None, NOP)
                    and off % STORAGE_ALIGNMENT == 0 for e, off in zip(ins, places)):
                parent.update((e, (outs[0], off)) for e, off in zip(ins, places))
        root: dict[int, int] = {}
        offsets: dict[int, int] = {}
        for e in parent:
            r, off = e, 0
            while r in parent:
                r, step = parent[r]
                off += step
            root[e], offsets[e] = r, off
            root.setdefault(r, r)
        return root, offsets

    @staticmethod
    def _request(free: list[_Token], size: int, refs: int, new_token) -> _Token:
        bigger = [t for t in free if size <= t.size < size * MATCH_RANGE]
        if bigger:
            tok = min(bigger, key=lambda t: (t.size, t.sid))
        else:
            smaller = [t for t in free if size // MATCH_RANGE <= t.size < size]
            if not smaller:
                return new_token(size, refs, False)
            tok = max(smaller, key=lambda t: (t.size, -t.sid))
            tok.size = size
        free.remove(tok)
        tok.refs = refs
        return tok

    def _finish(self, arg_nodes: list[int], heads: list[int]) -> GraphCodegenResult:
        storage_ids, offsets, stats = self._plan(arg_nodes, heads)
        row_ptr = [0]
        for entries in self.node_entries:
            row_ptr.append(row_ptr[-1] + len(entries))
        graph = {
            "nodes": self.nodes,
            "arg_nodes": arg_nodes,
            "heads": [self._ref(e) for e in heads],
            "attrs": {
                "dltype": ["list_str", [t.dtype for t in self.entry_types]],
                "storage_id": ["list_int", storage_ids],
                "shape": ["list_shape", [list(t.shape) for t in self.entry_types]],
                **({"storage_offset": ["list_int", offsets]} if any(offsets) else {}),
            },
            "node_row_ptr": row_ptr,
        }
        return GraphCodegenResult(json.dumps(graph, indent=2), dict(self.params), stats,
                                  self.nodes)

