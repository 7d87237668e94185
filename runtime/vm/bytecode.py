"""The VM's instruction set: opcodes, the fields each takes, and a text form for humans.

An instruction is a plain tuple `(opcode, field, field, ...)` (the interpreter loop unpacks
it without attribute lookups). FIELDS says what each field is, which is all that the
serialiser, the validator and the printer need to know about an opcode:

    "reg"     a register of the current frame      "regs"   a tuple of registers
    "int"     a signed integer (a constant value)  "ints"   non-negative ints (a shape)
    "func"    an index into Executable.functions   "const"  an index into .constants
    "kernel"  an index into Executable.kernels     "shape"  an index into .shape_programs
    "dtype"   an element type ("float32", ...)     "jump"   a pc offset from this instruction
    "index"   a non-negative index, count or size   "align"  a power-of-two byte alignment
    "message" a string (Fatal's reason)

The set follows TVM's VM (src/runtime/vm/executable.cc); where relayjit differs it says so.
"""
from __future__ import annotations

# opcodes: small ints, in the order the interpreter tests them (most frequent first)
ALLOC_STORAGE = 0
ALLOC_TENSOR = 1
INVOKE_PACKED = 2
KILL_REGISTER = 3
MOVE = 4
LOAD_CONST = 5
GET_FIELD = 6
ALLOC_ADT = 7
IF = 8
GOTO = 9
INVOKE = 10
RET = 11
ALLOC_TENSOR_REG = 12
LOAD_CONSTI = 13
SHAPE_OF = 14
RESHAPE_TENSOR = 15
ALLOC_CLOSURE = 16
INVOKE_CLOSURE = 17
SHAPE_FUNC = 18
FATAL = 19
STATIC_STORAGE = 20

NAMES = {
    ALLOC_STORAGE: "AllocStorage", ALLOC_TENSOR: "AllocTensor", INVOKE_PACKED: "InvokePacked",
    KILL_REGISTER: "KillRegister", MOVE: "Move", LOAD_CONST: "LoadConst", GET_FIELD: "GetField",
    ALLOC_ADT: "AllocADT", IF: "If", GOTO: "Goto", INVOKE: "Invoke", RET: "Ret",
    ALLOC_TENSOR_REG: "AllocTensorReg", LOAD_CONSTI: "LoadConsti", SHAPE_OF: "ShapeOf",
    RESHAPE_TENSOR: "ReshapeTensor", ALLOC_CLOSURE: "AllocClosure",
    INVOKE_CLOSURE: "InvokeClosure", SHAPE_FUNC: "ShapeFunc", FATAL: "Fatal",
    STATIC_STORAGE: "StaticStorage",
}
OPCODES = {name: code for code, name in NAMES.items()}

# What each field of an instruction is (see the module docstring); the destination
# register, where there is one, is always the last field.
FIELDS: dict[int, tuple[str, ...]] = {
    # storage of `size` bytes from the VM's pool. The size register holds an int, or an int64
    # shape tensor (then the size is its product times dtype's itemsize: relayjit's
    # shortcut for TVM's separate size computation).
    ALLOC_STORAGE: ("reg", "align", "dtype", "reg"),
    # a tensor of a static shape at a byte offset (a multiple of 64) in a storage
    ALLOC_TENSOR: ("reg", "int", "ints", "dtype", "reg"),
    # call a kernel: `args` are its inputs then its `output count` outputs (preallocated)
    INVOKE_PACKED: ("kernel", "index", "regs"),
    # drop a register's value, so its storage returns to the pool once nothing else holds it
    KILL_REGISTER: ("reg",),
    MOVE: ("reg", "reg"),
    LOAD_CONST: ("const", "reg"),
    # field `index` of a tuple (ADT) or closure
    GET_FIELD: ("reg", "index", "reg"),
    # a tuple (tag 0) or other ADT of the given fields
    ALLOC_ADT: ("index", "regs", "reg"),
    # on a scalar bool tensor: pc += true offset, else pc += false offset (TVM compares two
    # registers; relay's If always tests one boolean, so one register suffices)
    IF: ("reg", "jump", "jump"),
    GOTO: ("jump",),
    # call a global function with args; its result goes to the destination
    INVOKE: ("func", "regs", "reg"),
    RET: ("reg",),
    # a tensor whose shape is an int64 1-d tensor in a register
    ALLOC_TENSOR_REG: ("reg", "int", "reg", "dtype", "reg"),
    # an integer constant (a Python int in the register)
    LOAD_CONSTI: ("int", "reg"),
    # the shape of a tensor, as an int64 1-d tensor
    SHAPE_OF: ("reg", "reg"),
    # a view of a tensor with the shape held (as int64 1-d tensor) in a register
    RESHAPE_TENSOR: ("reg", "reg", "reg"),
    # a closure of function `func` capturing registers (passed before the call's args)
    ALLOC_CLOSURE: ("func", "regs", "reg"),
    INVOKE_CLOSURE: ("reg", "regs", "reg"),
    # output shapes of a primitive function from its inputs' shapes (or values) by a
    # shape program (relayjit's: TVM compiles shape functions to kernels and calls them
    # with InvokePacked; here they are small interpreted programs, so an exported
    # executable needs no compiler to compute them). Inputs, then one register per output.
    SHAPE_FUNC: ("shape", "regs", "regs"),
    FATAL: ("message",),
    # storage of `size` bytes the VirtualMachine allocates once and gives every time this
    # instruction runs (relayjit's: the compiler's memory plan places the tensors of a
    # function that never escape it there, so a repeated run allocates nothing and the VM
    # can precompute kernel arguments over it)
    STATIC_STORAGE: ("index", "reg"),
}

assert set(FIELDS) == set(NAMES)


def instruction_text(inst: tuple) -> str:
    """One instruction as text: `InvokePacked kernel=3 outputs=1 args=[$1, $4]`."""
    code, *fields = inst
    parts = []
    for kind, value in zip(FIELDS[code], fields):
        if kind == "reg":
            parts.append(f"${value}")
        elif kind == "regs":
            parts.append("[" + ", ".join(f"${r}" for r in value) + "]")
        elif kind == "ints":
            parts.append("(" + ", ".join(str(d) for d in value) + ")")
        elif kind == "message":
            parts.append(repr(value))
        elif kind in ("func", "const", "kernel", "shape"):
            parts.append(f"{kind}[{value}]")
        else:
            parts.append(str(value))
    return " ".join([NAMES[code], *parts])
