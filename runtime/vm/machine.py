"""VirtualMachine: runs an Executable's bytecode (TVM's runtime.vm.VirtualMachine surface).

The interpreter loop keeps its call frames on an explicit stack (a list), so Relay recursion,
which is how Relay loops, never touches Python's recursion limit. A call directly followed
by the Ret of its result is a tail call: it replaces the caller's frame, so a tail-recursive
loop runs in constant stack. Two limits turn runaway programs into errors instead of hangs
(the validator guarantees jumps go forward, so only calls can repeat code):
  max_call_depth   frames alive at once (non-tail recursion), default DEFAULT_MAX_CALL_DEPTH
  max_calls        calls in one invoke (loop iterations), default DEFAULT_MAX_CALLS
each exceeded as a VMError naming the function and the limit (and the register slots of all
live frames are bounded by MAX_LIVE_REGISTERS, so deep recursion cannot exhaust memory).

Registers hold numpy arrays (tensors over pool storage, constants, inputs), tuples, closures
and ints (LoadConsti). A kernel call checks every buffer against the kernel's signature
(type, shape, dtype, contiguity, 64-byte alignment, outputs writable) before native code
runs, as the graph executor does at setup; anything a malformed program could confuse is a
ValueError naming the function, the instruction and what was wrong.

One VirtualMachine is used by one thread at a time (it owns its storage pool, its inputs and
outputs); several VMs may share an Executable.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

from ..benchmark import BenchmarkResult, time_calls
from ..device import Device
from ..dtypes import numpy_dtype
from ..errors import KernelError, VMError
from ..library import status_message
from ..native import native_support
from ..memory import aligned_empty
from ..shape_program import ShapeError
from ..symbolic_signature import SymbolicSignature
from .bytecode import (ALLOC_ADT, ALLOC_CLOSURE, ALLOC_STORAGE, ALLOC_TENSOR, ALLOC_TENSOR_REG,
                       FATAL, GET_FIELD, GOTO, IF, INVOKE, INVOKE_CLOSURE, KILL_REGISTER,
                       LOAD_CONST, LOAD_CONSTI, MOVE, RESHAPE_TENSOR, RET, SHAPE_FUNC, SHAPE_OF,
                       instruction_text)
from .executable import Executable
from .inputs import check_arguments, wrap_output
from .objects import ADT, VMClosure
from .pool import StoragePool, static_storages
from .prepare import (FIXED, NATIVE, PACKED, POOL_TENSOR, NativeRun, describe, place,
                      prepare_function)
from .program import STATIC, SYMBOLIC

DEFAULT_MAX_CALL_DEPTH = 10_000
DEFAULT_MAX_CALLS = 1_000_000
# register slots of all live frames together (8 bytes each): bounds the memory deep recursion
# of functions with large register files can take, whatever the depth limit says
MAX_LIVE_REGISTERS = 1 << 24
MAX_SHAPE_MEMO = 4096  # remembered shape-program results (cleared when full)
MAX_REMEMBERED = 1 << 16  # pool tensors' addresses kept during a run (cleared when full)
_INT64 = np.dtype("int64")


class _Frame:
    """A suspended caller: its function, registers, the Invoke's pc and destination."""

    __slots__ = ("func", "regs", "pc", "dst")

    def __init__(self, func: int, regs: list, pc: int, dst: int) -> None:
        self.func, self.regs, self.pc, self.dst = func, regs, pc, dst


class _Fault(Exception):
    """An error in a native run, with the offset of the instruction it belongs to."""

    def __init__(self, offset: int, error: Exception) -> None:
        super().__init__(offset, error)
        self.offset, self.error = offset, error


