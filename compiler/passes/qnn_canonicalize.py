"""relay.qnn.transform.CanonicalizeOps: every QNN op replaced by its canonical form (the op
attribute FTVMQnnCanonicalize: nn and tensor ops computing the same bits), as TVM's pass.

A canonical form may itself use QNN ops (qnn.add is quantize(add(dequantize, dequantize))),
so the rewrite repeats, re-typing in between, until no QNN op is left; the forms nest at most
a few levels deep, and a form that reintroduces its own op is an error rather than a loop.
"""
from __future__ import annotations

from compiler.errors import CompilerError
from compiler.ir.expr import Call, Function, Op, RelayExpr
from compiler.ir.traversal import post_order, rewrite_post_order
from compiler.ir.type_infer import infer_type_local
from compiler.op.registry import CANONICALIZE
from compiler.transform import function_pass, register_pass

_MAX_ROUNDS = 8


def _canonical_of(op) -> object | None:
    if type(op) is not Op or not op.name.startswith("qnn."):
        return None
    return op.op_def.get_attr(CANONICALIZE)


def canonicalize_qnn(func: Function) -> Function:
    """func with its QNN calls replaced by their canonical forms (func must be typed)."""
    for _ in range(_MAX_ROUNDS):
        if not any(type(n) is Call and _canonical_of(n.op) for n in post_order(func)):
            return func
        func = infer_type_local(func)

        def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
            if type(new) is not Call:
                return new
            canonical = _canonical_of(new.op)
            if canonical is None:
                return new
            return canonical(new.attrs, list(new.args), [a.checked_type for a in old.args])
        func = rewrite_post_order(func, rewrite)
    raise CompilerError(f"CanonicalizeOps: QNN ops remain after {_MAX_ROUNDS} rounds; a "
                        f"canonical form reintroduces the op it replaces")


@register_pass
def CanonicalizeOps():
    """Lower QNN ops to nn/tensor ops (TVM's relay.qnn.transform.CanonicalizeOps)."""

    @function_pass(opt_level=0, name="CanonicalizeOps", required=["InferType"])
    def canonicalize_ops(func: Function, mod, ctx) -> Function:
        return canonicalize_qnn(func)

    return canonicalize_ops
