"""EliminateCommonSubexpr: merged calls and projections, attrs, stateful ops, fskip."""
from __future__ import annotations

import numpy as np

import compiler as tvm
from compiler import relay
from compiler.op.interpreter import evaluate
from compiler.ir import assert_structural_equal, structural_equal
from compiler.passes.eliminate_common_subexpr import (EliminateCommonSubexpr,
                                                      eliminate_common_subexpr)
from compiler.transform import PassContext, Sequential
from tests.passes._helpers import run_infer_type, run_opt_pass


def cse(expr, fskip=None):
    return run_opt_pass(run_infer_type(expr), EliminateCommonSubexpr(fskip))


def test_simple():
    def before():
        x = relay.var("x", shape=(1, 16))
        y1 = relay.nn.relu(x)
        y2 = relay.nn.relu(x)
        y1 = relay.add(y1, relay.const(1.0, "float32"))
        y2 = relay.add(y2, relay.const(1.0, "float32"))
        return relay.Function([x], relay.add(y1, y2))

    def expected():
        x = relay.var("x", shape=(1, 16))
        y = relay.nn.relu(x)
        y = relay.add(y, relay.const(1.0, "float32"))
        return relay.Function([x], relay.add(y, y))

    after = cse(before())
    assert_structural_equal(after, run_infer_type(expected()))
    assert after.body.args[0] is after.body.args[1]


def test_fskip():
    def fskip(expr):
        return isinstance(expr, relay.Call) and expr.op.name == "add"

    def before():
        x = relay.var("x", shape=(1, 16))
        y1 = relay.add(relay.nn.relu(x), relay.const(1.0, "float32"))
        y2 = relay.add(relay.nn.relu(x), relay.const(1.0, "float32"))
        return relay.Function([x], relay.add(y1, y2))

    def expected():
        x = relay.var("x", shape=(1, 16))
        y = relay.nn.relu(x)
        y1 = relay.add(y, relay.const(1.0, "float32"))
        y2 = relay.add(y, relay.const(1.0, "float32"))
        return relay.Function([x], relay.add(y1, y2))

    assert_structural_equal(cse(before(), fskip), run_infer_type(expected()))


def test_tuple_get_item():
    def build(merged: bool):
        x = relay.var("x", shape=(1, 16, 1, 1))
        var, mean, beta, gamma = (relay.var(n, shape=(16,))
                                  for n in ("var", "mean", "beta", "gamma"))
        bn = relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=1e-5)
        t1 = bn[0]
        t2 = t1 if merged else bn[0]
        return relay.Function([x, var, mean, beta, gamma], relay.add(t1, t2))

    after = cse(build(False))
    assert_structural_equal(after, run_infer_type(build(True)))
    assert not structural_equal(run_infer_type(build(False)), run_infer_type(build(True)))


def test_different_attrs_are_not_merged():
    x = relay.var("x", shape=(2, 4))
    before = relay.Function([x], relay.add(relay.nn.softmax(x, axis=0),
                                           relay.nn.softmax(x, axis=1)))
    after = cse(before)
    assert after.body.args[0] is not after.body.args[1]
    assert_structural_equal(after, run_infer_type(before))


def test_equal_constants_merge_but_different_ones_do_not():
    x = relay.var("x", shape=(3,))
    a = relay.add(x, relay.const(np.array([1, 2, 3], "float32")))
    b = relay.add(x, relay.const(np.array([1, 2, 3], "float32")))
    c = relay.add(x, relay.const(np.array([1, 2, 4], "float32")))
    after = cse(relay.Function([x], relay.Tuple([a, b, c])))
    fields = after.body.fields
    assert fields[0] is fields[1]
    assert fields[0] is not fields[2]


def test_stateful_ops_are_not_merged():
    x = relay.var("x", shape=(2, 3))
    before = relay.Function([x], relay.add(relay.nn.dropout(x), relay.nn.dropout(x)))
    after = cse(before)
    lhs, rhs = after.body.args
    assert lhs.tuple_value is not rhs.tuple_value
    assert_structural_equal(after, run_infer_type(before))


def test_whole_duplicated_subgraphs_collapse():
    x = relay.var("x", shape=(4,))

    def branch():
        y = x
        for _ in range(50):
            y = relay.tanh(relay.add(y, relay.const(0.5)))
        return y

    before = relay.Function([x], relay.subtract(branch(), branch()))
    after = cse(before)
    assert after.body.args[0] is after.body.args[1]
    data = np.linspace(-1, 1, 4).astype("float32")
    np.testing.assert_allclose(evaluate(after, [data]), np.zeros(4, "float32"))


def test_calls_with_no_args_or_non_op_callees_are_left_alone():
    x = relay.var("x", shape=(2,))
    p = relay.var("p", shape=(2,))
    fn = relay.Function([p], relay.exp(p))
    before = relay.Function([x], relay.add(relay.Call(fn, [x]), relay.Call(fn, [x])))
    after = cse(before)
    assert after.body.args[0] is not after.body.args[1]


def test_identity_when_nothing_merges():
    x = relay.var("x", shape=(2,))
    func = run_infer_type(relay.Function([x], relay.exp(relay.add(x, x))))
    assert eliminate_common_subexpr(func) is func


def test_pass_info_and_opt_level():
    p = EliminateCommonSubexpr()
    assert (p.info.name, p.info.opt_level) == ("EliminateCommonSubexpr", 3)
    assert list(p.info.required) == ["InferType"]
    assert relay.transform.EliminateCommonSubexpr is EliminateCommonSubexpr
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.add(relay.exp(x), relay.exp(x))))
    seq = Sequential([EliminateCommonSubexpr()])
    with PassContext(opt_level=2):
        body = seq(mod)["main"].body
    assert body.args[0] is not body.args[1]
    with PassContext(opt_level=3):
        body = seq(mod)["main"].body
    assert body.args[0] is body.args[1]
