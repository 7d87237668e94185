"""What a VirtualMachine prepares once (runtime.vm.prepare): fixed registers, native runs of
kernel calls over precomputed argument arrays, pool tensors; results as before, errors as
clear as before."""
from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper

import compiler as tvm
import runtime
from compiler import relay
from compiler.frontend import from_onnx
from runtime.errors import KernelError
from runtime.vm import Executable, VirtualMachine, serialize
from runtime.vm.prepare import FIXED, NATIVE, PACKED, POOL_TENSOR

RNG = np.random.default_rng(11)


def _f32(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _cnn():
    x = relay.var("x", shape=(1, 3, 12, 12))
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(_f32(8, 3, 3, 3)), padding=(1, 1)))
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    a = relay.nn.relu(relay.nn.conv2d(y, relay.const(_f32(8, 8, 1, 1))))
    b = relay.nn.relu(relay.nn.conv2d(y, relay.const(_f32(8, 8, 3, 3)), padding=(1, 1)))
    y = relay.concatenate([a, b], axis=1)
    y = relay.nn.softmax(relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y)))
    return tvm.IRModule.from_expr(relay.Function([x], y))


def _graph_output(mod, xa):
    factory = relay.build(mod, target="llvm")
    gm = runtime.graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gm.set_input("x", xa)
    gm.run()
    return gm.get_output(0).numpy()


def test_a_static_network_is_one_native_run():
    mod = _cnn()
    exe = relay.vm.compile(mod, target="llvm")
    vm = VirtualMachine(exe, runtime.cpu())
    code = vm._code[0]
    runs = [inst[1] for inst in code if inst[0] == NATIVE]
    calls = sum(inst[0] == 2 for inst in exe.function("main").code)  # InvokePacked
    assert len(runs) == 1 and runs[0].count == calls
    assert [p.reg for p in runs[0].patches] == [0]  # only the input is checked per run
    assert len(runs[0].allocations) == 1  # the result: its address written as it is made
    assert all(inst[0] in (NATIVE, FIXED, PACKED, POOL_TENSOR) or inst[0] >= 0 for inst in code)
    for _ in range(3):
        xa = _f32(1, 3, 12, 12)
        np.testing.assert_allclose(vm.run(xa).numpy(), _graph_output(mod, xa), rtol=1e-5,
                                   atol=1e-6)
    assert not vm._addresses  # a run lets go of its tensors' addresses
    assert vm.pool.stats()["leased_bytes"] == 0  # and of its pool storage


def test_a_kernel_failing_in_a_native_run_is_named_and_the_vm_keeps_working():
    data = relay.var("data", shape=(6, 4))
    idx = relay.var("idx", shape=(3,), dtype="int64")
    y = relay.exp(relay.take(relay.tanh(data), idx, axis=0, mode="fast"))
    mod = tvm.IRModule.from_expr(relay.Function([data, idx], y))
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), runtime.cpu())
    assert any(inst[0] == NATIVE for inst in vm._code[0])
    xa = _f32(6, 4)
    good = np.array([0, 5, -1])
    np.testing.assert_allclose(vm.run(xa, good).numpy(), np.exp(np.tanh(xa))[good], rtol=1e-6)
    with pytest.raises(KernelError, match=r"kernel '.*take.*'.*index is out of range"):
        vm.run(xa, np.array([0, 6, 1]))
    np.testing.assert_allclose(vm.run(xa, good).numpy(), np.exp(np.tanh(xa))[good], rtol=1e-6)


def test_a_wrong_input_to_a_native_run_is_refused_before_native_code_runs():
    mod = _cnn()
    exe = relay.vm.compile(mod, target="llvm")
    vm = VirtualMachine(exe, runtime.cpu())
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(1, 3, 12, 12\)"):
        vm.run(_f32(1, 3, 12, 13))
    strided = np.zeros((1, 3, 12, 24), "float32")[..., ::2]
    strided[...] = _f32(1, 3, 12, 12)
    np.testing.assert_allclose(vm.run(strided).numpy(), _graph_output(mod, strided.copy()),
                               rtol=1e-5, atol=1e-6)  # copied once, kernel-ready


def test_a_call_whose_fixed_arguments_do_not_fit_is_left_to_the_interpreter():
    """An edited (untrusted) program placing a tensor of another shape than its kernel takes:
    no native run is built over it, and the interpreter refuses it when it runs."""
    x = relay.var("x", shape=(4, 8))
    y = relay.tanh(relay.exp(x))
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    code, lib = exe.save()
    program_bytes, blob = serialize._sections(code)
    program = json.loads(program_bytes)
    main = program["functions"][0]
    at = next(i for i, inst in enumerate(main["code"]) if inst[0] == "AllocTensor"
              and inst[3] == [4, 8])
    main["code"][at][3] = [8, 4]
    edited = Executable.load_exec(_encode(program, blob), lib)
    vm = VirtualMachine(edited, runtime.cpu())
    with pytest.raises(ValueError, match=r"argument 1 of kernel .* must be \(4, 8\) float32, "
                                         r"the program gives \(8, 4\)"):
        vm.run(_f32(4, 8))


def _encode(program: dict, blob: bytes) -> bytes:
    import hashlib
    import struct
    sections = [json.dumps(program).encode(), blob]
    body = serialize.MAGIC + struct.pack("<I", serialize.VERSION)
    body += b"".join(struct.pack("<Q", len(s)) + s for s in sections)
    return body + hashlib.sha256(body).digest()


def test_a_pool_allocation_too_small_for_its_tensor_is_refused():
    x = relay.var("x", shape=(4, 8))
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x], relay.exp(x))),
                           target="llvm")
    code, lib = exe.save()
    program_bytes, blob = serialize._sections(code)
    program = json.loads(program_bytes)
    main = program["functions"][0]
    size = next(inst for inst in main["code"] if inst[0] == "LoadConsti")
    size[1] = 64  # the tensor takes 128 bytes
    vm = VirtualMachine(Executable.load_exec(_encode(program, blob), lib), runtime.cpu())
    with pytest.raises(ValueError, match=r"does not fit in a storage of 64 bytes"):
        vm.run(_f32(4, 8))



def test_tensors_fixed_inside_a_native_run_stay_alive():
    """A tensor placed in static storage inside a native run is known there only by its
    address: the VM must keep it alive, or its id goes to a new tensor that then reads and
    writes the static storage instead of its own (an ONNX reverse LSTM gave zeros)."""
    hidden, seq = 3, 4
    node = helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=hidden,
                            direction="reverse")
    shapes = {"X": (seq, 1, 2), "W": (1, 4 * hidden, 2), "R": (1, 4 * hidden, hidden)}
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                      for n, s in shapes.items()],
        [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, (1, 1, hidden))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    mod, _ = from_onnx(model)
    feeds = [_f32(*s) for s in shapes.values()]
    want = relay.create_executor("debug", mod=mod).evaluate()(*feeds).numpy()
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), runtime.cpu())
    for key, (tensor, address) in vm._fixed_addresses.items():
        assert id(tensor) == key and tensor.ctypes.data == address
    churn = [np.empty((1, 4 * hidden), "float32") for _ in range(2000)]  # reuses freed ids
    for _ in range(3):
        np.testing.assert_allclose(vm.run(*feeds).numpy(), want, rtol=1e-5, atol=1e-6)
    assert vm._fixed_addresses and churn
