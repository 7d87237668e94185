"""ToANormalForm: every compound value let-bound once, each at the scope dominating its uses."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.analysis import free_vars, well_formed
from compiler.op.interpreter import evaluate
from compiler.ir import assert_structural_equal
from compiler.ir.traversal import post_order
from compiler.passes.to_anf import ToANormalForm, to_a_normal_form_expr
from compiler.transform import ModulePass
from runtime import graph_executor
from tests.passes._helpers import run_infer_type, run_opt_pass

T = relay.TensorType((2, 3), "float32")
ATOMS = (relay.Var, relay.Op, relay.GlobalVar)


def anf(expr):
    """ToANormalForm, then InferType (a module pass runs none itself) to compare typed IR."""
    return run_infer_type(run_opt_pass(run_infer_type(expr), ToANormalForm()))


def lets(bindings, body):
    for var, value in reversed(bindings):
        body = relay.Let(var, value, body)
    return body


def fresh(n):
    return [relay.var(f"v{i}") for i in range(n)]


def assert_anf(expr):
    """Every operand atomic, every let value non-let, every scope ending in an atom."""
    for node in post_order(expr):
        if isinstance(node, relay.Call):
            assert all(isinstance(a, ATOMS) for a in (node.op, *node.args)), node
        elif isinstance(node, relay.Tuple):
            assert all(isinstance(f, ATOMS) for f in node.fields)
        elif isinstance(node, relay.TupleGetItem):
            assert isinstance(node.tuple_value, ATOMS)
        elif isinstance(node, relay.Let):
            assert not isinstance(node.value, relay.Let)
        elif isinstance(node, relay.If):
            assert isinstance(node.cond, ATOMS)


def test_chain_becomes_let_chain():
    x, y = relay.var("x", T), relay.var("y", T)
    a = relay.add(x, y)
    before = relay.Function([x, y], relay.add(relay.multiply(a, a), relay.const(1.0)))
    v = fresh(4)
    one = relay.const(1.0)
    expected = relay.Function([x, y], lets(
        [(v[0], relay.add(x, y)), (v[1], relay.multiply(v[0], v[0])), (v[2], one),
         (v[3], relay.add(v[1], v[2]))], v[3]))
    after = anf(before)
    assert_structural_equal(after, run_infer_type(expected))
    assert_anf(after)
    lines = [line.strip() for line in str(after).splitlines()[1:-1]]
    assert [line.startswith("let %") for line in lines] == [True] * 4 + [False]
    assert lines[-1].startswith("%") and lines[1].split(" = ")[1].startswith("multiply(")


def test_shared_expression_scoped_at_the_lowest_common_scope():
    x, c = relay.var("x", T), relay.var("c", "bool")
    y = relay.var("y", T)
    shared = relay.add(x, x)
    inner = relay.Function([y], relay.multiply(shared, y))
    branch = relay.If(c, relay.add(shared, relay.const(2.0)),
                      relay.subtract(relay.exp(x), shared))
    before = relay.Function([x, c], relay.Tuple([branch, relay.Call(inner, [x])]))

    v = fresh(10)
    two = relay.const(2.0)
    then = lets([(v[2], two), (v[3], relay.add(v[0], v[2]))], v[3])
    other = lets([(v[4], relay.exp(x)), (v[5], relay.subtract(v[4], v[0]))], v[5])
    inner_anf = relay.Function([y], lets([(v[7], relay.multiply(v[0], y))], v[7]))
    expected = relay.Function([x, c], lets(
        [(v[0], relay.add(x, x)), (v[1], relay.If(c, then, other)), (v[6], inner_anf),
         (v[8], relay.Call(v[6], [x])), (v[9], relay.Tuple([v[1], v[8]]))], v[9]))
    after = anf(before)
    assert_structural_equal(after, run_infer_type(expected))
    assert_anf(after)
    assert well_formed(after)


def test_expression_used_in_one_branch_stays_in_that_branch():
    x, c = relay.var("x", T), relay.var("c", "bool")
    only_then = relay.exp(x)
    before = relay.Function([x, c], relay.If(c, relay.add(only_then, only_then), x))
    after = anf(before)
    branch = after.body.value
    assert isinstance(branch, relay.If)
    assert isinstance(branch.true_branch, relay.Let)  # exp bound inside the branch
    assert isinstance(branch.true_branch.value, relay.Call)
    assert branch.true_branch.value.op.name == "exp"
    assert branch.false_branch is x
    assert "exp" not in str(after.body.body)


def test_existing_lets_keep_their_vars_and_are_flattened():
    x = relay.var("x", T)
    a, b = relay.var("a"), relay.var("b")
    before = relay.Function([x], relay.Let(a, relay.add(x, x),
                                           relay.multiply(a, relay.Let(b, a, relay.exp(b)))))
    v = fresh(2)
    expected = relay.Function([x], lets(
        [(a, relay.add(x, x)), (b, a), (v[0], relay.exp(b)), (v[1], relay.multiply(a, v[0]))],
        v[1]))
    after = anf(before)
    assert_structural_equal(after, run_infer_type(expected))
    assert after.body.var.name_hint == "a"


def test_primitive_functions_are_bound_but_not_entered():
    x, p = relay.var("x", T), relay.var("p", T)
    prim = relay.Function([p], relay.add(p, relay.exp(p))).with_attr("Primitive", 1)
    before = relay.Function([x], relay.Call(prim, [x]))
    after = anf(before)
    assert after.body.value.body.args[1].op.name == "exp"  # body untouched
    assert not isinstance(after.body.value.body, relay.Let)
    assert isinstance(after.body.body.value, relay.Call)
    assert after.body.body.value.op is after.body.var


@pytest.mark.parametrize("opt_level", [0, 3])
def test_a_normal_form_of_a_fused_program_builds(opt_level):
    """relay.build resolves a call of a let-bound Primitive function (as TVM's LowerTE)."""
    x = relay.var("x", shape=(2, 4, 5))
    low = relay.min(relay.exp(x), axis=[2])
    func = relay.Function([x], relay.Tuple([relay.add(low, relay.const(1.0)),
                                            relay.multiply(low, low)]))
    seq = tvm.transform.Sequential([relay.transform.InferType(), relay.transform.FuseOps(),
                                    ToANormalForm()])
    mod = seq(tvm.IRModule.from_expr(func))
    assert isinstance(mod["main"].body, relay.Let)
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod)
    gmod = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    xs = np.random.default_rng(0).standard_normal((2, 4, 5)).astype("float32")
    gmod.run(x=xs)
    want = np.exp(xs).min(axis=2)
    np.testing.assert_allclose(gmod.get_output(0).numpy(), want + 1, rtol=1e-6)
    np.testing.assert_allclose(gmod.get_output(1).numpy(), want * want, rtol=1e-6)


