"""Counting questions about a typed program (TVM's relay.analysis.get_total_mac_number and
list_op_freqs): how many multiply-accumulates, how often each op is called."""
from __future__ import annotations

from collections import Counter

from compiler.errors import CompilerError
from compiler.ir.expr import Call, Function, Op, RelayExpr
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order
from compiler.op.registry import get_def


def _calls(root: RelayExpr) -> list[Call]:
    return [n for n in post_order(root) if type(n) is Call and isinstance(n.op, Op)]


def get_total_mac_number(expr: RelayExpr | IRModule) -> int:
    """Multiply-accumulates of the contractions (conv2d, dense, matmul, batch_matmul and their
    packed/QNN forms: the ops whose cost the registry knows), half their FLOPs. The program
    must be type-inferred (relay.transform.InferType), as in TVM."""
    roots = list(expr.functions.values()) if isinstance(expr, IRModule) else [expr]
    total = 0
    for root in roots:
        for call in _calls(root.body if isinstance(root, Function) else root):
            cost = get_def(call.op.name).flops
            if cost is None:
                continue
            if call._checked_type is None:
                raise CompilerError(f"get_total_mac_number: the {call.op.name} call has no "
                                    "type; run relay.transform.InferType first")
            total += int(cost([a.checked_type for a in call.args], call.attrs,
                              call.checked_type)) // 2
    return total


def list_op_freqs(mod: IRModule | RelayExpr) -> dict[str, int]:
    """{op name: number of calls} over every function of `mod` (or one expression)."""
    roots = list(mod.functions.values()) if isinstance(mod, IRModule) else [mod]
    counts: Counter = Counter()
    for root in roots:
        counts.update(call.op.name for call in _calls(root))
    return dict(counts)
