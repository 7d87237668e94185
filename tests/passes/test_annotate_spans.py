"""AnnotateSpans: every node of the printed module gets its position in that text; the module
is otherwise unchanged (structurally equal, same results)."""
from __future__ import annotations

import numpy as np

import compiler as tvm
import runtime
from compiler import relay
from compiler.ir.span import Span
from compiler.ir.traversal import post_order
from compiler.ir.expr import Call, Constant, Function, Let, Tuple, Var
from runtime import graph_executor


def _module():
    x = relay.var("x", shape=(2, 3))
    w = relay.const(np.arange(6, dtype="float32").reshape(3, 2))
    y = relay.var("y")
    body = relay.Let(y, relay.nn.relu(relay.nn.dense(x, relay.transpose(w))),
                     relay.Tuple([y + relay.const(1.0), relay.sum(y, axis=1)]))
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], body)))


def test_every_node_has_a_span_into_the_printed_text():
    mod = _module()
    text = mod.astext()
    out = relay.transform.AnnotateSpans()(mod)
    tvm.ir.assert_structural_equal(out, mod)
    lines = text.splitlines()
    nodes = [n for n in post_order(out["main"]) if isinstance(n, (Call, Tuple, Let, Var,
                                                                   Function))]
    assert any(isinstance(n, Call) for n in nodes) and any(isinstance(n, Let) for n in nodes)
    for node in nodes:
        span = node.span
        assert isinstance(span, Span), node
        assert span.source_name.name == "GeneratedSource"
        assert 1 <= span.line <= span.end_line <= len(lines)
        if isinstance(node, Call) and hasattr(node.op, "name"):  # the text names the op there
            assert lines[span.line - 1][span.column - 1:].startswith(node.op.name), \
                (node.op.name, lines[span.line - 1], span)


def test_original_nodes_keep_no_span_and_results_are_unchanged():
    mod = _module()
    relay.transform.AnnotateSpans()(mod)
    assert all(n.span is None for n in post_order(mod["main"]) if not isinstance(n, Constant))
    x = np.random.default_rng(0).standard_normal((2, 3)).astype("float32")
    outs = []
    for m in (mod, relay.transform.AnnotateSpans()(mod)):
        lib = relay.build(m, target="llvm")
        gm = graph_executor.GraphModule(lib["default"](runtime.cpu()))
        gm.run(x=x)
        outs.append([gm.get_output(i).numpy() for i in range(2)])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
