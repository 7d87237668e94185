"""A 10,000-op chain through InferType, printing, structural_equal, bind, DCE and ToANormalForm
under the default recursion limit: nothing on the way may recurse per node."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.ir import structural_equal, structural_hash
from compiler.passes.dead_code import DeadCodeElimination
from compiler.passes.eliminate_common_subexpr import EliminateCommonSubexpr
from compiler.transform.pass_infra import InferType
from compiler.passes.to_anf import ToANormalForm
from compiler.transform import PassContext, Sequential

N = 10_000
T = relay.TensorType((4,), "float32")


@pytest.fixture(autouse=True)
def default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # what a fresh interpreter has; the chain is 10x deeper
    yield
    sys.setrecursionlimit(old)


def chain(n: int = N):
    x, c = relay.var("x", T), relay.var("c", T)
    out = x
    for _ in range(n):
        out = relay.add(out, c)
    return relay.Function([x, c], out), x, c


def let_chain(n: int = N, dead_every: int = 2):
    """let %a0 = add(x, x); let %a1 = add(%a0, %a0); ...; every other binding unused."""
    x = relay.var("x", T)
    bindings, live = [], x
    for i in range(n):
        var = relay.var(f"a{i}")
        bindings.append((var, relay.add(live, live)))
        if i % dead_every == 0:
            live = var
    body = live
    for var, value in reversed(bindings):
        body = relay.Let(var, value, body)
    return relay.Function([x], body), n // dead_every


def test_infer_type_print_and_structural_equal():
    func, _, _ = chain()
    mod = InferType()(tvm.IRModule.from_expr(func))
    assert mod["main"].ret_type == T
    text = str(mod)
    assert text.count("add(") == N
    other = InferType()(tvm.IRModule.from_expr(chain()[0]))
    assert structural_equal(mod["main"], other["main"])
    assert structural_hash(mod["main"]) == structural_hash(other["main"])
    assert not structural_equal(mod["main"], InferType()(tvm.IRModule.from_expr(
        chain(N - 1)[0]))["main"])


def test_bind_long_chain():
    func, _, c = chain()
    bound = relay.bind(func, {"c": np.ones(4, "float32")})
    assert len(bound.params) == 1
    constant = bound.body.args[1]
    assert isinstance(constant, relay.Constant)
    node, count = bound.body, 0
    while isinstance(node, relay.Call):
        assert node.args[1] is constant
        node, count = node.args[0], count + 1
    assert count == N


def test_dead_code_elimination_long_let_chain():
    func, live = let_chain()
    mod = tvm.IRModule.from_expr(func)
    with PassContext(opt_level=1):
        out = Sequential([DeadCodeElimination()])(mod)
    body, kept = out["main"].body, 0
    while isinstance(body, relay.Let):
        kept, body = kept + 1, body.body
    assert kept == live


def test_dead_code_inline_once_long_let_chain():
    func, _ = let_chain(N, dead_every=1)  # each var used twice, but the last one only once
    out = DeadCodeElimination(inline_once=True)(InferType()(tvm.IRModule.from_expr(func)))
    body, kept = out["main"].body, 0
    while isinstance(body, relay.Let):
        kept, body = kept + 1, body.body
    assert kept == N - 1
    assert isinstance(body, relay.Call) and body.args[0].name_hint == f"a{N - 2}"


def test_to_a_normal_form_long_chain():
    func, _, _ = chain()
    out = ToANormalForm()(InferType()(tvm.IRModule.from_expr(func)))
    body, count = out["main"].body, 0
    while isinstance(body, relay.Let):
        assert isinstance(body.value, relay.Call)
        assert all(isinstance(a, relay.Var) for a in body.value.args)
        count, body = count + 1, body.body
    assert count == N
    text = str(out)
    assert text.count("let %") == N
    # and back: DCE with inline_once turns the let chain into the data-flow chain again
    back = DeadCodeElimination(inline_once=True)(InferType()(out))
    assert structural_equal(back["main"].body, InferType()(tvm.IRModule.from_expr(func))
                            ["main"].body)


def test_cse_long_chain():
    x, c = relay.var("x", T), relay.var("c", T)
    left = right = x
    for _ in range(N // 2):
        left, right = relay.add(left, c), relay.add(right, c)  # two copies of one chain
    func = relay.Function([x, c], relay.subtract(left, right))
    out = EliminateCommonSubexpr()(InferType()(tvm.IRModule.from_expr(func)))
    body = out["main"].body
    assert body.args[0] is body.args[1]


def test_fuse_simplify_interpreter_analysis_and_visitors_long_chain():
    from compiler.analysis import all_vars, free_vars, well_formed
    from compiler.op.interpreter import evaluate
    from compiler.passes.fuse_ops import FuseOps
    from compiler.passes.simplify_inference import SimplifyInference
    func, x, c = chain()
    mod = InferType()(tvm.IRModule.from_expr(func))
    fused = FuseOps(fuse_opt_level=2)(mod)
    assert isinstance(fused["main"].body.op, relay.Function)
    assert SimplifyInference()(mod)["main"].body is mod["main"].body
    one = np.ones(4, "float32")
    np.testing.assert_array_equal(evaluate(func, [one, one]), np.full(4, N + 1.0))
    assert free_vars(func.body) == [x, c]
    let_func, _ = let_chain()
    assert len(all_vars(let_func)) == N + 1
    assert well_formed(let_func)
    zero = np.zeros(4, "float32")  # x doubled N/2 times: only 0 stays finite
    np.testing.assert_array_equal(evaluate(let_func, [zero]), zero)
    assert relay.ExprMutator().visit(let_func) is let_func
    assert relay.ExprVisitor().visit(func) is None
