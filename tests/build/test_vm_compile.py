"""relay.vm.compile + VirtualMachine on TVM-style programs: control flow, recursion, tuples,
let, closures and static networks, each checked against the interpreter or numpy."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
import runtime
from compiler import relay
from compiler.op import interpreter
from compiler.transform import PassContext
from runtime.errors import VMError
from runtime.vm import ADT, VirtualMachine, machine

RNG = np.random.default_rng(22)


def _vm(mod, **kw) -> VirtualMachine:
    return VirtualMachine(relay.vm.compile(mod, target="llvm"), runtime.cpu(), **kw)


def _sum_up_module() -> tvm.IRModule:
    """TVM's test_vm.py loop: sum_up(i, acc) = i == 0 ? acc : sum_up(i - 1, acc + i)."""
    mod = tvm.IRModule()
    sum_up = relay.GlobalVar("sum_up")
    i = relay.var("i", shape=[], dtype="int32")
    accum = relay.var("accum", shape=[], dtype="int32")
    one, zero = relay.const(1, "int32"), relay.const(0, "int32")
    body = relay.If(relay.equal(i, zero), accum,
                    relay.Call(sum_up, [relay.subtract(i, one), relay.add(accum, i)]))
    mod[sum_up] = relay.Function([i, accum], body, relay.TensorType([], "int32"))
    x = relay.var("x", shape=[], dtype="int32")
    mod["main"] = relay.Function([x], relay.Call(sum_up, [x, zero]))
    return mod


def test_recursive_sum_loop_through_a_global_var():
    mod = _sum_up_module()
    vm = _vm(mod)
    for n in (0, 1, 10, 57):
        got = vm.invoke("main", np.array(n, "int32")).numpy()
        assert got == n * (n + 1) // 2 == interpreter.evaluate(mod, [np.array(n, "int32")])


def test_a_tail_recursive_loop_runs_in_constant_stack():
    vm = _vm(_sum_up_module(), max_call_depth=50)
    assert vm.run(np.array(20000, "int32")).numpy() == 20000 * 20001 // 2


def _count_module() -> tvm.IRModule:
    """count(n) = n == 0 ? 0 : 1 + count(n - 1): not a tail call, one frame per level."""
    mod = tvm.IRModule()
    count = relay.GlobalVar("count")
    n = relay.var("n", shape=[], dtype="int32")
    one, zero = relay.const(1, "int32"), relay.const(0, "int32")
    mod[count] = relay.Function([n], relay.If(
        relay.equal(n, zero), zero, relay.add(one, relay.Call(count, [relay.subtract(n, one)]))),
        relay.TensorType([], "int32"))
    x = relay.var("x", shape=[], dtype="int32")
    mod["main"] = relay.Function([x], relay.Call(count, [x]))
    return mod


def test_countdown_that_builds_on_the_way_back_is_bounded_by_the_call_depth():
    vm = _vm(_count_module(), max_call_depth=100)
    assert vm.run(np.array(90, "int32")).numpy() == 90
    with pytest.raises(VMError, match="call depth exceeds 100"):
        vm.run(np.array(500, "int32"))


def test_the_registers_of_live_frames_are_bounded(monkeypatch):
    monkeypatch.setattr(machine, "MAX_LIVE_REGISTERS", 200)
    with pytest.raises(VMError, match="live frames hold more than 200 registers"):
        _vm(_count_module()).run(np.array(90, "int32"))


def test_a_loop_that_never_ends_is_stopped_by_the_call_limit():
    mod = tvm.IRModule()
    spin = relay.GlobalVar("spin")
    n = relay.var("n", shape=[], dtype="int32")
    mod[spin] = relay.Function([n], relay.Call(spin, [relay.add(n, relay.const(1, "int32"))]),
                               relay.TensorType([], "int32"))
    x = relay.var("x", shape=[], dtype="int32")
    mod["main"] = relay.Function([x], relay.Call(spin, [x]))
    vm = _vm(mod, max_calls=1000)
    with pytest.raises(VMError, match="more than 1000 calls"):
        vm.run(np.array(0, "int32"))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_on_a_tensor_condition(sign):
    x = relay.var("x", shape=(4, 5))
    cond = relay.greater(relay.sum(x), relay.const(0.0))
    f = relay.Function([x], relay.If(cond, relay.multiply(x, relay.const(2.0)),
                                     relay.subtract(relay.exp(x), relay.const(1.0))))
    xa = (sign * np.abs(RNG.standard_normal((4, 5)))).astype("f4")
    got = _vm(tvm.IRModule.from_expr(f)).run(xa).numpy()
    np.testing.assert_allclose(got, interpreter.evaluate(f, [xa]), rtol=1e-5, atol=1e-6)


