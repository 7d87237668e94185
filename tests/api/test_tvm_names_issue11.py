"""Issue 11 items 6-7 from a TVM user's side: the names exist where TVM has them and behave as
TVM's do (DeadCodeElimination(inline_once=True) as in TVM's test_pass_dead_code_elimination)."""
from __future__ import annotations

import compiler as tvm
from compiler import relay


def test_names_exist_where_tvm_has_them():
    for name in ["ForwardFoldScaleAxis", "BackwardFoldScaleAxis", "FoldScaleAxis",
                 "DeadCodeElimination", "FuseOps"]:
        assert callable(getattr(relay.transform, name)), name
    for name in ["detect_feature", "Feature"]:
        assert hasattr(relay.analysis, name), name
    assert callable(relay.annotation.stop_fusion)
    for name in ["register", "register_op_attr", "register_compute", "register_pattern",
                 "register_stateful", "get", "OpPattern"]:
        assert hasattr(relay.op.op, name), name
        assert hasattr(relay.op, name), name
    for name in ["conv1d", "conv1d_transpose", "upsampling", "conv3d", "pad"]:
        assert callable(getattr(relay.nn, name)), name
    assert callable(relay.reverse_reshape) and callable(relay.broadcast_to)
    assert callable(relay.left_shift) and callable(relay.right_shift)


def test_dead_code_inline_once_one_use():
    x = relay.var("x", "int32")
    y, z = relay.var("y"), relay.var("z")
    before = relay.Function([x], relay.Let(y, x, relay.Let(z, y, z)))
    mod = tvm.transform.Sequential([relay.transform.DeadCodeElimination(inline_once=True)])(
        tvm.IRModule.from_expr(before))
    expected = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], x)))
    tvm.assert_structural_equal(mod["main"], expected["main"])


def test_dead_code_inline_once_keeps_lets_used_twice():
    x = relay.var("x", shape=(2,))
    y = relay.var("y")
    before = relay.Function([x], relay.Let(y, relay.exp(x), relay.add(y, y)))
    mod = tvm.transform.Sequential([relay.transform.DeadCodeElimination(inline_once=True)])(
        tvm.IRModule.from_expr(before))
    assert isinstance(mod["main"].body, relay.Let)