class VirtualMachine:
    """Runs an Executable on a device: invoke / run, or set_input + invoke_stateful +
    get_outputs, and benchmark (see the module docstring)."""

    # straight runs of static kernel calls in one native call (a profiler, timing each
    # call, turns them off)
    native_runs = True

    def __init__(self, exe: Executable, device: Device | list | None = None,
                 memory_cfg: Any = None, max_call_depth: int = DEFAULT_MAX_CALL_DEPTH,
                 max_calls: int = DEFAULT_MAX_CALLS) -> None:
        if not isinstance(exe, Executable):
            raise TypeError(f"VirtualMachine expects an Executable, got {type(exe).__name__}")
        if isinstance(device, (list, tuple)):
            if len(device) != 1:
                raise ValueError(f"VirtualMachine: expected one device, got {device}")
            device = device[0]
        if device is not None and not isinstance(device, Device):
            raise TypeError(f"VirtualMachine: device must be a runtime Device, got "
                            f"{type(device).__name__}")
        if memory_cfg not in (None, "pooled"):
            raise ValueError(f"VirtualMachine: memory_cfg {memory_cfg!r} is not supported; "
                             f"storage always comes from a pool (None or 'pooled')")
        for name, value in (("max_call_depth", max_call_depth), ("max_calls", max_calls)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"VirtualMachine: {name} must be an int >= 1, got {value!r}")
        self.exe = exe
        self.device = device
        self.max_call_depth = max_call_depth
        self.max_calls = max_calls
        self.pool = StoragePool()
        self._shape_memo: dict[tuple, tuple] = {}  # (program, input shapes) -> output shapes
        self._shape_tuples: dict[int, tuple] = {}  # id(a memo's shape tensor) -> its dims
        self._specialisations: dict[tuple, tuple] = {}  # (kernel, argument types) -> kernel
        self._inputs: dict[str, list] = {}
        self._outputs: Any = None
        self._static = [self._static_kernel(i) for i in range(len(exe.kernels))]
        self._symbolic: dict[int, tuple] = {}  # entry -> (Kernel, SymbolicSignature, dtypes)
        self._tails = [_tail_calls(f.code) for f in exe.functions]
        # the VM's own view of each function's code (prepare.py), and the addresses of the
        # values it fixed; pool tensors' addresses are kept while a run holds them
        self._code: list[list[tuple]] = []
        self._fixed_addresses: dict[int, tuple[np.ndarray, int]] = {}
        for f, storages in zip(exe.functions, static_storages(exe.functions)):
            code, addresses = prepare_function(
                f.code, exe.constants, storages,
                self._static if self.native_runs else [None] * len(self._static))
            self._code.append(code)
            self._fixed_addresses.update(addresses)
        self._addresses: dict[int, tuple[np.ndarray, int]] = {}  # id -> (tensor, address)
        self._status = ctypes.c_int32(0)
        self._native = native_support()

    def _static_kernel(self, index: int):
        entry = self.exe.kernels[index]
        if entry.kind != STATIC:
            return None
        kernel = self.exe.lib.get_function(entry.name)
        return kernel.cfunc, _signature(self.exe.lib.signatures[entry.name]), entry.name

    # ---- TVM's surface --------------------------------------------------------------------
    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Check and keep the arguments invoke_stateful(func_name) will pass."""
        func = self.exe.function(func_name)
        addresses: dict = {}
        self._inputs[func_name] = check_arguments(func, args, kwargs, addresses), addresses

    def invoke(self, func_name: str, *args: Any, **kwargs: Any) -> Any:
        """Run a global function on these arguments; an NDArray, an ADT of results, or a
        closure. With no arguments, those set_input gave."""
        func = self.exe.function(func_name)
        if args or kwargs or func_name not in self._inputs:
            addresses: dict = {}
            values = check_arguments(func, args, kwargs, addresses)
        else:
            values, addresses = self._inputs[func_name]
        self._addresses.update(addresses)  # the inputs' addresses, found while checking them
        return wrap_output(self._execute(self.exe.func_index[func_name], values))

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """invoke("main", ...)."""
        return self.invoke("main", *args, **kwargs)

    def invoke_stateful(self, func_name: str) -> None:
        """Run func_name on the inputs set_input gave; get_outputs() reads the result."""
        if func_name not in self._inputs:
            func = self.exe.function(func_name)
            if func.params:
                raise ValueError(f"invoke_stateful({func_name!r}): call set_input("
                                 f"{func_name!r}, ...) first; it takes {list(func.params)}")
            self._inputs[func_name] = [], {}
        self._outputs = self.invoke(func_name)

    def get_outputs(self) -> list:
        """The last invoke_stateful's results: the fields of a tuple result, else [result]."""
        if self._outputs is None:
            raise RuntimeError("get_outputs(): invoke_stateful has not run yet")
        return list(self._outputs) if isinstance(self._outputs, ADT) else [self._outputs]

    def get_num_outputs(self) -> int:
        """len(get_outputs())."""
        return len(self.get_outputs())

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        """Index of a parameter of func_name, -1 when it has none of that name."""
        params = self.exe.function(func_name).params
        return params.index(input_name) if input_name in params else -1

    def benchmark(self, device: Device, *args: Any, func_name: str = "main", repeat: int = 5,
                  number: int = 5, min_repeat_ms: float | None = None, end_to_end: bool = False,
                  **kwargs: Any) -> BenchmarkResult:
        """Time invoking func_name (TVM's VirtualMachine.benchmark); with end_to_end the
        arguments' checks and copies are timed too."""
        if not isinstance(device, Device):
            raise TypeError(f"benchmark: device must be a Device, got {type(device).__name__}")
        if end_to_end:
            def call() -> None:
                self.invoke(func_name, *args, **kwargs)
        else:
            if args or kwargs:
                self.set_input(func_name, *args, **kwargs)

            def call() -> None:
                self.invoke_stateful(func_name)
        return time_calls(call, repeat, number, min_repeat_ms or 0)

    # ---- the interpreter loop ---------------------------------------------------------------
    def _execute(self, func_index: int, args: list) -> Any:
        try:
            return self._interpret(func_index, args)
        finally:
            self._addresses.clear()  # let go of the run's pool tensors

    def _interpret(self, func_index: int, args: list) -> Any:
        functions = self.exe.functions
        constants = self.exe.constants
        codes = self._code
        addresses = self._addresses
        frames: list[_Frame] = []
        fi = func_index
        code = codes[fi]
        tails = self._tails[fi]
        regs: list = [None] * functions[fi].num_registers
        regs[:len(args)] = args
        pc = calls = 0
        slots = len(regs)  # register slots of all live frames
        try:
            while True:
                inst = code[pc]
                op = inst[0]
                if op == NATIVE:
                    try:
                        self._run_native(inst[1], regs)
                    except _Fault as fault:
                        pc += fault.offset  # the failing call's InvokePacked
                        raise fault.error from None
                    pc += inst[2]
                    continue
                if op == FIXED:
                    regs[inst[2]] = inst[1]
                elif op == POOL_TENSOR:
                    regs[inst[4]] = self._pool_tensor(inst[1], inst[2], inst[3])[0]
                    pc += inst[5]
                    continue
                elif op == PACKED:
                    self._invoke_packed(inst, regs)
                elif op == ALLOC_STORAGE:
                    regs[inst[4]] = self._alloc_storage(regs[inst[1]], inst[3])
                elif op == ALLOC_TENSOR:
                    regs[inst[5]] = self._place(regs[inst[1]], inst[2], inst[3], inst[4])
                elif op == KILL_REGISTER:
                    value = regs[inst[1]]
                    if value is not None:
                        addresses.pop(id(value), None)
                        regs[inst[1]] = None
                elif op == MOVE:
                    regs[inst[2]] = regs[inst[1]]
                elif op == LOAD_CONST:
                    regs[inst[2]] = constants[inst[1]]
                elif op == GET_FIELD:
                    regs[inst[3]] = _field(regs[inst[1]], inst[2])
                elif op == ALLOC_ADT:
                    fields = tuple([regs[r] for r in inst[2]])
                    regs[inst[3]] = fields if inst[1] == 0 else ADT(inst[1], fields)
                elif op == IF:
                    pc += inst[2] if _truth(regs[inst[1]]) else inst[3]
                    continue
                elif op == GOTO:
                    pc += inst[1]
                    continue
                elif op == INVOKE or op == INVOKE_CLOSURE:
                    callee, values = self._callee(inst, regs)
                    calls += 1
                    if calls > self.max_calls:
                        raise VMError(f"more than {self.max_calls} calls in one invoke (a loop "
                                      f"that does not end?); VirtualMachine(max_calls=...) "
                                      f"raises the limit")
                    if pc in tails:
                        slots -= len(regs)
                    else:
                        frames.append(_Frame(fi, regs, pc, inst[3]))
                        if len(frames) >= self.max_call_depth:
                            raise VMError(f"call depth exceeds {self.max_call_depth} frames "
                                          f"(recursion too deep); VirtualMachine("
                                          f"max_call_depth=...) raises the limit")
                    fi, pc = callee, 0
                    code, tails = codes[fi], self._tails[fi]
                    slots += functions[fi].num_registers
                    if slots > MAX_LIVE_REGISTERS:
                        raise VMError(f"the live frames hold more than {MAX_LIVE_REGISTERS} "
                                      f"registers (recursion too deep for functions this "
                                      f"large)")
                    regs = [None] * functions[fi].num_registers
                    regs[:len(values)] = values
                    continue
                elif op == RET:
                    value = regs[inst[1]]
                    if not frames:
                        return value
                    frame = frames.pop()
                    slots -= len(regs)
                    fi, regs, pc = frame.func, frame.regs, frame.pc
                    code, tails = codes[fi], self._tails[fi]
                    regs[frame.dst] = value
                elif op == ALLOC_TENSOR_REG:
                    regs[inst[5]] = self._place(regs[inst[1]], inst[2],
                                                self._dims(regs[inst[3]]), inst[4])
                elif op == LOAD_CONSTI:
                    regs[inst[2]] = inst[1]
                elif op == SHAPE_OF:
                    regs[inst[2]] = _shape_tensor(_tensor(regs[inst[1]], "ShapeOf").shape)
                elif op == RESHAPE_TENSOR:
                    regs[inst[3]] = _reshape(regs[inst[1]], self._dims(regs[inst[2]]))
                elif op == ALLOC_CLOSURE:
                    regs[inst[3]] = VMClosure(inst[1], tuple([regs[r] for r in inst[2]]))
                elif op == SHAPE_FUNC:
                    self._shape_func(inst, regs)
                elif op == FATAL:
                    raise VMError(f"the program executed Fatal: {inst[1]}")
                pc += 1
        except (VMError, KernelError, MemoryError, ValueError) as err:
            where = f"VM function {functions[fi].name!r}: {err}" if type(err) is ShapeError \
                else f"{_where(functions[fi], pc)}: {err}"
            try:
                located = type(err)(where)
            except TypeError:  # an exception class with another constructor
                located = ValueError(where)
            raise located from None
        except (TypeError, AttributeError, IndexError, KeyError, OverflowError) as err:
            raise ValueError(f"{_where(functions[fi], pc)}: the program is "
                             f"malformed: {type(err).__name__}: {err}") from None

    def _callee(self, inst: tuple, regs: list) -> tuple[int, list]:
        """(function index, argument values) of an Invoke or InvokeClosure."""
        if inst[0] == INVOKE:
            return inst[1], [regs[r] for r in inst[2]]
        closure = regs[inst[1]]
        if not isinstance(closure, VMClosure):
            raise ValueError(f"InvokeClosure of a {describe(closure)}, not a closure")
        values = [*closure.captured, *(regs[r] for r in inst[2])]
        callee = self.exe.functions[closure.func_index]
        if len(values) != len(callee.params):
            raise ValueError(f"closure of {callee.name!r} called with {len(values)} values "
                             f"({len(closure.captured)} captured); it takes "
                             f"{len(callee.params)}")
        return closure.func_index, values

    def _alloc_storage(self, size: Any, dtype: str) -> np.ndarray:
        if type(size) is np.ndarray:  # a shape: its elements' bytes
            nbytes = math.prod(self._dims(size)) * numpy_dtype(dtype).itemsize
        elif isinstance(size, int) and not isinstance(size, bool):
            nbytes = size
        else:
            raise ValueError(f"AllocStorage size must be an int or a shape tensor, got "
                             f"{describe(size)}")
        lease, address = self.pool.alloc_at(nbytes, f"a {dtype} tensor")
        self._remember(lease, address)
        return lease

    def _dims(self, value: Any) -> tuple[int, ...]:
        """The dims a shape register holds (known at once for a shape program's result)."""
        known = self._shape_tuples.get(id(value))
        return known[1] if known is not None else _shape(value)

    def _remember(self, tensor: np.ndarray, address: int) -> None:
        """Keep a run's tensor's address beside it (until it is killed or the run ends)."""
        if len(self._addresses) >= MAX_REMEMBERED:
            self._addresses.clear()
        self._addresses[id(tensor)] = (tensor, address)

    def _address(self, a: np.ndarray) -> int:
        known = self._addresses.get(id(a))
        if known is not None:
            return known[1]
        known = self._fixed_addresses.get(id(a))
        if known is not None:
            return known[1]
        address = a.ctypes.data
        self._remember(a, address)
        return address

    def _place(self, storage: Any, offset: int, shape: tuple, dtype: str) -> np.ndarray:
        tensor = place(storage, offset, shape, dtype)
        base = self._addresses.get(id(storage))
        if base is not None:
            self._remember(tensor, base[1] + offset)
        return tensor

    def _invoke_packed(self, inst: tuple, regs: list) -> None:
        _, index, num_outputs, arg_regs, pointers = inst
        arrays = [regs[r] for r in arg_regs]
        resolved = self._static[index]
        first_output = len(arrays) - num_outputs
        if resolved is None:
            if self.exe.kernels[index].kind == SYMBOLIC and self.exe.compile_hook is None:
                return self._invoke_symbolic(index, arrays, first_output)
            resolved = self._specialised(index, arrays)
        cfunc, signature, name = resolved[:3]
        for i, (a, (shape, dtype)) in enumerate(zip(arrays, signature)):
            if type(a) is not np.ndarray:
                raise ValueError(f"argument {i} of kernel {name!r} is {describe(a)}, not a tensor")
            if a.shape != shape or a.dtype != dtype:
                raise ValueError(f"argument {i} of kernel {name!r} must be {shape} "
                                 f"{dtype.name}, the program gives {a.shape} {a.dtype.name}")
            pointers[i] = self._checked_address(a, i >= first_output, name, i)
        status = cfunc(pointers)
        if status:
            raise KernelError(f"kernel {name!r} returned a nonzero status: "
                              f"{status_message(status)}")

    def _invoke_symbolic(self, index: int, arrays: list, first_output: int) -> None:
        """Call a symbolic kernel: its symbols read from (and every dim checked against) the
        buffers' shapes, their values passed after the buffers."""
        found = self._symbolic.get(index)
        if found is None:
            name = self.exe.kernels[index].name
            kernel = self.exe.lib.get_function(name)
            sig = self.exe.lib.signatures[name]
            found = self._symbolic[index] = (
                kernel, SymbolicSignature(name, sig), [numpy_dtype(d) for _, d in sig])
        kernel, signature, dtypes = found
        name = kernel.name
        for i, (a, dtype) in enumerate(zip(arrays, dtypes)):
            if type(a) is not np.ndarray:
                raise ValueError(f"argument {i} of kernel {name!r} is {describe(a)}, not a tensor")
            if a.dtype != dtype:
                raise ValueError(f"argument {i} of kernel {name!r} must be {dtype.name}, the "
                                 f"program gives {a.dtype.name}")
        values = np.array(signature.bind(name, [a.shape for a in arrays]), dtype=np.int64)
        pointers = (ctypes.c_void_p * (len(arrays) + 1))()
        for i, a in enumerate(arrays):
            pointers[i] = self._checked_address(a, i >= first_output, name, i)
        pointers[len(arrays)] = values.ctypes.data
        status = kernel.cfunc(pointers)
        if status:
            raise KernelError(f"kernel {name!r} returned a nonzero status: "
                              f"{status_message(status)}")

    def _checked_address(self, a: np.ndarray, output: bool, kernel: str, i: int) -> int:
        """The address of a buffer a kernel may be given: C-contiguous, 64-byte aligned (an
        empty one is never read), writable when the kernel writes it."""
        address = self._address(a)
        if not a.flags.c_contiguous or (address % 64 and a.size):
            raise ValueError(f"argument {i} of kernel {kernel!r} is not a contiguous "
                             f"64-byte-aligned buffer")
        if output and not a.flags.writeable:
            raise ValueError(f"argument {i} of kernel {kernel!r} is an output and read-only "
                             f"(a constant)")
        return address

    def _pool_tensor(self, nbytes: int, shape: tuple, dtype: np.dtype) -> tuple:
        """(a tensor with pool storage of its own, its address) (prepare.POOL_TENSOR)."""
        tensor, address = self.pool.alloc_tensor(nbytes, shape, dtype)
        self._remember(tensor, address)
        return tensor, address

    def _run_native(self, run: NativeRun, regs: list) -> None:
        """Kernel calls over precomputed argument arrays, one native call (prepare.py)."""
        for nbytes, shape, dtype, reg, targets in run.allocations:
            regs[reg], address = self._pool_tensor(nbytes, shape, dtype)
            for pointers, slot in targets:
                pointers[slot] = address
        for p in run.patches:
            a = regs[p.reg]
            try:
                if type(a) is not np.ndarray:
                    raise ValueError(f"argument {p.slot} of kernel {p.kernel!r} is "
                                     f"{describe(a)}, not a tensor")
                if a.shape != p.shape or a.dtype != p.dtype:
                    raise ValueError(f"argument {p.slot} of kernel {p.kernel!r} must be "
                                     f"{p.shape} {p.dtype.name}, the program gives {a.shape} "
                                     f"{a.dtype.name}")
                p.pointers[p.slot] = self._checked_address(a, p.output, p.kernel, p.slot)
            except ValueError as err:
                raise _Fault(p.offset, err) from None
        failed = self._native.run_steps(run.fns, run.args, run.count, self._status)
        if failed:
            raise _Fault(run.offsets[failed - 1], KernelError(
                f"kernel {run.kernels[failed - 1]!r} returned a nonzero status: "
                f"{status_message(self._status.value)}"))
        addresses = self._addresses
        for r, value in run.stores:
            if value is None and regs[r] is not None:
                addresses.pop(id(regs[r]), None)
            regs[r] = value

    def _specialised(self, index: int, arrays: list) -> tuple:
        entry = self.exe.kernels[index]
        for i, a in enumerate(arrays):
            if type(a) is not np.ndarray:
                raise ValueError(f"argument {i} of kernel {entry.name!r} is {describe(a)}, "
                                 f"not a tensor")
        key = (index, *[(a.shape, a.dtype) for a in arrays])
        resolved = self._specialisations.get(key)
        if resolved is not None:
            self.exe.specialisation_stats["hits"] += 1
        else:  # the executable's cache (or its compile hook), then ours
            kernel = self.exe.specialised_kernel(index, tuple((a.shape, a.dtype.name)
                                                              for a in arrays))
            # the Kernel keeps its library (the machine code) alive while we hold it
            resolved = (kernel.cfunc, _signature(kernel.library.signatures[kernel.name]),
                        kernel.name, kernel)
            if len(self._specialisations) >= self.exe.max_specialisations:
                self._specialisations.pop(next(iter(self._specialisations)))
            self._specialisations[key] = resolved
        return resolved

    def _shape_func(self, inst: tuple, regs: list) -> None:
        index = inst[1]
        program = self.exe.shape_programs[index]
        tensors = [_tensor(regs[r], "ShapeFunc") for r in inst[2]]
        key = None
        if not program.needs_values:  # shapes alone decide: computed once per input shapes
            key = (index, *[t.shape for t in tensors])
            shapes = self._shape_memo.get(key)
            if shapes is not None:
                for r, shape in zip(inst[3], shapes):
                    regs[r] = shape
                return
        values = {i: tensors[i] for i in program.needs_values}  # inputs whose data it reads
        shapes = program.evaluate([t.shape for t in tensors], values)
        if len(shapes) != len(inst[3]):
            raise ValueError(f"shape program {index} gives {len(shapes)} shapes for "
                             f"{len(inst[3])} outputs")
        shapes = tuple(_shape_tensor(s, read_only=True) for s in shapes)
        if key is not None:
            if len(self._shape_memo) >= MAX_SHAPE_MEMO:
                self._shape_memo.clear()
                self._shape_tuples.clear()
            self._shape_memo[key] = shapes
            self._shape_tuples.update((id(t), (t, tuple(t.tolist()))) for t in shapes)
        for r, shape in zip(inst[3], shapes):
            regs[r] = shape