def test_plain_expression_and_free_vars():
    x = relay.var("x", T)
    expr = relay.add(relay.add(x, relay.const(1.0)), relay.const(2.0))
    out = to_a_normal_form_expr(expr)
    assert isinstance(out, relay.Let)
    assert_anf(out)
    assert free_vars(out) == [x]
    assert to_a_normal_form_expr(x) is x


def test_semantics_preserved_on_a_dag():
    x, y = relay.var("x", T), relay.var("y", T)
    c = relay.var("c", "bool")
    a = relay.add(x, y)
    b = relay.multiply(a, relay.const(3.0))
    t = relay.Tuple([a, b])
    d = relay.subtract(relay.TupleGetItem(t, 1), relay.TupleGetItem(t, 0))
    body = relay.If(c, relay.add(d, a), relay.exp(relay.negative(d)))
    func = relay.Function([x, y, c], body)
    after = anf(func)
    assert_anf(after)
    xs = np.arange(6, dtype="float32").reshape(2, 3) / 10
    ys = np.ones((2, 3), "float32")
    for cond in (True, False):
        np.testing.assert_allclose(evaluate(after, [xs, ys, np.array(cond)]),
                                   evaluate(func, [xs, ys, np.array(cond)]), rtol=1e-6)


def test_module_pass_info_and_compiler_functions_skipped():
    p = ToANormalForm()
    assert isinstance(p, ModulePass)
    assert (p.info.name, p.info.opt_level, list(p.info.required)) == ("ToANormalForm", 1, [])
    assert relay.transform.ToANormalForm is ToANormalForm
    x = relay.var("x", T)
    ext = relay.Function([x], relay.exp(relay.exp(x))).with_attr("Compiler", "ccompiler")
    mod = tvm.IRModule()
    mod["ext"] = ext
    mod["main"] = relay.Function([x], relay.exp(x))
    out = p(mod)
    assert out["ext"] is ext
    assert isinstance(out["main"].body, relay.Let)
    assert not isinstance(mod["main"].body, relay.Let)  # the input module is not edited


@pytest.mark.parametrize("depth", [2000])
def test_long_let_chain_input(depth):
    x = relay.var("x", T)
    vars_ = [relay.var(f"a{i}") for i in range(depth)]
    body = vars_[-1]
    for i in reversed(range(depth)):
        prev = x if i == 0 else vars_[i - 1]
        body = relay.Let(vars_[i], relay.add(prev, prev), body)
    out = to_a_normal_form_expr(relay.Function([x], body))
    assert_anf(out)
    assert out.body.var is vars_[0]
