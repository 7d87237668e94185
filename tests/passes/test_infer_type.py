"""InferType: typing of every node kind, fill-ins, identity preservation, errors, long chains."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from compiler.errors import TypeInferenceError
from compiler.ir import (Call, Function, GlobalVar, If, IncompleteType, IRModule, Let, Op,
                         TensorType, Tuple, TupleGetItem, TupleType, Var, const)
from compiler.ir.types import FuncType
from compiler.op import registry
from compiler.op.registry import OpDef, OpPattern
from compiler.ir.type_infer import InferTypeLocal, infer_type_local
from compiler.transform.pass_infra import InferType
from compiler.transform import PassContext, Sequential

T23 = TensorType((2, 3), "float32")
T4 = TensorType((4,), "float32")
BOOL = TensorType((), "bool")


def _same_shape_rel(types, attrs):
    a, b = types
    if a != b:
        raise TypeInferenceError(f"test.add: operand types differ: {a} vs {b}")
    return a


@pytest.fixture(autouse=True, scope="module")
def _test_ops():
    """Tiny ops so these tests do not depend on the real op library."""
    with registry.temporary_ops(
            OpDef("test.add", 2, _same_shape_rel, OpPattern.BROADCAST,
                  lambda xs, attrs: xs[0] + xs[1]),
            OpDef("test.neg", 1, lambda types, attrs: types[0], OpPattern.ELEMWISE,
                  lambda xs, attrs: -xs[0]),
            OpDef("test.split2", 1, lambda types, attrs: TupleType([types[0], types[0]]),
                  OpPattern.INJECTIVE, lambda xs, attrs: (xs[0], xs[0])),
            OpDef("test.bad_rel", 1, lambda types, attrs: "not a type",
                  OpPattern.OPAQUE, lambda xs, attrs: xs[0])):
        yield


def add(a, b):
    return Call(Op.get("test.add"), [a, b])


def neg(a):
    return Call(Op.get("test.neg"), [a])


def run(func: Function) -> IRModule:
    return InferType()(IRModule({"main": func}))


def test_pass_info():
    p = InferType()
    assert p.info.name == "InferType" and p.info.opt_level == 0
    assert "InferType" in str(p)


def test_call_types_and_identity_is_preserved():
    x, y = Var("x", T23), Var("y", T23)
    body = add(neg(x), y)
    func = Function([x, y], body, ret_type=T23)
    mod = IRModule({"main": func})
    out = InferType()(mod)
    assert out is not mod
    assert out["main"] is func  # nothing to fill in: the very same nodes
    assert body.checked_type == T23
    assert body.args[0].checked_type == T23
    assert func.checked_type == FuncType([T23, T23], T23)
    assert out.get_global_var("main").checked_type == FuncType([T23, T23], T23)


def test_missing_ret_type_is_filled_in_and_new_nodes_are_typed():
    x = Var("x", T23)
    body = neg(x)
    func = Function([x], body)
    new = run(func)["main"]
    assert new is not func
    assert new.ret_type == T23
    assert new.body is body  # the body needed nothing, so it is shared
    assert new.checked_type == FuncType([T23], T23)


def test_tuples_and_getitem():
    x = Var("x", T23)
    tup = Tuple([x, neg(x)])
    item = TupleGetItem(Call(Op.get("test.split2"), [x]), 1)
    func = Function([x], Tuple([tup, item]), ret_type=TupleType([TupleType([T23, T23]), T23]))
    run(func)
    assert tup.checked_type == TupleType([T23, T23])
    assert item.checked_type == T23


def test_getitem_out_of_range_is_an_error():
    x = Var("x", T23)
    func = Function([x], TupleGetItem(Tuple([x, x]), 2))
    with pytest.raises(TypeInferenceError, match=r"index 2 is out of range for a tuple of 2"):
        run(func)


def test_getitem_of_a_tensor_is_an_error():
    x = Var("x", T23)
    with pytest.raises(TypeInferenceError, match="not a tuple type"):
        run(Function([x], TupleGetItem(x, 0)))


def test_let_var_annotation_is_filled_from_its_value():
    x = Var("x", T23)
    v = Var("v")
    body = add(v, x)
    func = Function([x], Let(v, neg(x), body), ret_type=T23)
    new = run(func)["main"]
    let = new.body
    assert let.var is not v and let.var.type_annotation == T23
    assert let.var.name_hint == "v"
    assert let.body.args[0] is let.var  # uses are rebuilt over the new var
    assert let.value is func.body.value  # the value needed nothing
    assert let.checked_type == T23 and let.body.checked_type == T23


def test_incomplete_annotation_is_replaced():
    x = Var("x", T23)
    v = Var("v", IncompleteType())
    func = Function([x], Let(v, neg(x), v), ret_type=IncompleteType())
    new = run(func)["main"]
    assert new.body.var.type_annotation == T23
    assert new.ret_type == T23


def test_let_annotation_mismatch_is_an_error():
    x = Var("x", T23)
    v = Var("v", T4)
    with pytest.raises(TypeInferenceError, match=r"%v is annotated .*\(4\).* value has type"):
        run(Function([x], Let(v, neg(x), v)))


def test_if_types_and_errors():
    c, x, y = Var("c", BOOL), Var("x", T23), Var("y", T23)
    node = If(c, neg(x), y)
    run(Function([c, x, y], node))
    assert node.checked_type == T23
    z = Var("z", T4)
    with pytest.raises(TypeInferenceError, match=r"different types.*\(2, 3\).*\(4\)"):
        run(Function([c, x, z], If(c, x, z)))
    f = Var("f", TensorType((), "float32"))
    with pytest.raises(TypeInferenceError, match="condition must be a bool scalar"):
        run(Function([f, x], If(f, x, x)))


def test_nested_function_value_and_direct_call():
    x, a = Var("x", T23), Var("a", T23)
    inner = Function([a], neg(a))
    call = Call(inner, [x])
    new = run(Function([x], call))["main"]
    assert inner.checked_type == FuncType([T23], T23)
    assert new.body.checked_type == T23
    assert new.body.op.ret_type == T23  # the nested function got its ret_type too


def test_call_of_function_with_wrong_argument_type():
    x, a = Var("x", T4), Var("a", T23)
    with pytest.raises(TypeInferenceError, match=r"argument 0 has type .*\(4\).*expects.*\(2, 3\)"):
        run(Function([x], Call(Function([a], a), [x])))


def test_global_calls_in_either_order():
    mod = IRModule()
    x = Var("x", T23)
    helper = GlobalVar("helper")
    mod["main"] = Function([x], Call(helper, [neg(x)]))  # main comes before its callee
    a = Var("a", T23)
    mod[helper] = Function([a], add(a, a))
    out = InferType()(mod)
    assert out["main"].ret_type == T23
    assert out["helper"].ret_type == T23
    assert helper.checked_type == FuncType([T23], T23)
    assert out["main"].body.checked_type == T23


def test_recursive_global_needs_annotations():
    mod = IRModule()
    f = GlobalVar("f")
    x = Var("x", T23)
    mod[f] = Function([x], Call(f, [x]))
    with pytest.raises(TypeInferenceError, match="@f is called recursively.*annotate"):
        InferType()(mod)
    y = Var("y", T23)
    mod[f] = Function([y], Call(f, [y]), ret_type=T23)
    assert InferType()(mod)["f"].checked_type == FuncType([T23], T23)


def test_call_of_unknown_global_is_an_error():
    x = Var("x", T23)
    with pytest.raises(TypeInferenceError, match="@nowhere is not a function of this module"):
        run(Function([x], Call(GlobalVar("nowhere"), [x])))


def test_unannotated_param_is_an_error_naming_it():
    x, y = Var("x", T23), Var("weight")
    with pytest.raises(TypeInferenceError, match=r"%weight has no type annotation.*annotation"):
        run(Function([x, y], add(x, y)))


def test_type_relation_failure_names_the_call_and_the_types():
    x, y = Var("x", T23), Var("y", T4)
    with pytest.raises(TypeInferenceError) as info:
        run(Function([x, y], neg(add(x, y))))
    msg = str(info.value)
    assert "test.add" in msg and "test.add(%x, %y)" in msg
    assert "Tensor[(2, 3), float32]" in msg and "Tensor[(4), float32]" in msg
    assert isinstance(info.value.__cause__, TypeInferenceError)


def test_type_relation_returning_a_non_type_is_an_error():
    x = Var("x", T23)
    with pytest.raises(TypeInferenceError, match="test.bad_rel returned str"):
        run(Function([x], Call(Op.get("test.bad_rel"), [x])))


def test_constants_are_typed_from_their_data():
    x = Var("x", T4)
    c = const(np.ones(4, "float32"))
    run(Function([x], add(x, c)))
    assert c.checked_type == T4


def test_infer_type_local_and_InferTypeLocal():
    x = Var("x", T23)
    v = Var("v")
    expr = Let(v, neg(x), v)
    assert InferTypeLocal(expr) == T23
    assert expr.checked_type == T23 and v.checked_type == T23
    filled = infer_type_local(expr)
    assert filled.var.type_annotation == T23
    plain = neg(x)
    assert infer_type_local(plain) is plain


def test_infer_type_local_with_global_needs_typed_module():
    x = Var("x", T23)
    gv = GlobalVar("g_untyped")
    with pytest.raises(TypeInferenceError, match="run InferType"):
        InferTypeLocal(Call(gv, [x]))


def test_checked_type_before_inference_says_run_infer_type():
    with pytest.raises(ValueError, match="InferType"):
        neg(Var("x", T23)).checked_type


def test_infer_type_is_required_by_name_in_sequential():
    from compiler.transform import ModulePass, PassInfo
    seen = []

    def needs_types(mod, ctx):
        seen.append(mod["main"].body.checked_type)
        return mod
    x = Var("x", T23)
    p = ModulePass(needs_types, PassInfo(0, "NeedsTypes", ["InferType"]))
    with PassContext(opt_level=0):
        Sequential([p])(IRModule({"main": Function([x], neg(x))}))
    assert seen == [T23]


def test_ten_thousand_op_chain_under_default_recursion_limit():
    assert sys.getrecursionlimit() <= 10000
    x = Var("x", T23)
    body = x
    for i in range(10000):
        body = neg(body) if i % 2 else add(body, x)
    func = Function([x], body, ret_type=T23)
    out = run(func)
    assert out["main"] is func
    assert body.checked_type == T23
    # with a fill-in at the bottom, the whole chain is rebuilt without recursion too
    v = Var("v")
    chain = v
    for _ in range(10000):
        chain = neg(chain)
    new = run(Function([x], Let(v, x, chain)))["main"]
    assert new.ret_type == T23 and new.body.var.type_annotation == T23
    assert new.body.body.checked_type == T23
