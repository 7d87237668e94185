"""relay.analysis.detect_feature / Feature, as TVM's test_feature.py uses them."""
from __future__ import annotations

import compiler as tvm
from compiler import relay
from compiler.relay.analysis import Feature, detect_feature


def test_feature_numbering_is_tvms():
    assert [f.name for f in Feature][:10] == [
        "fVar", "fGlobalVar", "fConstant", "fTuple", "fTupleGetItem", "fFunction", "fOp",
        "fCall", "fLet", "fIf"]
    assert Feature.fGraph == 15 and Feature.fLetRec == 16


def test_tree_program():
    x = relay.var("x", shape=(3,))
    tup = relay.Tuple([x, relay.const(1.0)])
    body = relay.If(relay.const(True), relay.TupleGetItem(tup, 0), relay.exp(x))
    assert detect_feature(relay.Function([x], body)) == {
        Feature.fVar, Feature.fConstant, Feature.fTuple, Feature.fTupleGetItem,
        Feature.fFunction, Feature.fOp, Feature.fCall, Feature.fIf}


def test_shared_call_is_a_graph_shared_var_is_not():
    x = relay.var("x", shape=(3,))
    assert Feature.fGraph not in detect_feature(relay.add(x, x))
    y = relay.exp(x)
    assert Feature.fGraph in detect_feature(relay.add(y, y))
    assert Feature.fGraph not in detect_feature(relay.add(relay.exp(x), relay.exp(x)))


def test_let_and_letrec():
    x = relay.var("x", shape=(3,))
    v = relay.var("v", shape=(3,))
    let = relay.Let(v, relay.exp(x), relay.add(v, v))
    assert detect_feature(let) == {Feature.fLet, Feature.fVar, Feature.fCall, Feature.fOp}
    f = relay.var("f")
    rec = relay.Let(f, relay.Function([x], relay.Call(f, [x])), f)
    assert {Feature.fLet, Feature.fLetRec, Feature.fFunction} <= detect_feature(rec)
    assert Feature.fLetRec not in detect_feature(let)


def test_module_and_expr_together():
    x = relay.var("x", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x)))
    gv = mod.get_global_var("main")
    call = relay.Call(gv, [relay.const([1.0, 2.0, 3.0])])
    both = detect_feature(call, mod)
    assert both == detect_feature(mod, call)
    assert {Feature.fGlobalVar, Feature.fConstant, Feature.fFunction, Feature.fVar} <= both
    assert Feature.fGlobalVar not in detect_feature(mod)


def test_primitive_function_body_is_not_looked_at():
    p = relay.var("p", shape=(3,))
    prim = relay.Function([p], relay.If(relay.const(True), p, p)).with_attr("Primitive", 1)
    x = relay.var("x", shape=(3,))
    feats = detect_feature(relay.Function([x], relay.Call(prim, [x])))
    assert Feature.fIf not in feats and Feature.fFunction in feats


def test_long_chain_does_not_recurse():
    x = relay.var("x", shape=(2,))
    y = x
    for _ in range(5000):
        y = relay.exp(y)
    assert detect_feature(y) == {Feature.fVar, Feature.fCall, Feature.fOp}
