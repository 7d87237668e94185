"""Kernel bodies written straight to LLVM IR text, as llvmlite.ir would print them.

Why: llvmlite.ir builds an object per instruction, checks and registers it, and formats it
again when the module is printed; on DenseNet-121's 65,000 instructions that was most of
the emission time. TextBuilder has the llvmlite.ir.IRBuilder methods the emitters use, with
the same signatures and checks, and formats each instruction once, when it is emitted.

Only instructions go through here. Functions (prototypes, arguments, attributes),
declarations, globals and the module stay llvmlite objects: a TextBlock sits in an
ir.Function's `blocks` and prints through it, and every name is registered in the
function's own llvmlite NameScope, so numbering and text are llvmlite's character for
character (tests/codegen/test_codegen_textir.py compares the two builders). Operands may
be TextBuilder values or llvmlite values (constants, arguments, functions) alike.
"""
from __future__ import annotations

import re

from llvmlite import ir

_CMP = {">": "gt", "<": "lt", "==": "eq", "!=": "ne", ">=": "ge", "<=": "le"}
_SIMPLE_LABEL = re.compile(r"[-a-zA-Z$._][-a-zA-Z$._0-9]*$")  # printed unquoted


def _reference(name: str) -> str:
    if "\\" in name or '"' in name:
        name = name.replace("\\", "\\5c").replace('"', "\\22")
    return f'%"{name}"'


class Value:
    """An instruction's result: its type and its reference text (`%"name"`)."""

    __slots__ = ("type", "name", "_ref")

    def __init__(self, type_: ir.Type, name: str) -> None:
        self.type, self.name, self._ref = type_, name, _reference(name)

    def get_reference(self) -> str:
        return self._ref

    def __repr__(self) -> str:
        return f"<textir.Value {self.name!r} of type '{self.type}'>"


class Alloca(Value):
    """alloca: printed at the end, since the caller may set `align` after emitting it."""

    __slots__ = ("allocated_type", "count", "align")

    def __init__(self, typ: ir.Type, count, name: str) -> None:
        super().__init__(typ.as_pointer(), name)
        self.allocated_type, self.count, self.align = typ, count, None

    def __str__(self) -> str:
        text = f"{self._ref} = alloca {self.allocated_type}"
        if self.count:
            text += f", {self.count.type} {self.count.get_reference()}"
        if self.align is not None:
            text += f", align {self.align}"
        return text


class Phi(Value):
    """phi: printed at the end, since incoming edges are added after it is emitted."""

    __slots__ = ("flags", "incomings")

    def __init__(self, typ: ir.Type, name: str, flags) -> None:
        super().__init__(typ, name)
        self.flags, self.incomings = flags, []

    def add_incoming(self, value, block: TextBlock) -> None:
        self.incomings.append((value, block))

    def __str__(self) -> str:
        incs = ", ".join(f"[{v.get_reference()}, {b.get_reference()}]"
                         for v, b in self.incomings)
        return f"{self._ref} = phi {' '.join(self.flags)} {self.type} {incs}".rstrip()


class TextBlock:
    """A basic block of an ir.Function whose instructions are text (or Alloca/Phi)."""

    def __init__(self, function: ir.Function, name: str = "") -> None:
        self.function, self.scope = function, function.scope
        self.name = self.scope.register(name, deduplicate=True)
        self._ref = _reference(self.name)
        self.lines: list = []
        self.terminated = False
        function.blocks.append(self)

    def get_reference(self) -> str:
        return self._ref

    def descr(self, buf: list[str]) -> None:
        """What ir.Function calls to print its body."""
        name = self.name
        if not _SIMPLE_LABEL.match(name):
            name = self._ref[1:]
        buf.append(f"{name}:\n")
        buf += [f"  {line}\n" for line in self.lines]


def _binop(opname: str):
    def emit(self: TextBuilder, lhs, rhs, name: str = "", flags=()) -> Value:
        ty = lhs.type
        if ty is not rhs.type and ty != rhs.type:  # llvmlite shares its integer types
            raise ValueError(f"Operands must be the same type, got ({ty}, {rhs.type})")
        op = " ".join((opname, *flags)) if flags else opname
        return self._value(ty, name, f"{op} {ty} {lhs.get_reference()}, {rhs.get_reference()}")
    emit.__name__ = opname
    return emit


def _cast(opname: str):
    def emit(self: TextBuilder, val, typ: ir.Type, name: str = "") -> Value:
        return self._value(typ, name, f"{opname} {val.type} {val.get_reference()} to {typ}")
    emit.__name__ = opname
    return emit


