"""Validation of a VM program before anything runs: every index in range, every kernel known.

An executable may come from an untrusted file, so the checks assume nothing. Statically:
  - each function: a unique name, parameters <= registers <= MAX_REGISTERS, parameter types
    well formed, a non-empty code list;
  - each instruction: its fields are of their kinds (bytecode.FIELDS); registers below the
    function's register count; function, constant, kernel and shape-program indices in range;
    dtypes the runtime knows; alignments powers of two up to 64; tensor offsets multiples of
    64; shapes non-negative;
  - control flow: jumps go forward and land inside the function (so a function cannot loop
    without calling, and calls are counted: VirtualMachine's limits bound every program),
    and no path runs off the end of the code;
  - every register is written before any path reads it (parameters count as written);
  - shape programs are validated ShapePrograms (runtime.shape_program checks their own
    registers, inputs and shape-function names), and ShapeFunc passes one register per
    program input and one per output;
  - Invoke passes as many arguments as the callee has parameters; InvokePacked passes the
    kernel entry's arity with its output count; a static kernel exists in the library with a
    signature of that arity (its shapes and dtypes are checked again on every call, against
    the tensors actually passed);
  - kernel entries: known kinds, counts >= 0 with at least one output; a static or symbolic
    one is in the library with a signature of its arity and kind (a symbolic one's symbols
    each readable from a dim).
What can only be known at run time (a register holding a tuple where a tensor is needed, a
shape that a kernel was not compiled for, a storage too small for a tensor) the VM checks as
it runs, raising a ValueError or VMError; native code never sees an unchecked buffer.
"""
from __future__ import annotations

from ..dtypes import dtype_name
from ..library import KernelLibrary
from ..shape_program import ShapeProgram
from ..symbolic_signature import SymbolicSignature, is_symbolic
from .bytecode import (ALLOC_CLOSURE, ALLOC_TENSOR, FATAL, FIELDS, GOTO, IF, INVOKE, INVOKE_PACKED,
                       KILL_REGISTER, NAMES, RET, SHAPE_FUNC, instruction_text)
from .program import (ANY, KERNEL_KINDS, SPECIALISED, STATIC, SYMBOLIC, TENSOR, TUPLE, KernelEntry,
                      VMFunction)

MAX_REGISTERS = 1 << 20
MAX_ALIGNMENT = 64
TENSOR_ALIGNMENT = 64  # kernels may use aligned vector loads
_TERMINATORS = (RET, GOTO, IF, FATAL)
# instructions whose 'reg' fields are all read (the others write their last one)
_NO_DESTINATION = {INVOKE_PACKED, KILL_REGISTER, RET, IF, GOTO, FATAL}


def check_program(functions: tuple[VMFunction, ...], constants: tuple, kernels: tuple,
                  shape_programs: tuple, lib: KernelLibrary | None) -> None:
    """Raise ValueError naming the first thing wrong with this program (see the docstring)."""
    if lib is not None and not isinstance(lib, KernelLibrary):
        raise TypeError(f"lib must be a KernelLibrary or None, got {type(lib).__name__}")
    for i, k in enumerate(kernels):
        _check_kernel(i, k, lib)
    for i, p in enumerate(shape_programs):
        if not isinstance(p, ShapeProgram):
            raise TypeError(f"shape program {i} must be a ShapeProgram, got "
                            f"{type(p).__name__}")
    counts = {"func": len(functions), "const": len(constants), "kernel": len(kernels),
              "shape": len(shape_programs)}
    names: set[str] = set()
    for f in functions:
        if not isinstance(f, VMFunction):
            raise TypeError(f"functions must be VMFunctions, got {type(f).__name__}")
        if f.name in names:
            raise ValueError(f"two functions are named {f.name!r}")
        names.add(f.name)
        _check_function(f, functions, kernels, shape_programs, counts)