def _where(func, pc: int) -> str:
    inst = func.code[pc]
    try:
        text = instruction_text(inst)
    except (KeyError, TypeError, ValueError):
        text = repr(inst)[:60]
    return f"VM function {func.name!r} instruction {pc} ({text})"


def _tensor(value: Any, what: str) -> np.ndarray:
    if type(value) is not np.ndarray:
        raise ValueError(f"{what} needs a tensor, the register holds {describe(value)}")
    return value


def _truth(value: Any) -> bool:
    if type(value) is not np.ndarray or value.size != 1:
        raise ValueError(f"If needs a scalar condition, the register holds {describe(value)}")
    return bool(value.reshape(()))


def _field(value: Any, index: int) -> Any:
    if not isinstance(value, tuple) or index >= len(value):
        raise ValueError(f"GetField {index} of {describe(value)}")
    return value[index]


def _shape(value: Any) -> tuple[int, ...]:
    """A shape held in a register: an int64 1-d tensor of non-negative dims."""
    if type(value) is not np.ndarray or value.ndim != 1 or value.dtype != _INT64:
        raise ValueError(f"a shape must be an int64 1-d tensor, the register holds "
                         f"{describe(value)}")
    dims = tuple(int(d) for d in value)
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {dims} has a negative dimension")
    return dims


def _shape_tensor(shape, read_only: bool = False) -> np.ndarray:
    out = aligned_empty((len(shape),), _INT64)
    out[:] = shape
    out.flags.writeable = not read_only
    return out


def _reshape(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    tensor = _tensor(value, "ReshapeTensor")
    if math.prod(shape) != tensor.size:
        raise ValueError(f"ReshapeTensor of {tensor.shape} to {shape}: element counts differ")
    return tensor.reshape(shape)


def _signature(sig) -> tuple:
    return tuple((tuple(shape), numpy_dtype(dtype)) for shape, dtype in sig)


def _tail_calls(code: tuple) -> frozenset[int]:
    """The pcs of calls whose result the next instruction returns: they replace their frame."""
    return frozenset(pc for pc, inst in enumerate(code[:-1])
                     if inst[0] in (INVOKE, INVOKE_CLOSURE) and code[pc + 1] == (RET, inst[3]))