class TextBuilder:
    """The subset of llvmlite.ir.IRBuilder the kernel emitters use, appending at the end."""

    def __init__(self, block: TextBlock | None = None) -> None:
        self.block = block

    @property
    def function(self) -> ir.Function:
        return self.block.function

    @property
    def module(self) -> ir.Module:
        return self.block.function.module

    def position_at_end(self, block: TextBlock) -> None:
        self.block = block

    def append_basic_block(self, name: str = "") -> TextBlock:
        return TextBlock(self.block.function, name)

    # ---------------------------------------------------------------- plumbing
    def _value(self, typ: ir.Type, name: str, text: str) -> Value:
        block = self.block
        v = Value(typ, block.scope.register(name, deduplicate=True))
        block.lines.append(f"{v._ref} = {text}")
        return v

    def _void(self, text: str) -> None:
        """An instruction without a result (llvmlite still numbers it)."""
        block = self.block
        block.scope.register("", deduplicate=True)
        block.lines.append(text)

    def _terminate(self, text: str) -> None:
        if self.block.terminated:
            raise ValueError(f"block {self.block.name} is already terminated")
        self._void(text)
        self.block.terminated = True

    # ---------------------------------------------------------------- arithmetic
    add, sub, mul = _binop("add"), _binop("sub"), _binop("mul")
    sdiv, udiv, srem, urem = _binop("sdiv"), _binop("udiv"), _binop("srem"), _binop("urem")
    and_, or_, xor = _binop("and"), _binop("or"), _binop("xor")
    shl, lshr, ashr = _binop("shl"), _binop("lshr"), _binop("ashr")
    fadd, fsub, fmul = _binop("fadd"), _binop("fsub"), _binop("fmul")
    fdiv, frem = _binop("fdiv"), _binop("frem")

    def neg(self, value, name: str = "") -> Value:
        return self.sub(ir.Constant(value.type, 0), value, name=name)

    def fneg(self, arg, name: str = "", flags=()) -> Value:
        op = " ".join(("fneg", *flags)) if flags else "fneg"
        return self._value(arg.type, name, f"{op} {arg.type} {arg.get_reference()}")

    # ---------------------------------------------------------------- comparisons
    def _compare(self, opname: str, op: str, lhs, rhs, name: str, flags=()) -> Value:
        typ = lhs.type
        result = ir.VectorType(ir.IntType(1), typ.count) if isinstance(typ, ir.VectorType) \
            else ir.IntType(1)
        fl = "".join(" " + f for f in flags)
        return self._value(result, name,
                           f"{opname}{fl} {op} {typ} {lhs.get_reference()}, "
                           f"{rhs.get_reference()}")

    def icmp_signed(self, cmpop: str, lhs, rhs, name: str = "") -> Value:
        op = _CMP[cmpop]
        return self._compare("icmp", op if cmpop in ("==", "!=") else "s" + op, lhs, rhs, name)

    def icmp_unsigned(self, cmpop: str, lhs, rhs, name: str = "") -> Value:
        op = _CMP[cmpop]
        return self._compare("icmp", op if cmpop in ("==", "!=") else "u" + op, lhs, rhs, name)

    def fcmp_ordered(self, cmpop: str, lhs, rhs, name: str = "", flags=()) -> Value:
        op = "o" + _CMP[cmpop] if cmpop in _CMP else cmpop
        return self._compare("fcmp", op, lhs, rhs, name, flags)

    def fcmp_unordered(self, cmpop: str, lhs, rhs, name: str = "", flags=()) -> Value:
        op = "u" + _CMP[cmpop] if cmpop in _CMP else cmpop
        return self._compare("fcmp", op, lhs, rhs, name, flags)

    def select(self, cond, lhs, rhs, name: str = "", flags=()) -> Value:
        if lhs.type != rhs.type:
            raise ValueError(f"select arms differ in type: {lhs.type} vs {rhs.type}")
        return self._value(lhs.type, name,
                           f"select {' '.join(flags)} {cond.type} {cond.get_reference()}, "
                           f"{lhs.type} {lhs.get_reference()}, {rhs.type} {rhs.get_reference()}")

    # ---------------------------------------------------------------- casts
    trunc, zext, sext = _cast("trunc"), _cast("zext"), _cast("sext")
    fptrunc, fpext, bitcast = _cast("fptrunc"), _cast("fpext"), _cast("bitcast")
    fptosi = _cast("fptosi")
    sitofp, uitofp = _cast("sitofp"), _cast("uitofp")

    # ---------------------------------------------------------------- memory
    def alloca(self, typ: ir.Type, size=None, name: str = "") -> Alloca:
        if size is not None and not isinstance(size, ir.Value):
            size = ir.Constant(ir.IntType(32), size)
        block = self.block
        al = Alloca(typ, size, block.scope.register(name, deduplicate=True))
        block.lines.append(al)
        return al

    def load(self, ptr, name: str = "", align: int | None = None, typ: ir.Type | None = None
             ) -> Value:
        pty = ptr.type
        if not isinstance(pty, ir.PointerType):
            raise TypeError(f"cannot load from value of type {pty}: not a pointer")
        if typ is None:
            if pty.is_opaque:
                raise ValueError("Load lacks type.")
            typ = pty.pointee
        tail = "" if align is None else f", align {align}"
        return self._value(typ, name, f"load {typ}, {pty} {ptr.get_reference()}{tail}")

    def store(self, value, ptr, align: int | None = None) -> None:
        pty = ptr.type
        if not isinstance(pty, ir.PointerType):
            raise TypeError(f"cannot store to value of type {pty}: not a pointer")
        if not pty.is_opaque and pty.pointee != value.type:
            raise TypeError(f"cannot store {value.type} to {pty}: mismatching types")
        tail = "" if align is None else f", align {align}"
        self._void(f"store {value.type} {value.get_reference()}, {pty} "
                   f"{ptr.get_reference()}{tail}")

    def gep(self, ptr, indices, inbounds: bool = False, name: str = "",
            source_etype: ir.Type | None = None) -> Value:
        if source_etype is None:
            raise ValueError("gep needs source_etype (opaque pointers)")
        idx = ", ".join(f"{i.type} {i.get_reference()}" for i in indices)
        op = "getelementptr inbounds" if inbounds else "getelementptr"
        return self._value(ptr.type, name,
                           f"{op} {source_etype}, {ptr.type} {ptr.get_reference()}, {idx}")

    # ---------------------------------------------------------------- vectors
    def _vector_op(self, opname: str, typ: ir.Type, operands, name: str) -> Value:
        ops = ", ".join(f"{op.type} {op.get_reference()}" for op in operands)
        return self._value(typ, name, f"{opname} {ops}")

    def insert_element(self, vector, value, idx, name: str = "") -> Value:
        vt = vector.type
        if not isinstance(vt, ir.VectorType) or value.type != vt.element \
                or not isinstance(idx.type, ir.IntType):
            raise TypeError(f"insert_element: {value.type} into {vt} at an integer index")
        return self._vector_op("insertelement", vt, (vector, value, idx), name)

    def shuffle_vector(self, vector1, vector2, mask, name: str = "") -> Value:
        mt = mask.type
        if not isinstance(vector1.type, ir.VectorType) or not isinstance(mask, ir.Constant) \
                or not isinstance(mt, ir.VectorType) or mt.element != ir.IntType(32):
            raise TypeError("shuffle_vector needs vectors and a constant i32 vector mask")
        typ = ir.VectorType(vector1.type.element, mt.count)
        return self._vector_op("shufflevector", typ, (vector1, vector2, mask), name)

    # ---------------------------------------------------------------- control flow
    def phi(self, typ: ir.Type, name: str = "", flags=()) -> Phi:
        block = self.block
        phi = Phi(typ, block.scope.register(name, deduplicate=True), flags)
        block.lines.append(phi)
        return phi

    def call(self, fn, args, name: str = "", fastmath=()):
        fnty = fn.function_type
        if fnty.var_arg or getattr(fn, "calling_convention", ""):
            raise ValueError(f"TextBuilder.call: {fn.name} is variadic or has a calling "
                             "convention (not used by kernels)")
        params = fnty.args
        if len(args) < len(params):
            raise TypeError(f"call to {fn.name}: {len(params)} arguments expected, "
                            f"{len(args)} given")
        for i, (arg, expected) in enumerate(zip(args, params)):
            if arg.type != expected:
                raise TypeError(f"Type of #{i + 1} arg mismatch: {expected} != {arg.type}")
        ret = fnty.return_type
        flags = "".join(f"{f} " for f in fastmath)  # e.g. "nsz " (fast-math flags)
        text = (f"call {flags}{ret} {fn.get_reference()}("
                + ", ".join(f"{a.type} {a.get_reference()}" for a in args) + ")")
        if isinstance(ret, ir.VoidType):
            self._void(text)
            return None
        return self._value(ret, name, text)

    def branch(self, target: TextBlock) -> None:
        self._terminate(f"br label {target.get_reference()}")

    def cbranch(self, cond, truebr: TextBlock, falsebr: TextBlock) -> None:
        self._terminate(f"br {cond.type} {cond.get_reference()}, label "
                        f"{truebr.get_reference()}, label {falsebr.get_reference()}")

    def ret(self, value) -> None:
        self._terminate(f"ret {value.type} {value.get_reference()}")

    def ret_void(self) -> None:
        self._terminate("ret void")
