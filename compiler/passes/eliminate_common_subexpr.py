"""EliminateCommonSubexpr: merge calls that compute the same value, as TVM's
eliminate_common_expr.cc.

One bottom-up walk (rewrite_post_order, explicit stack). After a node's children are rewritten:
- a call of an Op with at least one argument, not stateful (OpDef.stateful) and not skipped by
  `fskip(call)`, is looked up among the earlier calls: it matches one with the same op,
  equal attrs (compared by value) and, argument by argument, the same node (same_as, which
  after CSE of the operands means "computes the same value"), an equal constant (dtype,
  shape and bytes; constants over LARGE_CONSTANT_BYTES count by identity, so model weights
  are never copied and hashed — missing a merge there is harmless) or a Tuple whose fields
  match that way (TVM compares tuple arguments by value, as `concatenate((%a, %b))` written
  twice builds two Tuple nodes; a tuple's key is made when it is rewritten, bottom-up, so
  nested tuples cost no recursion). A match replaces the
  call; otherwise the call is remembered. TVM scans a
  list per op; here the key (op, attrs, argument keys) is hashed, so a 10,000-add chain stays
  linear.
- a TupleGetItem is merged with an earlier projection of the same (rewritten) tuple at the
  same index.
Because children are merged first, whole duplicated sub-graphs collapse in one run.
"""
from __future__ import annotations

from typing import Callable

from compiler.ir.expr import Call, Constant, Function, Op, RelayExpr, Tuple, TupleGetItem
from compiler.ir.traversal import rewrite_post_order
from compiler.transform import function_pass, register_pass

LARGE_CONSTANT_BYTES = 4096


def eliminate_common_subexpr(expr: RelayExpr,
                             fskip: Callable[[RelayExpr], bool] | None = None) -> RelayExpr:
    """CSE over one expression; returns expr itself when nothing was merged."""
    calls: dict = {}  # (op, attrs, argument keys) -> the first such call
    projections: dict = {}  # (tuple expression, index) -> the first such TupleGetItem
    constant_keys: dict = {}
    tuple_keys: dict = {}  # rewritten Tuple -> ("tuple", its fields' keys)

    def arg_key(arg: RelayExpr):
        if type(arg) is Tuple:
            return tuple_keys.get(arg, arg)
        if type(arg) is not Constant or arg.data.nbytes > LARGE_CONSTANT_BYTES:
            return arg  # identity: after CSE of the operands, same node means same value
        key = constant_keys.get(arg)
        if key is None:
            data = arg.data
            key = constant_keys[arg] = ("const", data.dtype, tuple(data.shape),
                                        data.numpy().tobytes())
        return key

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        kind = type(new)
        if kind is Tuple:
            tuple_keys[new] = ("tuple", tuple(arg_key(f) for f in new.fields))
            return new
        if kind is Call:
            op = new.op
            if not new.args or type(op) is not Op or op.op_def.stateful:
                return new
            if fskip is not None and fskip(new):
                return new
            key = (op, new.attrs, tuple(arg_key(a) for a in new.args))
            try:
                return calls.setdefault(key, new)
            except TypeError:  # an attribute value that cannot be hashed: leave the call be
                return new
        if kind is TupleGetItem:
            if fskip is not None and fskip(new):
                return new
            return projections.setdefault((new.tuple_value, new.index), new)
        return new

    return rewrite_post_order(expr, rewrite)


@register_pass
def EliminateCommonSubexpr(fskip: Callable[[RelayExpr], bool] | None = None):
    """Merge calls (same op, equal attrs, same arguments) and tuple projections."""

    @function_pass(opt_level=3, name="EliminateCommonSubexpr", required=["InferType"])
    def eliminate_common_subexpr_pass(func: Function, mod, ctx) -> Function:
        return eliminate_common_subexpr(func, fskip)

    return eliminate_common_subexpr_pass