def test_tuples_and_let():
    x = relay.var("x", shape=(3,))
    y = relay.var("y", shape=(3,))
    t = relay.var("t")
    pair = relay.Tuple([relay.add(x, y), relay.multiply(x, y)])
    body = relay.Let(t, pair, relay.Tuple([relay.TupleGetItem(t, 1), t,
                                            relay.subtract(relay.TupleGetItem(t, 0), y)]))
    f = relay.Function([x, y], body)
    xa, ya = RNG.standard_normal((2, 3)).astype("f4")
    got = _vm(tvm.IRModule.from_expr(f)).run(xa, ya)
    assert isinstance(got, ADT) and len(got) == 3 and isinstance(got[1], ADT)
    np.testing.assert_allclose(got[0].numpy(), xa * ya, rtol=1e-6)
    np.testing.assert_allclose(got[1][0].numpy(), xa + ya, rtol=1e-6)
    np.testing.assert_allclose(got[1][1].numpy(), xa * ya, rtol=1e-6)
    np.testing.assert_allclose(got[2].numpy(), xa + ya - ya, rtol=1e-6)


def test_tuple_parameter_and_a_kernel_taking_a_tuple():
    t = relay.var("t", relay.TupleType([relay.TensorType((2, 3)), relay.TensorType((2, 3))]))
    f = relay.Function([t], relay.concatenate([relay.TupleGetItem(t, 0),
                                               relay.TupleGetItem(t, 1)], axis=1))
    a, b = RNG.standard_normal((2, 2, 3)).astype("f4")
    got = _vm(tvm.IRModule.from_expr(f)).run((a, b)).numpy()
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))


def test_closures_capture_values_and_are_called_later():
    x = relay.var("x", shape=(3,))
    y = relay.var("y", shape=(3,))
    f = relay.var("f")
    add_x = relay.Function([y], relay.add(x, y))
    body = relay.Let(f, add_x, relay.Call(f, [relay.Call(f, [x])]))
    func = relay.Function([x], body)
    xa = RNG.standard_normal(3).astype("f4")
    got = _vm(tvm.IRModule.from_expr(func)).run(xa).numpy()
    np.testing.assert_allclose(got, 3 * xa, rtol=1e-6)


def test_a_global_function_passed_as_a_value():
    mod = tvm.IRModule()
    double = relay.GlobalVar("double")
    apply_twice = relay.GlobalVar("apply_twice")
    a = relay.var("a", shape=(2,))
    mod[double] = relay.Function([a], relay.add(a, a))
    g = relay.var("g", relay.FuncType([relay.TensorType((2,))], relay.TensorType((2,))))
    v = relay.var("v", shape=(2,))
    mod[apply_twice] = relay.Function([g, v], relay.Call(g, [relay.Call(g, [v])]))
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], relay.Call(apply_twice, [double, x]))
    xa = np.array([1.5, -2.0], "f4")
    np.testing.assert_allclose(_vm(mod).run(xa).numpy(), 4 * xa)


def test_static_network_runs_the_same_kernels_as_relay_build():
    x = relay.var("x", shape=(1, 4, 10, 10))
    w = relay.const(RNG.standard_normal((8, 4, 3, 3)).astype("f4"))
    d = relay.const(RNG.standard_normal((10, 8 * 10 * 10)).astype("f4"))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    out = relay.nn.softmax(relay.nn.dense(relay.reshape(y, (1, -1)), d))
    mod = tvm.IRModule.from_expr(relay.Function([x], out))
    with PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm")
        factory = relay.build(mod, target="llvm")
    assert set(exe.lib.function_names) == set(factory.get_lib().function_names)
    xa = RNG.standard_normal((1, 4, 10, 10)).astype("f4")
    got = VirtualMachine(exe, runtime.cpu()).run(xa).numpy()
    m = runtime.graph_executor.GraphModule(factory["default"](runtime.cpu()))
    m.run(x=xa)
    np.testing.assert_array_equal(got, m.get_output(0).numpy())


def test_params_are_bound_as_constants():
    x = relay.var("x", shape=(2, 2))
    w = relay.var("w", shape=(2, 2))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], relay.add(x, w)))
    wa = np.eye(2, dtype="f4")
    exe = relay.vm.compile(mod, params={"w": wa})
    assert exe.get_function_arity("main") == 1
    xa = np.ones((2, 2), "f4")
    np.testing.assert_array_equal(VirtualMachine(exe, runtime.cpu()).run(xa).numpy(), xa + wa)


def test_create_executor_vm_matches_debug():
    mod = _sum_up_module()
    for kind in ("vm", "debug"):
        got = relay.create_executor(kind, mod=mod, device=runtime.cpu()).evaluate()(7)
        assert int(got.numpy()) == 28


