"""The VM's static storage (compiler.backend.vm.storage_plan): the memory plan of relay.build
over a VM function's static tensors, with an escape analysis. A tensor that escapes (kept in a
tuple, passed to a call, captured by a closure, returned, alive across a call) is never
overwritten; the others share storage as the graph executor's plan shares it, concatenations
are laid out in place, residuals written over; a steady-state run allocates nothing."""
from __future__ import annotations

import numpy as np

import compiler as tvm
import runtime
from compiler import relay
from compiler.op import interpreter
from runtime.vm import VirtualMachine
from runtime.vm import bytecode as bc

RNG = np.random.default_rng(5)


def _f32(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _compile(mod):
    if isinstance(mod, relay.Function):
        mod = tvm.IRModule.from_expr(mod)
    return mod, relay.vm.compile(mod, target="llvm")


def _code(exe, name="main") -> list[tuple]:
    return list(exe.function(name).code)


def _count(code, opcode) -> int:
    return sum(inst[0] == opcode for inst in code)


def _mlp(depth: int = 6, width: int = 32):
    x = relay.var("x", shape=(2, width))
    h = x
    for _ in range(depth):
        h = relay.tanh(relay.nn.dense(h, relay.const(_f32(width, width) * 0.3)))
    return relay.Function([x], h)


def test_a_chain_of_static_tensors_shares_two_storages():
    mod, exe = _compile(_mlp())
    code = _code(exe)
    assert _count(code, bc.STATIC_STORAGE) == 2  # ping-pong, as the graph plan
    assert _count(code, bc.ALLOC_STORAGE) == 1  # the result: returned, so the pool's
    xa = _f32(2, 32)
    np.testing.assert_allclose(VirtualMachine(exe, runtime.cpu()).run(xa).numpy(),
                               interpreter.evaluate(mod, [xa]), rtol=1e-5, atol=1e-6)


def test_a_steady_state_run_allocates_nothing():
    mod, exe = _compile(_mlp())
    vm = VirtualMachine(exe, runtime.cpu())
    xa = _f32(2, 32)
    for _ in range(2):  # the second run's result needs storage: the first's is held
        result = vm.run(xa)
    before = vm.pool.stats()["system_allocations"]
    for _ in range(10):
        result = vm.run(xa)
    assert vm.pool.stats()["system_allocations"] == before
    np.testing.assert_allclose(result.numpy(), interpreter.evaluate(mod, [xa]), rtol=1e-5,
                               atol=1e-6)


def test_results_the_user_holds_are_never_overwritten():
    x = relay.var("x", shape=(3, 4))
    a = relay.exp(x)
    b = relay.tanh(relay.add(a, relay.const(1.0, "float32")))
    vm = VirtualMachine(_compile(relay.Function([x], relay.Tuple([a, b])))[1], runtime.cpu())
    xs = [_f32(3, 4) for _ in range(3)]
    held = [vm.run(x) for x in xs]
    for x, (ea, eb) in zip(xs, held):
        np.testing.assert_allclose(ea.numpy(), np.exp(x), rtol=1e-6)
        np.testing.assert_allclose(eb.numpy(), np.tanh(np.exp(x) + 1), rtol=1e-6)


def test_escaping_tensors_get_storage_of_their_own():
    """Kept in a tuple, passed to a call, captured by a closure: each escapes its function."""
    mod = tvm.IRModule()
    scale = relay.GlobalVar("scale")
    y = relay.var("y", shape=(4,))
    mod[scale] = relay.Function([y], relay.multiply(y, relay.const(3.0, "float32")))
    x = relay.var("x", shape=(4,))
    t1 = relay.exp(x)  # passed to a call
    t2 = relay.sin(x)  # kept in a tuple
    t3 = relay.cos(x)  # captured by a closure
    z = relay.var("z", shape=(4,))
    f = relay.var("f")
    body = relay.Let(f, relay.Function([z], relay.add(z, t3)),
                     relay.Tuple([relay.Call(scale, [t1]), t2, relay.Call(f, [x]),
                                  relay.exp(t3)]))
    mod["main"] = relay.Function([x], body)
    mod, exe = _compile(mod)
    code = _code(exe)
    assert _count(code, bc.ALLOC_CLOSURE) == 1  # capturing t3
    assert _count(code, bc.STATIC_STORAGE) == 0 and _count(code, bc.ALLOC_STORAGE) == 4
    vm = VirtualMachine(exe, runtime.cpu())
    for _ in range(2):
        xa = _f32(4)
        got = vm.run(xa)
        for g, w in zip(got, interpreter.evaluate(mod, [xa])):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-6)


