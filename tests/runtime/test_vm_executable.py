"""Executable.save / load_exec and the single-file export round-trip; the code is untrusted:
every kind of corruption is refused with a clear error before anything runs, and a fuzz of
every field of every instruction is refused or runs, never crashes or hangs."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import compiler as tvm
import runtime
from compiler import relay
from runtime.vm import Executable, VirtualMachine, serialize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(7)


def _module() -> tvm.IRModule:
    """A loop over a tensor (a global function calling itself), an If, a closure, tuples and a
    constant: every kind of instruction the compiler emits."""
    mod = tvm.IRModule()
    step = relay.GlobalVar("step")
    n = relay.var("n", shape=(), dtype="int32")
    acc = relay.var("acc", shape=(2, 3))
    w = relay.const(RNG.standard_normal((2, 3)).astype("f4"))
    body = relay.If(relay.equal(n, relay.const(0, "int32")), acc,
                    relay.Call(step, [relay.subtract(n, relay.const(1, "int32")),
                                      relay.tanh(relay.add(acc, w))]))
    mod[step] = relay.Function([n, acc], body, relay.TensorType((2, 3)))
    x = relay.var("x", shape=(2, 3))
    k = relay.var("k", shape=(), dtype="int32")
    y = relay.var("y", shape=(2, 3))
    f = relay.var("f")
    looped = relay.Call(step, [k, x])
    main = relay.Let(f, relay.Function([y], relay.multiply(y, x)),
                     relay.Tuple([relay.Call(f, [looped]), relay.reshape(looped, (3, 2))]))
    mod["main"] = relay.Function([x, k], main)
    return mod


@pytest.fixture(scope="module")
def compiled():
    exe = relay.vm.compile(_module(), target="llvm")
    xa = RNG.standard_normal((2, 3)).astype("f4")
    out = VirtualMachine(exe, runtime.cpu()).run(xa, np.array(3, "int32"))
    return exe, xa, [o.numpy() for o in out]


def _run(exe, xa):
    out = VirtualMachine(exe, runtime.cpu()).run(xa, np.array(3, "int32"))
    return [o.numpy() for o in out]


def test_save_and_load_exec_round_trip(compiled):
    exe, xa, expected = compiled
    code, lib = exe.save()
    assert isinstance(code, bytes) and lib is exe.lib
    loaded = Executable.load_exec(code, lib)
    assert loaded.bytecode == exe.bytecode
    for got, want in zip(_run(loaded, xa), expected):
        np.testing.assert_array_equal(got, want)


def test_single_file_export_round_trip(compiled, tmp_path):
    exe, xa, expected = compiled
    path = str(tmp_path / "model.rjit")
    exe.export_library(path)
    for loaded in (runtime.load_module(path), runtime.vm.load_executable(path)):
        assert isinstance(loaded, Executable)
        for got, want in zip(_run(loaded, xa), expected):
            np.testing.assert_array_equal(got, want)
    graph_path = str(tmp_path / "graph.rjit")
    a = relay.var("a", shape=(2,))
    relay.build(tvm.IRModule.from_expr(relay.Function([a], relay.exp(a)))).export_library(
        graph_path)
    with pytest.raises(ValueError, match="a graph module, not a VM executable"):
        runtime.vm.load_executable(graph_path)


def _program(code: bytes) -> tuple[dict, bytes]:
    program, blob = serialize._sections(code)
    return json.loads(program), blob


def _code(program: dict, blob: bytes) -> bytes:
    sections = [json.dumps(program).encode(), blob]
    body = serialize.MAGIC + struct.pack("<I", serialize.VERSION)
    body += b"".join(struct.pack("<Q", len(s)) + s for s in sections)
    return body + hashlib.sha256(body).digest()


def _main_and_step(program: dict) -> tuple[dict, dict]:
    by_name = {f["name"]: f for f in program["functions"]}
    return by_name["main"], by_name["step"]


def _first(func: dict, opcode: str) -> int:
    return next(i for i, inst in enumerate(func["code"]) if inst[0] == opcode)


CORRUPTIONS = {
    "register out of range": (lambda m, s, p: m["code"][-1].__setitem__(1, 10_000),
                              "register 10000 out of range"),
    "constant index out of range": (
        lambda m, s, p: s["code"][_first(s, "LoadConst")].__setitem__(1, 99),
        "const index 99 out of range"),
    "kernel index out of range": (
        lambda m, s, p: s["code"][_first(s, "InvokePacked")].__setitem__(1, 99),
        "kernel index 99 out of range"),
    "function index out of range": (
        lambda m, s, p: m["code"][_first(m, "Invoke")].__setitem__(1, 99),
        "func index 99 out of range"),
    "jump past the end": (lambda m, s, p: s["code"][_first(s, "If")].__setitem__(3, 500),
                          "jump offset 500 must go forward and stay inside"),
    "backward jump": (lambda m, s, p: s["code"][_first(s, "If")].__setitem__(2, -3),
                      "jump offset -3 must go forward"),
    "zero jump (a loop without calls)": (
        lambda m, s, p: s["code"][_first(s, "If")].__setitem__(2, 0), "jump offset 0"),
    "kernel given too few buffers": (
        lambda m, s, p: s["code"][_first(s, "InvokePacked")][3].pop(), "calls kernel"),
    "kernel that the library lacks": (lambda m, s, p: p["kernels"][0].__setitem__(0, "nope"),
                                      "static kernel not in the kernel library"),
    "kernel signature arity": (lambda m, s, p: p["kernels"][0].__setitem__(2, 7),
                               "the library's kernel takes"),
    "unknown kernel kind": (lambda m, s, p: p["kernels"][0].__setitem__(1, "magic"),
                            "kind 'magic'"),
    "register read before written": (
        lambda m, s, p: s["code"][_first(s, "InvokePacked")][3].__setitem__(0, s["registers"] - 1),
        "may be read before it is written"),
    "unknown opcode": (lambda m, s, p: s["code"][0].__setitem__(0, "Jump"), r"expected \[opcode"),
    "missing field": (lambda m, s, p: s["code"][0].pop(), "expected"),
    "field of the wrong kind": (lambda m, s, p: s["code"][0].__setitem__(1, "x"),
                                "must be an integer"),
    "runs off the end": (lambda m, s, p: m["code"].pop(), "run off the end"),
    "unknown dtype": (lambda m, s, p: s["code"][_first(s, "AllocStorage")].__setitem__(3, "f99"),
                      "dtype"),
    "misaligned tensor offset": (
        lambda m, s, p: s["code"][_first(s, "AllocTensor")].__setitem__(2, 4),
        "multiple of 64"),
    "alignment not a power of two": (
        lambda m, s, p: s["code"][_first(s, "AllocStorage")].__setitem__(2, 48), "power of two"),
    "wrong argument count to a function": (
        lambda m, s, p: m["code"][_first(m, "Invoke")][2].pop(), "takes 2"),
    "too few registers": (lambda m, s, p: s.__setitem__("registers", 1), "register count"),
    "duplicate function names": (lambda m, s, p: s.__setitem__("name", "main"),
                                 "two functions are named"),
    "negative shape": (lambda m, s, p: s["code"][_first(s, "AllocTensor")].__setitem__(3, [-1, 3]),
                       "non-negative"),
    "closure capturing more than its function takes": (
        lambda m, s, p: m["code"][_first(m, "AllocClosure")][2].extend([0, 0, 0]),
        "captures 4 values"),
    "bad parameter type": (lambda m, s, p: m["param_types"].__setitem__(0, ["tensor", 3]),
                           "parameter type"),
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupted_code_is_refused_before_anything_runs(compiled, kind):
    exe, _, _ = compiled
    code, lib = exe.save()
    program, blob = _program(code)
    corrupt, message = CORRUPTIONS[kind]
    main, step = _main_and_step(program)
    corrupt(main, step, program)
    with pytest.raises(ValueError, match=message):
        Executable.load_exec(_code(program, blob), lib)


def test_flipped_bytes_and_truncation_are_refused(compiled):
    exe, _, _ = compiled
    code, lib = exe.save()
    flipped = bytearray(code)
    flipped[len(code) // 2] ^= 0xFF
    with pytest.raises(ValueError, match="checksum mismatch"):
        Executable.load_exec(bytes(flipped), lib)
    with pytest.raises(ValueError, match="truncated|checksum"):
        Executable.load_exec(code[:40], lib)
    with pytest.raises(ValueError, match="bad magic"):
        Executable.load_exec(b"X" + code[1:], lib)
    with pytest.raises(TypeError, match="code must be bytes"):
        Executable.load_exec("text", lib)


def _fuzz_values(kind: str, value, registers: int):
    if kind in ("regs", "ints"):
        yield [*value[:-1]] if value else [0]
        yield [*value, 0]
        yield [registers - 1] * max(len(value), 1)
        return
    if kind in ("dtype", "message"):
        yield "int8"
        yield ""
        return
    for v in (0, 1, 2, -1, registers - 1, registers, 64, 1 << 40):
        if v != value:
            yield v


def _mutants(program: dict):
    """(label, program) for each field of each instruction set to other values."""
    from runtime.vm.bytecode import FIELDS, OPCODES
    for fi, func in enumerate(program["functions"]):
        for pc, inst in enumerate(func["code"]):
            kinds = FIELDS[OPCODES[inst[0]]]
            for k, kind in enumerate(kinds):
                for new in _fuzz_values(kind, inst[k + 1], func["registers"]):
                    p = copy.deepcopy(program)
                    p["functions"][fi]["code"][pc][k + 1] = new
                    yield f"{func['name']}[{pc}] {inst[0]} field {k}={new!r}", p


def test_fuzzed_code_is_refused_or_runs_never_crashes(compiled, tmp_path):
    exe, xa, _ = compiled
    code, lib = exe.save()
    program, blob = _program(code)
    labels = []
    for k, (label, p) in enumerate(_mutants(program)):
        (tmp_path / f"m{k}.bin").write_bytes(_code(p, blob))
        labels.append(label)
    assert len(labels) > 200
    path = str(tmp_path / "model.rjit")
    exe.export_library(path)
    np.save(tmp_path / "x.npy", xa)
    script = textwrap.dedent(f"""
        import json
        import numpy as np
        import runtime
        from runtime.errors import KernelError, VMError
        from runtime.vm import Executable, VirtualMachine
        d = {str(tmp_path)!r}
        lib = runtime.load_module(d + "/model.rjit").lib
        x = np.load(d + "/x.npy")
        for k in range({len(labels)}):
            try:
                exe = Executable.load_exec(open(f"{{d}}/m{{k}}.bin", "rb").read(), lib)
                vm = VirtualMachine(exe, runtime.cpu(), max_calls=10_000)
                vm.run(x, np.array(3, "int32"))
                print(json.dumps(["ran", k, ""]), flush=True)
            except (ValueError, TypeError, KeyError, IndexError, MemoryError, VMError,
                    KernelError) as err:
                print(json.dumps(["refused", k, type(err).__name__ + ": " + str(err)]),
                      flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"crashed after: {proc.stdout[-500:]}\n{proc.stderr[-2000:]}"
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(labels)
    refused = [r for r in results if r[0] == "refused"]
    assert len(refused) > len(results) // 2  # most edits break the program
    for kind, k, why in refused:
        assert len(why) > 20, f"{labels[k]}: unhelpful error {why!r}"


def _dynamic_code() -> tuple[dict, bytes, object]:
    """The saved program of a dynamic model: its shape programs (one reading a value)."""
    x = relay.var("x", shape=(relay.Any(), 6))
    shape = relay.var("shape", shape=(2,), dtype="int64")
    y = relay.reshape(relay.exp(x), shape)
    exe = relay.vm.compile(tvm.IRModule.from_expr(relay.Function([x, shape], y)))
    code, lib = exe.save()
    program, blob = _program(code)
    assert program["shape_programs"]
    return program, blob, lib


SHAPE_PROGRAM_CORRUPTIONS = {
    "register out of range": (
        lambda p: p["shape_programs"][-1]["outputs"][0].__setitem__(0, 999),
        "not an earlier int register"),
    "unknown shape function": (
        lambda p: next(i for sp in p["shape_programs"] for i in sp["instructions"]
                       if i[0] == "call").__setitem__(1, "no.such.function"),
        "no shape function named 'no.such.function'"),
    "not a shape program": (lambda p: p["shape_programs"].__setitem__(0, [1, 2]),
                            "not a shape program"),
    "ShapeFunc given too few inputs": (
        lambda p: next(inst for inst in p["functions"][0]["code"] if inst[0] == "ShapeFunc")
        [2].pop(), "passes 1 inputs"),
    "shape program index out of range": (
        lambda p: next(inst for inst in p["functions"][0]["code"] if inst[0] == "ShapeFunc")
        .__setitem__(1, 50), "shape index 50 out of range"),
}


@pytest.mark.parametrize("kind", sorted(SHAPE_PROGRAM_CORRUPTIONS))
def test_corrupted_shape_programs_are_refused(kind):
    program, blob, lib = _dynamic_code()
    corrupt, message = SHAPE_PROGRAM_CORRUPTIONS[kind]
    corrupt(program)
    with pytest.raises(ValueError, match=message):
        Executable.load_exec(_code(program, blob), lib)
