"""Helpers the pass tests share, as TVM's tests/python/relay use them."""
from __future__ import annotations

import compiler as tvm
from compiler import relay
from compiler.transform.pass_infra import InferType


def run_opt_pass(expr, opt_pass):
    """Run opt_pass on a module made from expr; a Function comes back as main, else its body."""
    mod = opt_pass(tvm.IRModule.from_expr(expr))
    entry = mod["main"]
    return entry if isinstance(expr, relay.Function) else entry.body


def run_infer_type(expr):
    return run_opt_pass(expr, InferType())