def _check_kernel(index: int, k: KernelEntry, lib: KernelLibrary | None) -> None:
    what = f"kernel {index} ({k.name!r})"
    if k.kind not in KERNEL_KINDS:
        raise ValueError(f"{what}: kind {k.kind!r}, expected one of {KERNEL_KINDS}")
    if k.num_inputs < 0 or k.num_outputs < 1:
        raise ValueError(f"{what}: takes {k.num_inputs} inputs and {k.num_outputs} outputs; "
                         f"expected >= 0 inputs and >= 1 output")
    if k.kind == SPECIALISED:
        return
    if lib is None or k.name not in lib:
        known = sorted(lib.function_names) if lib is not None else "no library"
        raise ValueError(f"{what}: {k.kind} kernel not in the kernel library ({known})")
    sigs = lib.signatures
    if sigs is None:
        raise ValueError(f"{what}: the kernel library has no signature table, so its "
                         f"kernels' arguments cannot be checked")
    if len(sigs[k.name]) != k.arity:
        raise ValueError(f"{what}: the library's kernel takes {len(sigs[k.name])} buffers, "
                         f"the executable says {k.num_inputs} inputs + {k.num_outputs} outputs")
    if is_symbolic(sigs[k.name]) != (k.kind == SYMBOLIC):
        raise ValueError(f"{what}: a {k.kind} kernel, but the library's signature "
                         f"{'has' if k.kind == STATIC else 'has no'} symbolic dims")
    if k.kind == SYMBOLIC:
        SymbolicSignature(k.name, sigs[k.name])  # every symbol readable from a dim


def _check_type(ty, what: str) -> None:
    stack = [ty]
    while stack:
        t = stack.pop()
        if not isinstance(t, tuple) or not t:
            raise ValueError(f"{what}: malformed type {t!r:.60}")
        if t[0] == TENSOR:
            if len(t) != 3 or any(d is not None and (not isinstance(d, int) or d < 0)
                                  for d in t[1]):
                raise ValueError(f"{what}: tensor dims must be >= 0 or Any, got {t!r:.60}")
            _dtype(t[2], what)
        elif t[0] == TUPLE and len(t) == 2:
            stack.extend(t[1])
        elif t != (ANY,):
            raise ValueError(f"{what}: malformed type {t!r:.60}")


def _dtype(name, what: str) -> None:
    try:
        dtype_name(name)
    except TypeError as err:
        raise ValueError(f"{what}: {err}") from None


def _check_function(f: VMFunction, functions, kernels, shape_programs, counts: dict) -> None:
    where = f"function {f.name!r}"
    n = f.num_registers
    if not isinstance(n, int) or not len(f.params) <= n <= MAX_REGISTERS:
        raise ValueError(f"{where}: register count {n!r} must be between its "
                         f"{len(f.params)} parameters and {MAX_REGISTERS}")
    if len(f.param_types) != len(f.params):
        raise ValueError(f"{where}: {len(f.params)} parameters but {len(f.param_types)} "
                         f"parameter types")
    for p, t in zip(f.params, f.param_types):
        _check_type(t, f"{where} parameter {p!r}")
    if not f.code:
        raise ValueError(f"{where}: has no instructions")
    for pc, inst in enumerate(f.code):
        at = f"{where} instruction {pc}"
        if not isinstance(inst, tuple) or not inst or inst[0] not in FIELDS:
            raise ValueError(f"{at}: not an instruction: {inst!r:.60}")
        at = f"{at} ({NAMES[inst[0]]})"
        _check_fields(inst, at, n, len(f.code), pc, counts)
        _check_arity(inst, at, functions, kernels, shape_programs)
        if inst[0] not in _TERMINATORS and pc + 1 >= len(f.code):
            raise ValueError(f"{at}: the last instruction must be Ret, Goto, If or Fatal; "
                             f"execution would run off the end of the function")
    _check_defined_before_use(f, where)


def _check_fields(inst: tuple, at: str, registers: int, length: int, pc: int,
                  counts: dict) -> None:
    kinds = FIELDS[inst[0]]
    if len(inst) != len(kinds) + 1:
        raise ValueError(f"{at}: expected {len(kinds)} fields, got {len(inst) - 1}")
    for kind, value in zip(kinds, inst[1:]):
        if kind in ("reg", "regs"):
            for r in (value if kind == "regs" else (value,)):
                if not isinstance(r, int) or not 0 <= r < registers:
                    raise ValueError(f"{at}: register {r!r} out of range (the function has "
                                     f"{registers} registers)")
        elif kind in counts:
            if not isinstance(value, int) or not 0 <= value < counts[kind]:
                raise ValueError(f"{at}: {kind} index {value!r} out of range (the executable "
                                 f"has {counts[kind]})")
        elif kind == "jump":
            if not isinstance(value, int) or value < 1 or pc + value >= length:
                raise ValueError(f"{at}: jump offset {value!r} must go forward and stay inside "
                                 f"the function's {length} instructions")
        elif kind == "dtype":
            _dtype(value, at)
        elif kind == "ints":
            if any(not isinstance(d, int) or d < 0 for d in value):
                raise ValueError(f"{at}: shape {value!r:.60} must be non-negative integers")
        elif kind == "index":
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{at}: {value!r} must be a non-negative integer")
        elif kind == "align":
            if not isinstance(value, int) or value < 1 or value > MAX_ALIGNMENT or \
                    value & (value - 1):
                raise ValueError(f"{at}: alignment {value!r} must be a power of two <= "
                                 f"{MAX_ALIGNMENT}")
        elif kind == "int":
            if not isinstance(value, int):
                raise ValueError(f"{at}: {value!r:.60} must be an integer")
        elif kind == "message" and not isinstance(value, str):
            raise ValueError(f"{at}: {value!r:.60} must be a string")
    if inst[0] == ALLOC_TENSOR and (inst[2] < 0 or inst[2] % TENSOR_ALIGNMENT):
        raise ValueError(f"{at}: tensor offset {inst[2]} must be a non-negative multiple of "
                         f"{TENSOR_ALIGNMENT}")


