"""Specialised kernel entries: compiled on first sight at the shapes the VM meets, kept in a
bounded cache, and a clear error where no compiler is attached (an exported executable).

Until every op accepts Any dims these tests make every primitive function "dynamic" (the
resolver's is_dynamic patched), so the run-time compile path runs on static programs."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
import runtime
from compiler import relay
from compiler.backend.vm import kernels as vm_kernels
from runtime.errors import VMError
from runtime.vm import Executable, VirtualMachine

RNG = np.random.default_rng(3)


@pytest.fixture
def all_dynamic(monkeypatch):
    monkeypatch.setattr(vm_kernels, "is_dynamic", lambda func: True)


def _program():
    x = relay.var("x", shape=(4, 8))
    w = relay.const(RNG.standard_normal((3, 8)).astype("f4"))
    y = relay.nn.relu(relay.nn.dense(x, w))
    return tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([y, relay.exp(x)]))), w


def test_kernels_compile_on_first_sight_and_are_kept(all_dynamic):
    mod, w = _program()
    exe = relay.vm.compile(mod)
    assert exe.lib is None and {k.kind for k in exe.kernels} == {"specialised"}
    vm = VirtualMachine(exe, runtime.cpu())
    xa = RNG.standard_normal((4, 8)).astype("f4")
    for _ in range(3):
        out = vm.run(xa)
    np.testing.assert_allclose(out[0].numpy(), np.maximum(xa @ w.data.numpy().T, 0),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1].numpy(), np.exp(xa), rtol=1e-6)
    assert exe.specialisation_stats["compiled"] == len(exe.kernels)
    assert exe.specialisation_stats["hits"] == 2 * len(exe.kernels)


def test_the_number_of_specialisations_kept_is_bounded(all_dynamic):
    exe = relay.vm.compile(_program()[0])
    exe.max_specialisations = 1
    vm = VirtualMachine(exe, runtime.cpu())
    xa = RNG.standard_normal((4, 8)).astype("f4")
    vm.run(xa)
    vm.run(xa)
    stats = exe.specialisation_stats
    assert stats["compiled"] == 2 * len(exe.kernels) and stats["evicted"] > 0


def test_an_exported_executable_cannot_specialise_and_says_so(all_dynamic, tmp_path):
    exe = relay.vm.compile(_program()[0])
    path = str(tmp_path / "dyn.rjit")
    exe.export_library(path)
    loaded = runtime.load_module(path)
    assert isinstance(loaded, Executable) and loaded.compile_hook is None
    with pytest.raises(VMError, match=r"kernel 'tvmgen_default_fused_.*' has no compiled code "
                                      r"for inputs \(4, 8\) float32.*no compiler attached"):
        VirtualMachine(loaded, runtime.cpu()).run(np.zeros((4, 8), "f4"))
