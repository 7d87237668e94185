"""What a VirtualMachine works out once from a validated program, so the interpreter loop does
less per instruction (the bytecode itself is unchanged; this is the VM's own view of it).

Fixed registers. A register written by exactly one instruction, which is a LoadConst, a
LoadConsti, a StaticStorage, an AllocTensor over a fixed storage or a ReshapeTensor of a
fixed tensor to a fixed shape, holds the same value every time it is read (a constant, a
buffer this VM allocated, a view of one): the instruction becomes
(FIXED, value, register), a plain store of a value made once here, whose address is known.

Native runs. A straight run of static-kernel InvokePackeds, fixed stores and KillRegisters
runs as one call into the runtime's native run loop, as the graph executor runs a graph
(runtime.native run_steps over precomputed argument arrays). The arguments held in fixed
registers are checked against the kernels' signatures here, once; the others (the function's
parameters, tensors from the pool) are checked and their addresses patched into the argument
arrays before each run (nothing in a run writes them: it only stores fixed registers); the
run's stores and kills are applied after it. The run's first instruction becomes
(NATIVE, run, length); the others stay, so a jump into the middle of a run executes it
instruction by instruction, as before. A call whose fixed arguments fail a check is left to
the interpreter, which reports it as it always has.

Kernel calls left to the interpreter become (PACKED, kernel, output count, argument
registers, pointer array), their argument array allocated here once. The compiler's way of
giving a tensor pool storage of its own (LoadConsti, AllocStorage, AllocTensor, KillRegister
of the storage) becomes one POOL_TENSOR; a native run may hold them: it makes them before
its call (they only take fresh memory, which nothing in the run has read).
"""
from __future__ import annotations

import ctypes
import math
from typing import Any, NamedTuple

import numpy as np

from ..dtypes import numpy_dtype
from .bytecode import (ALLOC_STORAGE, ALLOC_TENSOR, INVOKE_PACKED, KILL_REGISTER, LOAD_CONST,
                       LOAD_CONSTI, RESHAPE_TENSOR, STATIC_STORAGE)
from .validate import TENSOR_ALIGNMENT, reads_writes

# the VM's own opcodes (negative: never in an executable)
FIXED = -1  # (FIXED, value, register)
NATIVE = -2  # (NATIVE, NativeRun, number of instructions it covers)
PACKED = -3  # (PACKED, kernel index, output count, argument registers, pointer array)
POOL_TENSOR = -4  # (POOL_TENSOR, bytes, shape, numpy dtype, register, 4 instructions covered)


class Patch(NamedTuple):
    """An argument of a native run read from a register at run time: what it must be and
    where its address goes."""

    reg: int
    pointers: Any  # the kernel call's ctypes argument array
    slot: int
    shape: tuple
    dtype: np.dtype
    output: bool
    kernel: str
    offset: int  # of its InvokePacked from the run's first instruction


class NativeRun(NamedTuple):
    """Kernel calls made by one native call (see the module docstring)."""

    fns: Any  # ctypes array of function addresses
    args: Any  # ctypes array of argument-array addresses
    count: int
    patches: tuple[Patch, ...]
    stores: tuple[tuple[int, Any], ...]  # (register, value; None for a kill), in order
    # the POOL_TENSORs in it, made before the call: (bytes, shape, dtype, register,
    # (argument array, slot) per use of it in the run)
    allocations: tuple[tuple, ...]
    kernels: tuple[str, ...]
    offsets: tuple[int, ...]  # of each call's InvokePacked from the run's first instruction
    keepalive: tuple  # the argument arrays


def prepare_function(code: tuple, constants: tuple, storages: dict[int, np.ndarray],
                     static_kernels: list) -> tuple[list[tuple], dict[int, tuple]]:
    """(the VM's instructions for one function, {id(fixed tensor): (it, its address)}).
    static_kernels[k] is (cfunc, signature, name) of static kernel entry k, else None."""
    writer = _single_writers(code)
    fixed: dict[int, Any] = {}
    addresses: dict[int, int] = {}
    prepared: list[tuple] = []
    for pc, inst in enumerate(code):
        value = _fixed_value(inst, pc, fixed, addresses, constants, storages) \
            if writer.get(inst[-1]) == pc else None
        if value is not None:
            fixed[inst[-1]] = value
            prepared.append((FIXED, value, inst[-1]))
        elif inst[0] == INVOKE_PACKED:
            prepared.append((PACKED, inst[1], inst[2], inst[3],
                             (ctypes.c_void_p * max(len(inst[3]), 1))()))
        else:
            prepared.append(inst)
    _pool_tensors(code, prepared)
    _native_runs(prepared, code, fixed, addresses, static_kernels)
    # each address beside its tensor: a native run drops the FIXED instructions inside it, and
    # a tensor no one holds would free its id for another tensor to be mistaken for it
    return prepared, {id(v): (v, addresses[id(v)]) for v in fixed.values()
                      if type(v) is np.ndarray and id(v) in addresses}


