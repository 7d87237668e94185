"""The Relay VM's runtime half: bytecode, Executable, VirtualMachine (TVM's runtime.vm).

relay.build's graph executor runs one fixed sequence of kernels over a static memory plan. A
program with control flow (If, recursion through global functions, closures) or with shapes
known only at run time (relay.Any dims) runs here instead: relay.vm.compile turns it into an
Executable, and VirtualMachine(exe, dev).invoke("main", *args) interprets its bytecode. Like
the rest of runtime/, this package imports nothing from compiler or codegen: an exported
executable runs with runtime + llvmlite + numpy alone.

Instruction set (bytecode.py; TVM's, with the differences noted there): Move, Ret, Invoke (a
global function), InvokeClosure, InvokePacked (a kernel), AllocStorage, AllocTensor,
AllocTensorReg (shape from a register), AllocADT (tuples), AllocClosure, GetField, If, Goto,
LoadConst, LoadConsti, ShapeOf, ReshapeTensor, ShapeFunc (output shapes by a shape program),
KillRegister, Fatal, StaticStorage. Each function has a register file; its parameters arrive
in registers 0..n-1; an instruction names registers by index.

Calling conventions. Global functions and closures: Invoke copies the argument registers
into a fresh register file for the callee, whose Ret value lands in the caller's destination
register; a closure's captured values come first, then the call's arguments. Frames live on
an explicit stack with limits on depth and on the number of calls (machine.py), and a call
whose result is immediately returned replaces its caller's frame, so tail-recursive Relay
loops run in constant stack. Kernels: InvokePacked passes the kernels' fixed calling
convention (runtime.library: `int32 fn(void **buffers)`, inputs then outputs); the outputs
are tensors the program allocated before the call. Every buffer is checked against the
kernel's signature before native code runs.

Storage (pool.py): StaticStorage gives a buffer the VirtualMachine allocated once for that
instruction; the compiler's memory plan places there the static-shaped tensors that never
escape their function (compiler.backend.vm.storage_plan), sharing bytes as relay.build's plan
does, concatenations laid out in place, residuals written over. AllocStorage leases a buffer
from the VM's StoragePool (dynamic shapes, results, tensors that escape); AllocTensor views
part of a storage as a tensor. Leases return to the pool when Python's reference count says
nothing holds them any more (the compiler emits KillRegister after a value's last use), so
memory is reused within a run and a steady-state run at a repeated shape allocates nothing
new.

Specialisation (executable.py): a kernel entry is "static" (compiled ahead of time, as
relay.build compiles it) or "specialised" (a primitive function with Any dims, compiled for
the concrete shapes on first sight through the compile hook the compiler attaches, kept in a
bounded cache). An executable loaded from bytes or a file has no compiler: an unseen shape is
a clear error naming the kernel and the shapes. ("symbolic" kernels, whose loop bounds come
from run-time shapes, are reserved for the strategy layer.)

Untrusted code (validate.py, serialize.py): Executable.save() / load_exec(code, lib) and
export_library(path) / runtime.load_module(path); every executable, compiled or loaded, is
validated before it runs: register, constant, function, kernel and shape-program indices,
jump targets (forward only, inside the function), argument counts, kernel signatures, and
that no register is read before it is written.
"""
from __future__ import annotations

from ..errors import VMError
from .executable import Executable
from .machine import VirtualMachine
from .objects import ADT, VMClosure
from .profiler import VirtualMachineProfiler
from .program import KernelEntry, VMFunction
from .serialize import read_file

__all__ = ["Executable", "VirtualMachine", "VirtualMachineProfiler", "ADT", "VMClosure", "VMError",
           "KernelEntry",
           "VMFunction", "load_executable"]


def load_executable(path: str) -> Executable:
    """The executable an export_library wrote to `path` (checked as any module file)."""
    return Executable.load_exec(*read_file(path))
