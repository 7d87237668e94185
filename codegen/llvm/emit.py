"""PrimFunc -> LLVM functions: the fixed `i32 @name(ptr %args)` wrapper around a noalias body.

Each kernel becomes an internal, always-inlined `@name.body(ptr noalias ..., ...)` holding
the loop nest, and the exported `i32 @name(ptr %args)` that loads the buffer pointers
from %args (inputs then outputs), calls the body and returns 0. Params get `noalias`
(the runtime never passes overlapping buffers) and `dereferenceable(nbytes)`; `align 64`
only when PrimFunc.attrs["assume_aligned"] is true, since callers may pass numpy arrays.
Scratch buffers (Allocate) live on the stack up to STACK_LIMIT bytes per kernel and in
zero-initialised internal globals beyond (such kernels are not reentrant).
"""
from __future__ import annotations

from llvmlite import ir

from ..errors import CodegenError
from ..tir.stmt import (
    Allocate, Buffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, Store,
)
from .emit_expr import ExprEmitter
from .types import I32, I64, PTR, mem_type

STACK_LIMIT = 64 * 1024


def emit_module(funcs: list[PrimFunc], name: str = "relayjit") -> ir.Module:
    """An LLVM module with one exported kernel per PrimFunc."""
    module = ir.Module(name=name)
    seen: set[str] = set()
    for f in funcs:
        if not isinstance(f, PrimFunc):
            raise CodegenError(f"expected PrimFunc, got {type(f).__name__}")
        if f.name in seen:
            raise CodegenError(f"two kernels are named {f.name!r}; kernel names must be unique")
        seen.add(f.name)
        FunctionEmitter(module, f).emit()
    return module


class FunctionEmitter(ExprEmitter):
    """Emits one PrimFunc (statements here, expressions in ExprEmitter)."""

    def __init__(self, module: ir.Module, func: PrimFunc) -> None:
        super().__init__()
        self.module, self.func, self.kernel = module, func, func.name
        self.buffers: dict[Buffer, ir.Value] = {}
        self.stack_bytes = 0

    def buffer_ptr(self, buf: Buffer) -> ir.Value:
        ptr = self.buffers.get(buf)
        if ptr is None:
            raise self.fail(f"buffer {buf.name} is neither a parameter nor allocated here")
        return ptr

    def emit(self) -> None:
        f = self.func
        body_fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR] * len(f.params)),
                              f"{f.name}.body")
        body_fn.linkage = "internal"
        body_fn.attributes.add("alwaysinline")
        body_fn.attributes.add("nounwind")
        aligned = bool(f.attrs.get("assume_aligned", False))
        for arg, buf in zip(body_fn.args, f.params):
            arg.name = _ident(buf.name)
            arg.add_attribute("noalias")
            if buf.nbytes > 0:
                arg.attributes.dereferenceable = buf.nbytes
                arg.add_attribute("nonnull")
                if aligned:
                    arg.attributes.align = 64
            if buf in self.buffers:
                raise self.fail(f"buffer {buf.name} appears twice among the parameters")
            self.buffers[buf] = arg
        entry = body_fn.append_basic_block("entry")
        start = body_fn.append_basic_block("start")
        self.entry_builder = ir.IRBuilder(entry)
        self.builder = ir.IRBuilder(start)
        self.stmt(f.body)
        self.builder.ret_void()
        self.entry_builder.branch(start)
        self._wrapper(body_fn)

    def _wrapper(self, body_fn: ir.Function) -> None:
        f = self.func
        fn = ir.Function(self.module, ir.FunctionType(I32, [PTR]), f.name)
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = fn.args[0]
        args.name = "args"
        ptrs = []
        for i, _ in enumerate(f.params):
            slot = b.gep(args, [ir.Constant(I64, i)], inbounds=True, source_etype=PTR)
            ptrs.append(b.load(slot, typ=PTR, align=8))
        b.call(body_fn, ptrs)
        b.ret(ir.Constant(I32, 0))

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Stmt) -> None:
        """Emit a statement at the builder (recursion depth = loop-nest depth)."""
        t = type(s)
        if t is SeqStmt:
            for c in s.stmts:
                self.stmt(c)
        elif t is For:
            self._for(s)
        elif t is Store:
            val = self.expr(s.value)
            ptr = self.address(s.buffer, s.indices)
            self.store_value(s.buffer, val, ptr)
            for scope in self.memo:  # loads emitted before may now be stale
                scope.clear()
        elif t is Allocate:
            self._allocate(s)
        elif t is IfThenElse:
            self._if(s)
        elif t is LetStmt:
            if s.var in self.vars:
                raise self.fail(f"variable {s.var.name} bound twice")
            self.vars[s.var] = self.expr(s.value)
            self.stmt(s.body)
            del self.vars[s.var]
        elif t is Evaluate:
            self.expr(s.value)
        else:
            raise self.fail(f"cannot emit statement {t.__name__}")

    def _for(self, s: For) -> None:
        if s.var in self.vars:
            raise self.fail(f"loop variable {s.var.name} is already bound by an outer loop")
        if s.extent == 0:
            return
        b = self.builder
        pre = b.block
        name = _ident(s.var.name)
        body = b.append_basic_block(f"{name}.body")
        exit_ = b.append_basic_block(f"{name}.end")
        b.branch(body)  # extent > 0 is static: a bottom-tested loop needs no guard
        b.position_at_end(body)
        iv = b.phi(I64, name=name)
        iv.add_incoming(ir.Constant(I64, 0), pre)
        self.vars[s.var] = iv
        self.push()
        self.stmt(s.body)
        self.pop()
        del self.vars[s.var]
        nxt = b.add(iv, ir.Constant(I64, 1), name=f"{name}.next", flags=("nuw", "nsw"))
        iv.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, ir.Constant(I64, s.extent)), body, exit_)
        b.position_at_end(exit_)

    def _if(self, s: IfThenElse) -> None:
        b = self.builder
        cond = self.expr(s.cond)
        then_bb = b.append_basic_block("if.then")
        end_bb = b.append_basic_block("if.end")
        else_bb = b.append_basic_block("if.else") if s.else_body is not None else end_bb
        b.cbranch(cond, then_bb, else_bb)
        for bb, sub in ((then_bb, s.then_body), (else_bb, s.else_body)):
            if sub is None:
                continue
            b.position_at_end(bb)
            self.push()
            self.stmt(sub)
            self.pop()
            b.branch(end_bb)
        b.position_at_end(end_bb)
        for scope in self.memo:  # a branch may have stored
            scope.clear()

    def _allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf in self.buffers:
            raise self.fail(f"buffer {buf.name} allocated twice")
        ty = mem_type(buf.dtype)
        nbytes = max(buf.nbytes, 1)
        if self.stack_bytes + nbytes <= STACK_LIMIT:
            self.stack_bytes += nbytes
            ptr = self.entry_builder.alloca(ty, size=ir.Constant(I64, max(buf.size, 1)),
                                            name=_ident(buf.name))
            ptr.align = 64 if nbytes >= 64 else None
        else:
            arr = ir.ArrayType(ir.IntType(8), nbytes)
            gname = self.module.get_unique_name(f"{self.kernel}.{_ident(buf.name)}.scratch")
            gv = ir.GlobalVariable(self.module, arr, gname)
            gv.linkage = "internal"
            gv.initializer = ir.Constant(arr, None)
            gv.align = 64
            gv.type = PTR  # llvmlite types globals as typed pointers; the IR is opaque
            ptr = gv
        if buf.size == 1:
            self.accumulators.add(buf)
        self.buffers[buf] = ptr
        self.stmt(s.body)
        del self.buffers[buf]


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