def _pool_tensors(code: tuple, prepared: list[tuple]) -> None:
    """LoadConsti n; AllocStorage of n; AllocTensor at offset 0 of it; KillRegister of the
    storage (how the compiler gives a tensor storage of its own) -> POOL_TENSOR, when only
    these instructions touch the size and storage registers."""
    writer = _single_writers(code)
    reads: dict[int, int] = {}
    for inst in code:
        for r in reads_writes(inst)[0]:
            reads[r] = reads.get(r, 0) + 1
    for pc in range(len(code) - 3):
        a, b, c, d = code[pc:pc + 4]
        if a[0] == LOAD_CONSTI and b[0] == ALLOC_STORAGE and c[0] == ALLOC_TENSOR and \
                d[0] == KILL_REGISTER and b[1] == a[2] and c[1] == b[4] == d[1] and \
                c[2] == 0 and reads.get(a[2]) == 1 and reads.get(b[4]) == 2 and \
                all(writer.get(r) == at for r, at in ((a[2], pc), (b[4], pc + 1),
                                                      (c[5], pc + 2))):
            dtype = numpy_dtype(c[4])
            if a[1] >= math.prod(c[3]) * dtype.itemsize:
                prepared[pc] = (POOL_TENSOR, a[1], c[3], dtype, c[5], 4)


def _single_writers(code: tuple) -> dict[int, int]:
    """{register: the pc of the one instruction writing it} (registers written by several
    instructions left out: their value depends on the path)."""
    count: dict[int, int] = {}
    where: dict[int, int] = {}
    for pc, inst in enumerate(code):
        for r in reads_writes(inst)[1]:
            count[r] = count.get(r, 0) + 1
            where[r] = pc
    return {r: pc for r, pc in where.items() if count[r] == 1}


def _fixed_value(inst: tuple, pc: int, fixed: dict, addresses: dict, constants: tuple,
                 storages: dict) -> Any:
    """The value the instruction always writes, when it is fixed (module docstring)."""
    op = inst[0]
    if op == LOAD_CONST:
        value = constants[inst[1]]
    elif op == STATIC_STORAGE:
        value = storages[pc]
    elif op == LOAD_CONSTI:
        return inst[1]
    elif op == RESHAPE_TENSOR and type(fixed.get(inst[1])) is np.ndarray and \
            type(fixed.get(inst[2])) is np.ndarray:
        tensor, shape = fixed[inst[1]], fixed[inst[2]]
        if shape.ndim != 1 or shape.dtype != np.int64 or (shape < 0).any() or \
                math.prod(shape.tolist()) != tensor.size:
            return None  # the interpreter reports it when it runs
        value = tensor.reshape(shape.tolist())
        addresses[id(value)] = addresses[id(tensor)]
        return value
    elif op == ALLOC_TENSOR and type(fixed.get(inst[1])) is np.ndarray:
        storage = fixed[inst[1]]
        try:
            value = place(storage, inst[2], inst[3], inst[4])
        except ValueError:
            return None  # the interpreter reports it when it runs
        addresses[id(value)] = addresses[id(storage)] + inst[2]
        return value
    else:
        return None
    if type(value) is np.ndarray and id(value) not in addresses:
        addresses[id(value)] = value.ctypes.data
    return value


def place(storage: Any, offset: int, shape: tuple, dtype: str) -> np.ndarray:
    """The tensor at byte `offset` of a storage (AllocTensor); ValueError when it is not a
    storage or the tensor does not fit."""
    if type(storage) is not np.ndarray or storage.dtype != np.uint8 or storage.ndim != 1:
        raise ValueError(f"AllocTensor needs a storage, the register holds "
                         f"{describe(storage)}")
    dt = numpy_dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if offset < 0 or offset + nbytes > storage.nbytes:
        raise ValueError(f"a {shape} {dtype} tensor at offset {offset} does not fit in a "
                         f"storage of {storage.nbytes} bytes")
    return storage[offset:offset + nbytes].view(dt).reshape(shape)


