"""Programs with dynamic (relay.Any) shapes on the VM: output shapes from the registry's shape
programs (ShapeFunc + AllocTensorReg), kernels specialised per concrete shape, value-dependent
shapes, recursion whose carried tensor grows, and run-time shapes that break a model's
constraints; each checked against numpy or the interpreter at several shapes."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
import runtime
from compiler import relay
from compiler.op import interpreter
from runtime.shape_program import ShapeError
from runtime.vm import Executable, VirtualMachine

RNG = np.random.default_rng(23)
Any = relay.Any


def _f32(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _vm(mod) -> VirtualMachine:
    if isinstance(mod, relay.Function):
        mod = tvm.IRModule.from_expr(mod)
    return VirtualMachine(relay.vm.compile(mod, target="llvm"), runtime.cpu())


def _check(mod, *args, rtol=1e-5, atol=1e-5, vm=None):
    """The VM's result equals the interpreter's."""
    if isinstance(mod, relay.Function):
        mod = tvm.IRModule.from_expr(mod)
    vm = vm or _vm(mod)
    got = vm.run(*args)
    want = interpreter.evaluate(mod, list(args))
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=rtol, atol=atol)
    else:
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=rtol, atol=atol)
    return vm


def test_dynamic_batch_dense():
    x = relay.var("x", shape=(Any(), 16))
    w, b = _f32(10, 16), _f32(10)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, relay.const(w)), relay.const(b)))
    vm = _vm(relay.Function([x], y))
    for n in (1, 7, 32, 7):
        xa = _f32(n, 16)
        got = vm.run(xa).numpy()
        assert got.shape == (n, 10)
        np.testing.assert_allclose(got, np.maximum(xa @ w.T + b, 0), rtol=1e-5, atol=1e-5)
    stats = vm.exe.specialisation_stats
    assert stats["compiled"] == 3 and stats["hits"] == 1  # one kernel, three batch sizes


def test_any_batch_and_spatial_dims_in_a_conv2d():
    x = relay.var("x", shape=(Any(), 3, Any(), Any()))
    w = relay.const(_f32(8, 3, 3, 3))
    y = relay.nn.conv2d(x, w, padding=(1, 1), strides=(2, 2))
    y = relay.nn.max_pool2d(relay.nn.relu(y), pool_size=(2, 2), strides=(2, 2))
    func = relay.Function([x], relay.nn.batch_flatten(y))
    vm = _vm(func)
    for shape in ((1, 3, 16, 16), (3, 3, 9, 13), (1, 3, 16, 16)):
        out = _check(func, _f32(*shape), vm=vm, rtol=1e-4, atol=1e-4)
    assert vm.run(_f32(2, 3, 20, 12)).numpy().shape == (2, 8 * 5 * 3)
    assert out is vm


def test_a_dynamic_batch_cnn_through_relay_builds_layout_passes():
    """Bias, residual and pooling over a dynamic batch: the layout passes (AlterOpLayout,
    ConvertBlockedLayout, FoldScaleAxis) leave the dynamic shapes alone."""
    x = relay.var("x", shape=(Any(), 16, 10, 10))
    y = relay.nn.conv2d(x, relay.const(_f32(16, 16, 3, 3) * 0.1), padding=(1, 1))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(_f32(16))))
    y = relay.add(relay.nn.batch_norm(y, *[relay.const(v) for v in (
        np.ones(16, "float32"), _f32(16) * 0.1, _f32(16) * 0.1, np.ones(16, "float32"))])[0],
        x)
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    func = relay.Function([x], relay.nn.dense(y, relay.const(_f32(5, 16))))
    vm = _vm(func)
    for n in (1, 3):
        _check(func, _f32(n, 16, 10, 10), vm=vm, rtol=1e-4, atol=1e-4)
    heads = relay.var("heads", shape=(1, Any(), 4, 8))  # (batch, sequence, heads, dim)
    func = relay.Function([heads], relay.nn.relu(relay.add(heads, relay.const(_f32(8)))))
    vm = _vm(func)
    for n in (2, 9):
        _check(func, _f32(1, n, 4, 8), vm=vm)


def _transformer_block(d: int = 32, heads: int = 4):
    """Self-attention over a dynamic-length sequence, residual, layer norm, MLP."""
    x = relay.var("x", shape=(Any(), d))
    dh = d // heads

    def dense(v, n_out, scale=0.2):
        return relay.nn.bias_add(relay.nn.dense(v, relay.const(_f32(n_out, v_dim[v]) * scale)),
                                 relay.const(_f32(n_out) * 0.1))
    v_dim = {x: d}
    q, k, v = (relay.reshape(dense(x, d), (-1, heads, dh)) for _ in range(3))
    q, k, v = (relay.transpose(t, (1, 0, 2)) for t in (q, k, v))  # heads, seq, dh
    scores = relay.nn.batch_matmul(q, k) * relay.const(1 / np.sqrt(dh), "float32")
    probs = relay.nn.softmax(scores, axis=-1)
    ctx = relay.nn.batch_matmul(probs, relay.transpose(v, (0, 2, 1)))  # heads, seq, dh
    ctx = relay.reshape(relay.transpose(ctx, (1, 0, 2)), (-1, d))
    h = relay.nn.layer_norm(relay.add(ctx, x), relay.const(np.ones(d, "float32")),
                            relay.const(np.zeros(d, "float32")))
    v_dim[h] = d
    up = relay.nn.relu(dense(h, 2 * d))
    v_dim[up] = 2 * d
    return relay.Function([x], relay.add(h, dense(up, d)))


def test_a_transformer_block_over_a_dynamic_length_sequence():
    func = _transformer_block()
    vm = _vm(func)
    for n in (1, 5, 17, 5):
        _check(func, _f32(n, 32), vm=vm, rtol=1e-4, atol=1e-4)


def test_dyn_reshape_strided_slice_and_full_with_shapes_from_tensors():
    x = relay.var("x", shape=(Any(), Any()))
    newshape = relay.var("newshape", shape=(2,), dtype="int64")
    begin = relay.var("begin", shape=(2,), dtype="int64")
    end = relay.var("end", shape=(2,), dtype="int64")
    y = relay.reshape(relay.exp(x), newshape)
    z = relay.strided_slice(y, begin, end)
    filled = relay.full(relay.const(2.5, "float32"), relay.shape_of(z))
    func = relay.Function([x, newshape, begin, end], relay.multiply(z, filled))
    vm = _vm(func)
    for xs, ns, b, e in (((4, 6), (3, 8), (1, 2), (3, 7)), ((2, 9), (6, 3), (0, 0), (5, 2)),
                         ((4, 6), (-1, 2), (2, 1), (10, 2))):
        args = [_f32(*xs), np.array(ns), np.array(b), np.array(e)]
        got = vm.run(*args).numpy()
        want = np.exp(args[0]).reshape(ns)[b[0]:e[0], b[1]:e[1]] * 2.5
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_data_dependent_op_feeding_later_ops():
    x = relay.var("x", shape=(Any(),))
    values, _, _, count = relay.unique(x)
    distinct = relay.strided_slice(values, relay.const(np.array([0], "int64")),
                                   relay.cast(count, "int64"))
    y = relay.nn.softmax(relay.exp(distinct) + relay.const(1.0, "float32"))
    func = relay.Function([x], relay.Tuple([y, relay.sum(distinct)]))
    vm = _vm(func)
    for data in ([3, 1, 3, 2, 1], [0.5], [2, 2, 2, 2], [v / 10 for v in range(40, 0, -3)] * 2):
        xa = np.array(data, "float32")
        probs, total = vm.run(xa)
        u = np.unique(xa)
        np.testing.assert_allclose(probs.numpy(), np.exp(np.exp(u) + 1) /
                                   np.exp(np.exp(u) + 1).sum(), rtol=1e-5)
        np.testing.assert_allclose(total.numpy(), u.sum(), rtol=1e-6)


def _growing_loop_module() -> tvm.IRModule:
    """grow(i, acc) = i == 0 ? acc : grow(i - 1, concat(acc, tanh(last row of acc) + 1)):
    the carried tensor gains a row each iteration (Tensor[(?, 4)])."""
    mod = tvm.IRModule()
    grow = relay.GlobalVar("grow")
    i = relay.var("i", shape=(), dtype="int32")
    acc = relay.var("acc", shape=(Any(), 4))
    last = relay.strided_slice(acc, [-1], [np.iinfo("int64").max])
    row = relay.tanh(last) + relay.const(1.0, "float32")
    step = relay.Call(grow, [relay.subtract(i, relay.const(1, "int32")),
                             relay.concatenate([acc, row], axis=0)])
    mod[grow] = relay.Function([i, acc], relay.If(relay.equal(i, relay.const(0, "int32")),
                                                  acc, step),
                               relay.TensorType((Any(), 4)))
    n = relay.var("n", shape=(), dtype="int32")
    x = relay.var("x", shape=(1, 4))
    mod["main"] = relay.Function([n, x], relay.Call(grow, [n, x]))
    return mod


def test_a_loop_whose_carried_tensor_grows_each_iteration():
    mod = _growing_loop_module()
    vm = _vm(mod)
    xa = _f32(1, 4)
    for n in (0, 1, 6, 20):
        got = vm.run(np.array(n, "int32"), xa).numpy()
        want = [xa[0]]
        for _ in range(n):
            want.append(np.tanh(want[-1]) + 1)
        np.testing.assert_allclose(got, np.stack(want), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, interpreter.evaluate(mod, [np.array(n, "int32"), xa]),
                                   rtol=1e-5, atol=1e-6)


def test_a_shape_that_breaks_the_models_constraints_names_the_input():
    x = relay.var("x", shape=(Any(), 4))
    y = relay.var("y", shape=(Any(), 4))
    vm = _vm(relay.Function([x, y], relay.add(x, y) * relay.const(2.0, "float32")))
    assert vm.run(np.ones((3, 4), "float32"), np.ones((1, 4), "float32")).shape == (3, 4)
    with pytest.raises(ShapeError, match=r"dims 3 and 2 do not broadcast \(inputs 'x' \(3, 4\), "
                                         r"'y' \(2, 4\), expected 'x' \(\?, 4\), 'y' \(\?, 4\)"):
        vm.run(np.ones((3, 4), "float32"), np.ones((2, 4), "float32"))
    with pytest.raises(ValueError, match=r"input 'y': expected shape \(\?, 4\) dtype float32, "
                                         r"got shape \(3, 5\)"):
        vm.run(np.ones((3, 4), "float32"), np.ones((3, 5), "float32"))


def test_a_shared_dynamic_dim_is_checked_across_inputs():
    a = relay.var("a", shape=(Any(), 8))
    w = relay.var("w", shape=(8, Any()))
    vm = _vm(relay.Function([a, w], relay.nn.matmul(a, relay.nn.relu(w))))
    assert vm.run(_f32(2, 8), _f32(8, 3)).shape == (2, 3)
    b = relay.var("b", shape=(Any(), Any()))
    c = relay.var("c", shape=(Any(), 5))
    vm = _vm(relay.Function([b, c], relay.nn.dense(b, c)))
    assert vm.run(_f32(2, 5), _f32(3, 5)).shape == (2, 3)
    with pytest.raises(ShapeError, match=r"input 'b'.*input 'c'|input 'b': expected"):
        vm.run(_f32(2, 4), _f32(3, 5))


def test_a_dynamic_executable_round_trips_through_save_and_load_exec():
    x = relay.var("x", shape=(Any(), 6))
    shape = relay.var("shape", shape=(3,), dtype="int64")
    y = relay.reshape(relay.sigmoid(x), shape)
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x, shape], y)))
    assert exe.shape_programs
    code, lib = exe.save()
    loaded = Executable.load_exec(code, lib)
    assert loaded.bytecode == exe.bytecode and len(loaded.shape_programs) == \
        len(exe.shape_programs)
    assert all(a == b for a, b in zip(loaded.shape_programs, exe.shape_programs))
    loaded.compile_hook = exe.compile_hook  # the kernels still compile in this process
    xa = _f32(4, 6)
    got = VirtualMachine(loaded, runtime.cpu()).run(xa, np.array([2, -1, 3])).numpy()
    np.testing.assert_allclose(got, (1 / (1 + np.exp(-xa))).reshape(2, 4, 3), rtol=1e-6)
    with pytest.raises(ShapeError, match=r"cannot infer the -1 in \[5, -1, 3\] for input \(4, 6\)"):
        VirtualMachine(loaded, runtime.cpu()).run(xa, np.array([5, -1, 3]))
