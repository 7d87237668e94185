"""Symbolic kernels (issue 22 item 3): an Any-shaped primitive function compiled once into a
kernel whose loop bounds are read from the run-time shapes, so a VM executable runs any
valid shape without a compiler (after save/load_exec, export, in another process), while
the compiler, where present, still specialises per shape."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import runtime
from codegen.symbolic import fit, sample_points
from compiler import relay
from compiler.frontend import from_onnx
from runtime.library import check_signatures
from runtime.symbolic_signature import SymbolicSignature
from runtime.vm import Executable, VirtualMachine

RNG = np.random.default_rng(22)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _loaded(func) -> tuple[Executable, VirtualMachine]:
    """The function compiled for the VM, saved and loaded back: no compile hook."""
    exe = relay.vm.compile(relay.IRModule.from_expr(func), target="llvm")
    code, lib = exe.save()
    loaded = Executable.load_exec(code, lib)
    assert loaded.compile_hook is None
    return exe, VirtualMachine(loaded, runtime.cpu())


def _kinds(exe: Executable) -> set[str]:
    return {k.kind for k in exe.kernels}


def test_elementwise_and_a_reduction_run_any_shape_without_a_compiler():
    x = relay.var("x", shape=(relay.Any(), relay.Any(), 24))
    bias = _f32(24)
    y = relay.nn.relu(relay.add(relay.exp(x), relay.const(bias)))
    func = relay.Function([x], relay.Tuple([y, relay.sum(y, axis=2), relay.max(y, axis=1)]))
    exe, vm = _loaded(func)
    assert _kinds(exe) == {"symbolic"}
    for shape in ((1, 1, 24), (3, 5, 24), (2, 67, 24), (9, 128, 24)):
        a = _f32(*shape)
        want = np.maximum(np.exp(a) + bias, 0)
        got = vm.invoke("main", a)
        np.testing.assert_allclose(got[0].numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1].numpy(), want.sum(2), rtol=1e-4)
        np.testing.assert_allclose(got[2].numpy(), want.max(1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows", [1, 4, 37])
def test_dense_with_a_dynamic_batch_falls_back_to_the_generic_rule(rows):
    w = _f32(16, 40)
    x = relay.var("x", shape=(relay.Any(), 40))
    exe, vm = _loaded(relay.Function([x], relay.nn.dense(x, relay.const(w))))
    assert _kinds(exe) == {"symbolic"}
    a = _f32(rows, 40)
    np.testing.assert_allclose(vm.invoke("main", a).numpy(), a @ w.T, rtol=1e-4, atol=1e-5)


def test_batch_matmul_over_a_shared_dynamic_batch():
    n = relay.Any()
    a = relay.var("a", shape=(n, relay.Any(), 16))
    c = relay.var("c", shape=(n, 24, 16))
    exe, vm = _loaded(relay.Function([a, c], relay.nn.batch_matmul(a, c)))
    assert _kinds(exe) == {"symbolic"}
    for batch, m in ((1, 1), (2, 7), (3, 40)):
        x, y = _f32(batch, m, 16), _f32(batch, 24, 16)
        np.testing.assert_allclose(vm.invoke("main", x, y).numpy(),
                                   x @ y.transpose(0, 2, 1), rtol=1e-4, atol=1e-5)


def test_row_kernels_with_scratch_at_sizes_on_and_off_their_blocks():
    """Softmax and layer norm keep per-row scratch (a run-time size, from the heap) and take
    rows in blocks: whole blocks only, a remainder, a single row."""
    g, b = _f32(64), _f32(64)
    x = relay.var("x", shape=(relay.Any(), 64))
    exe, vm = _loaded(relay.Function([x], relay.Tuple([
        relay.nn.softmax(x), relay.nn.layer_norm(x, relay.const(g), relay.const(b))])))
    assert _kinds(exe) == {"symbolic"}
    for rows in (1, 3, 4, 8, 64, 67):
        a = _f32(rows, 64)
        e = np.exp(a - a.max(1, keepdims=True))
        mean, var = a.mean(1, keepdims=True), a.var(1, keepdims=True)
        soft, norm = vm.invoke("main", a)
        np.testing.assert_allclose(soft.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5,
                                   atol=1e-7)
        np.testing.assert_allclose(norm.numpy(), (a - mean) / np.sqrt(var + 1e-5) * g + b,
                                   rtol=1e-4, atol=1e-5)


def test_two_dynamic_dims_that_broadcast_either_way():
    x, y = relay.var("x", shape=(relay.Any(), 16)), relay.var("y", shape=(relay.Any(), 16))
    exe, vm = _loaded(relay.Function([x, y], relay.multiply(relay.add(x, y), y)))
    assert _kinds(exe) == {"symbolic"}
    for rows_x, rows_y in ((1, 5), (5, 1), (5, 5), (1, 1)):
        a, b = _f32(rows_x, 16), _f32(rows_y, 16)
        np.testing.assert_allclose(vm.invoke("main", a, b).numpy(), (a + b) * b, rtol=1e-6)
    with pytest.raises(ValueError, match="do not broadcast"):
        vm.invoke("main", _f32(3, 16), _f32(2, 16))


def test_a_static_and_a_symbolic_kernel_of_one_name_are_told_apart():
    """Fuzzer find (seed 51): a static and a dynamic fused max were both named
    tvmgen_default_fused_max, which one library cannot hold."""
    x, y = relay.var("x", shape=(relay.Any(), 8)), relay.var("y", shape=(3, 8))
    exe, vm = _loaded(relay.Function([x, y], relay.Tuple([relay.max(x, axis=1),
                                                          relay.max(y, axis=1)])))
    assert sorted(k.kind for k in exe.kernels) == ["static", "symbolic"]
    assert len({k.name for k in exe.kernels}) == 2
    a, b = _f32(5, 8), _f32(3, 8)
    got = vm.invoke("main", a, b)
    np.testing.assert_array_equal(got[0].numpy(), a.max(1))
    np.testing.assert_array_equal(got[1].numpy(), b.max(1))


def test_the_compiler_still_specialises_where_it_is_attached():
    x = relay.var("x", shape=(relay.Any(), 8))
    exe = relay.vm.compile(relay.IRModule.from_expr(relay.Function([x], relay.negative(x))))
    assert _kinds(exe) == {"symbolic"} and exe.compile_hook is not None
    vm = VirtualMachine(exe, runtime.cpu())
    a = _f32(5, 8)
    np.testing.assert_array_equal(vm.invoke("main", a).numpy(), -a)
    assert exe.specialisation_stats["compiled"] == 1  # the static kernel: the fast path


def test_an_exported_executable_runs_new_shapes_in_a_process_without_the_compiler(tmp_path):
    x = relay.var("x", shape=(relay.Any(), 12))
    w = _f32(6, 12)
    func = relay.Function([x], relay.Tuple([relay.nn.dense(x, relay.const(w)),
                                            relay.sum(relay.sigmoid(x), axis=1)]))
    exe = relay.vm.compile(relay.IRModule.from_expr(func), target="llvm")
    path = str(tmp_path / "model.rjit")
    exe.export_library(path)
    np.save(tmp_path / "w.npy", w)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import runtime
        from runtime.vm import VirtualMachine
        exe = runtime.load_module({path!r})
        vm = VirtualMachine(exe, runtime.cpu())
        w = np.load({str(tmp_path / 'w.npy')!r})
        for rows in (1, 3, 50):
            x = np.random.default_rng(rows).standard_normal((rows, 12)).astype(np.float32)
            dense, total = vm.invoke("main", x)
            np.testing.assert_allclose(dense.numpy(), x @ w.T, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(total.numpy(), (1 / (1 + np.exp(-x))).sum(1),
                                       rtol=1e-4)
        assert not any(m == "compiler" or m.startswith(("compiler.", "codegen"))
                       for m in sys.modules), "the compiler was imported"
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_fit_recovers_whole_polynomials_and_refuses_others():
    points = sample_points(2)
    strides = [b * s * 768 + 5 * s for b, s in points]
    extents = [b * s * s for b, s in points]
    assert fit([tuple(strides), tuple(extents)], points) == [
        ((5, (0, 1)), (768, (1, 1))), ((1, (1, 2)),)]
    tiles = tuple(b * s // 16 for b, s in points)  # a schedule's blocks and remainder
    rest = tuple(3 * (b * s % 16) + 1 for b, s in points)
    assert fit([tiles, rest], points) == [("floordiv", ((1, (1, 1)),), 16, 1, 0),
                                          ("floormod", ((1, (1, 1)),), 16, 3, 1)]
    assert fit([tuple(b * s % 1000 for b, s in points)], points) is None


def test_a_symbolic_signature_checks_every_dim_before_a_call():
    table = {"k": [[[[[1, 0]], 64], "float32"], [[[[1, 0]], [[2, 0, 1]]], "float32"],
                   [[[[1, 1]]], "float32"]]}
    sig = SymbolicSignature("k", check_signatures(table, ["k"])["k"])
    assert sig.bind("k", [(3, 64), (3, 12), (2,)]) == [3, 2]
    with pytest.raises(ValueError, match=r"argument 1 of kernel 'k' must be \(3, 12\)"):
        sig.bind("k", [(3, 64), (3, 13), (2,)])
    with pytest.raises(ValueError, match="expected"):
        check_signatures({"k": [[[[["x", 0]]], "float32"]]}, ["k"])
    with pytest.raises(ValueError, match="symbol 0 is not any argument's dim"):
        SymbolicSignature("k", check_signatures({"k": [[[[[2, 1]]], "float32"]]}, ["k"])["k"])


def _without_hook(model) -> tuple[VirtualMachine, list[str]]:
    """The ONNX model compiled for the VM, saved, loaded back without a compile hook."""
    mod, params = from_onnx(model)
    exe = relay.vm.compile(mod, target="llvm", params=params)
    code, lib = exe.save()
    loaded = Executable.load_exec(code, lib)
    assert loaded.compile_hook is None
    return VirtualMachine(loaded, runtime.cpu()), [
        p.name_hint for p in mod["main"].params if p.name_hint not in params]


def test_the_issues_control_flow_models_run_saved_without_a_compiler():
    """The greedy decode (a Loop with a data-dependent trip count growing its outputs), an
    If in a loop body and the detection post-process (TopK + NonZero + NonMaxSuppression)
    against onnxruntime, from a saved executable: every dynamic kernel is symbolic."""
    ort = pytest.importorskip("onnxruntime")
    from tests.frontend.test_onnx_control_flow import _flat
    from tests.frontend.test_onnx_loop import (_decode_model, _detection_model,
                                               _nested_if_loop_model)
    cases = [(_decode_model(), [{"start": np.array(s, np.int64), "max_len": np.array(n, np.int64)}
                                for s, n in ((3, 6), (1, 0), (5, 12))]),
             (_nested_if_loop_model(None), [{"x": _f32(3), "trip": np.array(n, np.int64)}
                                            for n in (0, 1, 6)])]
    rng = np.random.default_rng(3)
    corner = rng.uniform(0, 6, (2, 10, 2))
    cases.append((_detection_model(), [{
        "boxes": np.concatenate([corner, corner + rng.uniform(1, 4, (2, 10, 2))],
                                axis=2).astype(np.float32),
        "scores": (rng.uniform(0, 1, (2, 3, 10)) ** 3).astype(np.float32)}]))
    for model, feeds_list in cases:
        vm, names = _without_hook(model)
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        for feeds in feeds_list:
            got = _flat(vm.invoke("main", *[feeds[n] for n in names]))
            want = session.run(None, feeds)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