def describe(value: Any) -> str:
    """What a register holds, for messages."""
    if value is None:
        return "an empty register"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if isinstance(value, np.ndarray):
        return f"a tensor {value.shape} {value.dtype.name}"
    return f"a {type(value).__name__}"


def _native_runs(prepared: list[tuple], code: tuple, fixed: dict, addresses: dict,
                 static_kernels: list) -> None:
    """Replace the first instruction of each native run (module docstring) in place."""
    reads = _reads(code)
    pc, n = 0, len(prepared)
    while pc < n:
        end, calls = pc, []
        while end < n:
            inst = prepared[end]
            if inst[0] == PACKED:
                call = _native_call(inst, end - pc, fixed, addresses, static_kernels)
                if call is None:
                    break
                calls.append(call)
            elif inst[0] == POOL_TENSOR:
                end += inst[5] - 1
            elif inst[0] not in (FIXED, KILL_REGISTER):
                break
            end += 1
        if calls:
            inside = _reads(code[pc:end])
            outside = {r for r, k in reads.items() if k > inside.get(r, 0)}
            prepared[pc] = (NATIVE, _run(prepared[pc:end], calls, fixed, outside), end - pc)
        pc = end + 1 if end == pc else end


def _reads(code) -> dict[int, int]:
    """{register: how many instructions read it} (a KillRegister is not a read)."""
    count: dict[int, int] = {}
    for inst in code:
        if inst[0] != KILL_REGISTER:
            for r in reads_writes(inst)[0]:
                count[r] = count.get(r, 0) + 1
    return count


def _native_call(inst: tuple, offset: int, fixed: dict, addresses: dict,
                 static_kernels: list):
    """(cfunc, pointer array, patches, name, offset) of a static kernel call whose fixed
    arguments are what it was compiled for; None otherwise."""
    _, index, num_outputs, regs, pointers = inst
    resolved = static_kernels[index]
    if resolved is None:
        return None
    cfunc, signature, name = resolved
    first_output = len(regs) - num_outputs
    patches = []
    for i, (r, (shape, dtype)) in enumerate(zip(regs, signature)):
        output = i >= first_output
        if r not in fixed:
            patches.append(Patch(r, pointers, i, shape, dtype, output, name, offset))
            continue
        a = fixed[r]
        if type(a) is not np.ndarray or a.shape != shape or a.dtype != dtype or \
                not a.flags.c_contiguous or (addresses[id(a)] % TENSOR_ALIGNMENT and a.size) \
                or (output and not a.flags.writeable):
            return None
        pointers[i] = addresses[id(a)]
    return cfunc, pointers, patches, name, offset


def _run(span: list[tuple], calls: list, fixed: dict, outside: set) -> NativeRun:
    """The NativeRun of a span of prepared instructions and its kernel calls. Only what the
    interpreter may see is stored after it: fixed registers read outside the run, kills of
    values from the pool or the caller. A tensor the run allocates has its address written
    into the argument arrays when it is made, unchecked where the kernel takes its shape and
    dtype (the VM makes it C-contiguous and aligned)."""
    fns = (ctypes.c_void_p * len(calls))(*(ctypes.cast(c[0], ctypes.c_void_p).value
                                           for c in calls))
    args = (ctypes.c_void_p * len(calls))(*(ctypes.addressof(c[1]) for c in calls))
    patches = [p for c in calls for p in c[2]]
    stores, allocations, at = [], [], 0
    while at < len(span):
        inst = span[at]
        if inst[0] == FIXED and inst[2] in outside:
            stores.append((inst[2], inst[1]))
        elif inst[0] == KILL_REGISTER and inst[1] not in fixed:
            stores.append((inst[1], None))
        elif inst[0] == POOL_TENSOR:
            reg = inst[4]
            fits = [p for p in patches if p.reg == reg and p.shape == tuple(inst[2]) and
                    p.dtype == inst[3]]  # others stay checked: the interpreter's error
            targets = tuple((p.pointers, p.slot) for p in fits)
            patches = [p for p in patches if p not in fits]
            allocations.append((inst[1], inst[2], inst[3], reg, targets))
            at += inst[5] - 1
        at += 1
    return NativeRun(fns, args, len(calls), tuple(patches), tuple(stores), tuple(allocations),
                     tuple(c[3] for c in calls), tuple(c[4] for c in calls),
                     tuple(c[1] for c in calls))