def _check_arity(inst: tuple, at: str, functions, kernels, shape_programs) -> None:
    if inst[0] == INVOKE:
        callee = functions[inst[1]]
        if len(inst[2]) != len(callee.params):
            raise ValueError(f"{at}: calls {callee.name!r} with {len(inst[2])} arguments, it "
                             f"takes {len(callee.params)}")
    elif inst[0] == ALLOC_CLOSURE:
        callee = functions[inst[1]]
        if len(inst[2]) > len(callee.params):
            raise ValueError(f"{at}: captures {len(inst[2])} values for {callee.name!r}, which "
                             f"takes {len(callee.params)} parameters")
    elif inst[0] == SHAPE_FUNC:
        program = shape_programs[inst[1]]
        if len(inst[2]) != len(program.inputs) or len(inst[3]) != len(program.outputs):
            raise ValueError(f"{at}: passes {len(inst[2])} inputs for {len(inst[3])} output "
                             f"shapes to shape program {inst[1]}, which takes "
                             f"{len(program.inputs)} inputs and gives {len(program.outputs)}")
    elif inst[0] == INVOKE_PACKED:
        k = kernels[inst[1]]
        if inst[2] != k.num_outputs or len(inst[3]) != k.arity:
            raise ValueError(f"{at}: calls kernel {k.name!r} with {len(inst[3])} buffers, "
                             f"{inst[2]} of them outputs; it takes {k.num_inputs} inputs and "
                             f"{k.num_outputs} outputs")


def reads_writes(inst: tuple) -> tuple[list[int], list[int]]:
    """Registers an instruction reads and writes (the destination is the last 'reg' field;
    InvokePacked writes into its output tensors, which must already exist, so it reads all)."""
    kinds = FIELDS[inst[0]]
    regs = [(k, v) for k, v in zip(kinds, inst[1:]) if k in ("reg", "regs")]
    reads: list[int] = []
    writes: list[int] = []
    if inst[0] == SHAPE_FUNC:
        return list(inst[2]), list(inst[3])
    has_dst = inst[0] not in _NO_DESTINATION
    for i, (kind, value) in enumerate(regs):
        if has_dst and i == len(regs) - 1:
            writes.append(value)
        else:
            reads.extend(value if kind == "regs" else (value,))
    return reads, writes


def _check_defined_before_use(f: VMFunction, where: str) -> None:
    """Forward data flow over the control flow (acyclic: jumps go forward, so one pass in
    order suffices): the registers written on every path to an instruction include all it
    reads. Straight-line code updates one set; a jump target meets a copy."""
    incoming: dict[int, set] = {}
    current = set(range(len(f.params)))
    reachable = True
    for pc, inst in enumerate(f.code):
        if pc in incoming:
            joined = incoming.pop(pc)
            current = (current & joined) if reachable else joined
            reachable = True
        if not reachable:
            continue
        reads, writes = reads_writes(inst)
        for r in reads:
            if r not in current:
                raise ValueError(f"{where} instruction {pc} ({instruction_text(inst)}): "
                                 f"register ${r} may be read before it is written")
        current.update(writes)
        if inst[0] == KILL_REGISTER:  # the value is gone
            current.discard(inst[1])
        successors = _successors(inst, pc)
        for target in successors:
            if target != pc + 1:
                incoming[target] = incoming[target] & current if target in incoming \
                    else set(current)
        reachable = pc + 1 in successors


def _successors(inst: tuple, pc: int) -> tuple[int, ...]:
    code = inst[0]
    if code in (RET, FATAL):
        return ()
    if code == GOTO:
        return (pc + inst[1],)
    if code == IF:
        return (pc + inst[2], pc + inst[3])
    return (pc + 1,)

