"""Executable: the VM's program (bytecode per function, constants, kernel table, shape programs)
and the kernel library it calls; what relay.vm.compile returns and VirtualMachine runs.

Kernel entries come in kinds (KernelEntry.kind):
  "static"       compiled ahead of time for the fixed shapes in its signature: a kernel of
                 `lib`, exactly as relay.build compiles it.
  "specialised"  the primitive function has Any dims: at run time the VM asks the
                 executable's compile hook (set by the compiler that made it, in that process
                 only) for a kernel specialised to the concrete argument shapes, and keeps the
                 last MAX_SPECIALISATIONS of them. An executable loaded from bytes or a file has
                 no compile hook: meeting such a kernel is a VMError naming the kernel, the
                 function and the argument shapes (nothing is compiled at run time there).
  "symbolic"     a kernel of `lib` whose loop bounds are read from the run-time shapes
                 (codegen.symbolic; its signature's dims are polynomials in its symbols):
                 it runs any valid shape, so an executable loaded without a compiler does.
                 Where the compile hook is attached, the VM still specialises it (the
                 static kernel per shape is the fast path).

Every executable is validated when it is made (runtime.vm.validate), whether by the compiler
or from untrusted bytes, before any of it runs.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from ..errors import VMError
from ..library import Kernel, KernelLibrary
from ..memory import ALIGNMENT, aligned_bytes, check_memory
from .bytecode import instruction_text
from .program import KERNEL_KINDS, SPECIALISED, STATIC, SYMBOLIC, KernelEntry, VMFunction
from .serialize import decode, encode, write_file
from .validate import check_program

MAX_SPECIALISATIONS = 64

# hook(executable, kernel index, ((shape, dtype) per argument)) -> a Kernel for those shapes
CompileHook = Callable[["Executable", int, tuple], Kernel]


class Executable:
    """Functions, constants, kernel entries, shape programs and the kernel library."""

    def __init__(self, functions: list[VMFunction], constants: list[np.ndarray],
                 kernels: list[KernelEntry], lib: KernelLibrary | None = None,
                 shape_programs: list | None = None) -> None:
        self.functions = tuple(functions)
        self.constants = _in_one_arena([_array(c) for c in constants])
        self.kernels = tuple(kernels)
        self.lib = lib
        self.shape_programs = tuple(shape_programs or ())
        check_program(self.functions, self.constants, self.kernels, self.shape_programs, lib)
        self.func_index = {f.name: i for i, f in enumerate(self.functions)}
        self.compile_hook: CompileHook | None = None
        self.max_specialisations = MAX_SPECIALISATIONS
        self._specialised: OrderedDict[tuple, Kernel] = OrderedDict()
        self._lock = threading.Lock()
        self.specialisation_stats = {"compiled": 0, "hits": 0, "evicted": 0}

    # ---- TVM's Executable surface ---------------------------------------------------------
    @property
    def globals(self) -> list[str]:
        """The global functions' names, in index order."""
        return [f.name for f in self.functions]

    @property
    def primitive_ops(self) -> list[str]:
        """The kernels' names, in index order."""
        return [k.name for k in self.kernels]

    def get_function_arity(self, func_name: str) -> int:
        """Number of parameters of a global function."""
        return len(self.function(func_name).params)

    def get_function_param_name(self, func_name: str, index: int) -> str:
        """Name of parameter `index` of a global function."""
        params = self.function(func_name).params
        if not 0 <= index < len(params):
            raise IndexError(f"{func_name} has {len(params)} parameters, no index {index}")
        return params[index]

    def function(self, name: str) -> VMFunction:
        """The function called `name`; KeyError lists the known ones."""
        try:
            return self.functions[self.func_index[name]]
        except KeyError:
            raise KeyError(f"the executable has no function {name!r}; it has "
                           f"{self.globals}") from None

    @property
    def bytecode(self) -> str:
        """Every function's instructions as text (TVM's exe.bytecode)."""
        lines = []
        for f in self.functions:
            lines.append(f"VM Function[{self.func_index[f.name]}]: {f.name}"
                         f"({', '.join(f.params)})")
            lines.append(f"# reg file size = {f.num_registers}, "
                         f"instruction count = {len(f.code)}")
            lines.extend(f"{pc:>4}: {instruction_text(inst)}" for pc, inst in enumerate(f.code))
            lines.append("")
        return "\n".join(lines)

    @property
    def stats(self) -> str:
        """Counts of functions, instructions, constants and kernels (TVM's exe.stats)."""
        const_bytes = sum(c.nbytes for c in self.constants)
        kinds = {kind: sum(k.kind == kind for k in self.kernels) for kind in KERNEL_KINDS}
        return (f"Relay VM executable statistics:\n"
                f"  functions: {len(self.functions)} "
                f"({sum(len(f.code) for f in self.functions)} instructions)\n"
                f"  constants: {len(self.constants)} ({const_bytes} bytes)\n"
                f"  kernels: {len(self.kernels)} ({kinds[STATIC]} static, "
                f"{kinds[SYMBOLIC]} symbolic, {kinds[SPECIALISED]} specialised at run "
                f"time only)\n"
                f"  shape programs: {len(self.shape_programs)}\n")

    # ---- saving ---------------------------------------------------------------------------
    def save(self) -> tuple[bytes, KernelLibrary | None]:
        """(code, lib) as TVM's exe.save(): code is everything but the kernels' object code;
        Executable.load_exec(code, lib) makes the executable again."""
        return encode(self.functions, self.constants, self.kernels, self.shape_programs), \
            self.lib

    @staticmethod
    def load_exec(code: bytes | bytearray | memoryview, lib: KernelLibrary | None) -> Executable:
        """The executable `save` wrote, checked before anything runs (ValueError otherwise)."""
        functions, constants, kernels, shape_programs = decode(code)
        try:
            return Executable(functions, constants, kernels, lib, shape_programs)
        except ValueError as err:
            raise ValueError(f"not a loadable VM executable: {err}") from None

    def export_library(self, path: str) -> None:
        """Write code and object code to one file; runtime.load_module(path) reads it back."""
        write_file(path, self.save()[0], self.lib)

    # ---- run-time specialisation -------------------------------------------------------------
    def specialised_kernel(self, index: int, args: tuple) -> Kernel:
        """The kernel for entry `index` at these ((shape, dtype), ...) arguments: from the
        in-memory cache, else from the compile hook (kept; the oldest dropped past
        max_specialisations)."""
        key = (index, args)
        kernel = self._specialised.get(key)
        if kernel is not None:
            self._specialised.move_to_end(key)
            self.specialisation_stats["hits"] += 1
            return kernel
        if self.compile_hook is None:
            entry = self.kernels[index]
            shapes = ", ".join(f"{tuple(s)} {d}" for s, d in args[:entry.num_inputs])
            raise VMError(
                f"kernel {entry.name!r} has no compiled code for inputs {shapes}: its "
                f"function has dynamic (Any) dims, and this executable has no compiler "
                f"attached to specialise it (it was loaded from a file or bytes; kernels "
                f"are specialised to new shapes only in the process that compiled the "
                f"executable). Compile the model with relay.vm.compile in this process")
        with self._lock:
            kernel = self._specialised.get(key)
            if kernel is None:
                kernel = self.compile_hook(self, index, args)
                self._specialised[key] = kernel
                self.specialisation_stats["compiled"] += 1
                while len(self._specialised) > self.max_specialisations:
                    self._specialised.popitem(last=False)
                    self.specialisation_stats["evicted"] += 1
        return kernel

    def __repr__(self) -> str:
        return (f"Executable({len(self.functions)} functions, {len(self.kernels)} kernels, "
                f"{len(self.constants)} constants)")


def _array(value: Any) -> np.ndarray:
    if hasattr(value, "_view"):
        value = value._view()
    if not isinstance(value, np.ndarray):
        raise TypeError(f"executable constants must be arrays, got {type(value).__name__}")
    return value


def _in_one_arena(arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Read-only copies of the constants, each 64-byte aligned, in one arena (on huge pages
    when large, as the graph executor keeps its params: kernels stream the weights). They
    are shared by every run and every VM: kernels only read them, and nobody else may write
    them (a result that is a constant reaches the user as a copy)."""
    starts, total = [], 0
    for a in arrays:
        starts.append(total)
        total += -(-a.nbytes // ALIGNMENT) * ALIGNMENT
    check_memory(total, f"the executable's {len(arrays)} constants")
    arena = aligned_bytes(total, huge_pages=True)
    out = []
    for a, at in zip(arrays, starts):
        c = arena[at:at + a.nbytes].view(a.dtype).reshape(a.shape)
        np.copyto(c, a)
        c.flags.writeable = False
        out.append(c)
    return tuple(out)