def _count_down_module() -> tvm.IRModule:
    """f(n, x) = n == 0 ? x : tanh(x) + f(n - 1, x * 0.5) * exp(x): exp(x) and tanh(x) are
    alive across the recursive call, which would overwrite them in static storage."""
    mod = tvm.IRModule()
    f = relay.GlobalVar("f")
    n = relay.var("n", shape=(), dtype="int32")
    x = relay.var("x", shape=(5,))
    keep, other = relay.exp(x), relay.tanh(x)
    rec = relay.Call(f, [relay.subtract(n, relay.const(1, "int32")),
                         relay.multiply(x, relay.const(0.5, "float32"))])
    mod[f] = relay.Function([n, x], relay.If(relay.equal(n, relay.const(0, "int32")), x,
                                             relay.add(other, relay.multiply(rec, keep))),
                            relay.TensorType((5,)))
    m = relay.var("m", shape=(), dtype="int32")
    y = relay.var("y", shape=(5,))
    mod["main"] = relay.Function([m, y], relay.Call(f, [m, y]))
    return mod


def test_tensors_alive_across_a_recursive_call_are_not_overwritten():
    mod, exe = _compile(_count_down_module())
    vm = VirtualMachine(exe, runtime.cpu())
    for n in (0, 1, 4):
        args = [np.array(n, "int32"), _f32(5) * 0.3]
        np.testing.assert_allclose(vm.run(*args).numpy(), interpreter.evaluate(mod, args),
                                   rtol=1e-5, atol=1e-6)


def test_concatenations_are_laid_out_in_place():
    """SqueezeNet's fire module: the two expand convs write into the concatenation's output."""
    x = relay.var("x", shape=(1, 8, 6, 6))
    squeeze = relay.nn.relu(relay.nn.conv2d(x, relay.const(_f32(4, 8, 1, 1))))
    e1 = relay.nn.relu(relay.nn.conv2d(squeeze, relay.const(_f32(8, 4, 1, 1))))
    e3 = relay.nn.relu(relay.nn.conv2d(squeeze, relay.const(_f32(8, 4, 3, 3)),
                                       padding=(1, 1)))
    cat = relay.concatenate([e1, e3], axis=1)
    out = relay.nn.max_pool2d(cat, pool_size=(2, 2), strides=(2, 2))
    mod, exe = _compile(relay.Function([x], out))
    calls = _count(_code(exe), bc.INVOKE_PACKED)
    assert calls == 4  # squeeze, two expands, pool: the concatenation costs nothing
    xa = _f32(1, 8, 6, 6)
    factory = relay.build(mod, target="llvm")
    gm = runtime.graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gm.set_input("x", xa)
    gm.run()
    np.testing.assert_allclose(VirtualMachine(exe, runtime.cpu()).run(xa).numpy(),
                               gm.get_output(0).numpy(), rtol=1e-5, atol=1e-5)


def test_a_residual_is_written_over_in_place():
    """conv(y) + z, z's last reader: the fused kernel writes its output over z, as the graph
    executor's plan does (a kernel's in-place pair)."""
    x = relay.var("x", shape=(1, 16, 8, 8))
    z = relay.nn.relu(relay.nn.conv2d(x, relay.const(_f32(16, 16, 3, 3) * 0.1),
                                      padding=(1, 1)))
    y = relay.nn.relu(relay.nn.conv2d(z, relay.const(_f32(16, 16, 3, 3) * 0.1),
                                      padding=(1, 1)))
    res = relay.add(relay.nn.conv2d(y, relay.const(_f32(16, 16, 1, 1) * 0.1)), z)
    out = relay.nn.global_avg_pool2d(relay.nn.relu(res))
    mod, exe = _compile(relay.Function([x], out))
    code = _code(exe)
    placed = {inst[5]: (inst[1], inst[2]) for inst in code if inst[0] == bc.ALLOC_TENSOR}
    shared = [inst for inst in code if inst[0] == bc.INVOKE_PACKED and any(
        placed.get(a) == placed.get(o) and a in placed
        for a in inst[3][:-inst[2]] for o in inst[3][-inst[2]:])]
    assert len(shared) == 1 and exe.lib.in_place.get(exe.kernels[shared[0][1]].name)
    xa = _f32(1, 16, 8, 8)
    np.testing.assert_allclose(VirtualMachine(exe, runtime.cpu()).run(xa).numpy(),
                               interpreter.evaluate(mod, [xa]), rtol=1e-4, atol=1e-5)