def test_stateful_interface_and_benchmark():
    x = relay.var("x", shape=(3,))
    vm = _vm(tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([x + x, x * x]))))
    xa = np.arange(3, dtype="f4")
    vm.set_input("main", x=xa)
    vm.invoke_stateful("main")
    outs = vm.get_outputs()
    assert len(outs) == 2
    np.testing.assert_array_equal(outs[1].numpy(), xa * xa)
    result = vm.benchmark(runtime.cpu(), repeat=2, number=2)
    assert result.mean > 0 and len(result.results) == 2


def test_a_wrong_input_names_the_input_and_the_expected_shape():
    x = relay.var("x", shape=(2, 3))
    vm = _vm(tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x))))
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(2, 3\) dtype float32, "
                                         r"got shape \(3, 2\) dtype float32"):
        vm.run(np.zeros((3, 2), "f4"))
    with pytest.raises(ValueError, match="dtype float32, got shape .* dtype float64"):
        vm.run(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="missing argument 'x'"):
        vm.run()


def test_a_constant_result_reaches_the_user_as_a_copy():
    x = relay.var("x", shape=(2,))
    c = relay.const(np.array([1.0, 2.0], "f4"))
    vm = _vm(tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([c, x]))))
    first = vm.run(np.zeros(2, "f4"))[0]
    first.copyfrom(np.array([9.0, 9.0], "f4"))
    np.testing.assert_array_equal(vm.run(np.zeros(2, "f4"))[0].numpy(), [1.0, 2.0])


def test_a_let_bound_closure_that_calls_itself():
    """let loop = fn(i) { i < n ? loop(i + 1) : i * 2 }; loop(0): captures n, recurses."""
    n = relay.var("n", shape=(), dtype="int32")
    i = relay.var("i", shape=(), dtype="int32")
    scalar = relay.TensorType((), "int32")
    loop = relay.var("loop", relay.FuncType([scalar], scalar))
    fn = relay.Function([i], relay.If(relay.less(i, n),
                                      relay.Call(loop, [relay.add(i, relay.const(1, "int32"))]),
                                      relay.multiply(i, relay.const(2, "int32"))), scalar)
    mod = tvm.IRModule.from_expr(relay.Function([n], relay.Let(
        loop, fn, relay.Call(loop, [relay.const(0, "int32")]))))
    vm = _vm(mod, max_call_depth=10)
    for k in (0, 5, 300):
        assert vm.run(np.array(k, "int32")).numpy() == 2 * k


def test_a_repeated_shape_allocates_nothing_new():
    x = relay.var("x", shape=(8, 16))
    w = relay.const(RNG.standard_normal((4, 16)).astype("f4"))
    out = relay.nn.relu(relay.nn.dense(relay.tanh(x), w))
    vm = _vm(tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([out, relay.exp(out)]))))
    xa = RNG.standard_normal((8, 16)).astype("f4")
    result = None
    for _ in range(2):  # the second run's outputs need new storage: the first's are held
        result = vm.run(xa)
    before = vm.pool.stats()["system_allocations"]
    for _ in range(5):
        result = vm.run(xa)
    assert vm.pool.stats()["system_allocations"] == before
    assert vm.pool.stats()["reuses"] > 0
    np.testing.assert_allclose(result[1].numpy(), np.exp(result[0].numpy()), rtol=1e-5)


def test_ifs_nested_deeper_than_the_recursion_limit():
    c = relay.var("c", shape=(), dtype="bool")
    x = relay.var("x", shape=(), dtype="int32")
    e = x
    for k in range(3000):  # else-if chains nest: compiled through an explicit stack
        e = relay.If(c, relay.const(k, "int32"), e)
    vm = _vm(tvm.IRModule.from_expr(relay.Function([c, x], e)))
    assert vm.run(np.array(True), np.array(-5, "int32")).numpy() == 2999
    assert vm.run(np.array(False), np.array(-5, "int32")).numpy() == -5


def test_empty_tensors_pass_through_kernels():
    """A size-0 input (numpy places its data anywhere: nothing is read) reaches its kernels
    (ONNX's split-with-zero-size and triu-of-empty cases)."""
    x = relay.var("x", shape=(0, 3))
    y = relay.var("y", shape=(2, 3))
    f = relay.Function([x, y], relay.Tuple([relay.exp(x),
                                            relay.concatenate([x, y], axis=0)]))
    empty = np.ones((0, 3), np.float32)[:, ::-1][:, ::-1]
    ya = RNG.standard_normal((2, 3)).astype("f4")
    got = _vm(tvm.IRModule.from_expr(f)).run(empty, ya)
    assert got[0].numpy().shape == (0, 3)
    np.testing.assert_allclose(got[1].numpy(), ya, rtol=1e-6)
