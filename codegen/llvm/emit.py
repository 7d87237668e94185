"""PrimFunc -> LLVM functions: the fixed `i32 @name(ptr %args)` wrapper around a noalias body.

Each kernel becomes an internal, always-inlined `@name.body(ptr noalias ..., ...)` holding
the loop nest, and the exported `i32 @name(ptr %args)` that loads the buffer pointers
from %args (inputs then outputs), calls the body and returns its status (0 on success).
Params get `noalias` (the runtime never passes overlapping buffers) and
`dereferenceable(nbytes)`; `align 64` only when PrimFunc.attrs["assume_aligned"] is true,
since callers may pass numpy arrays. PrimFunc.attrs["prefer_vector_width"] (bits, from a
schedule's te.extern kernel_attrs) becomes LLVM's "prefer-vector-width" on all of the
kernel's functions, so its loops vectorise that wide where the target's default is narrower.
Scratch buffers (Allocate) live on the stack up to
STACK_LIMIT bytes per function and on the heap beyond (allocated at entry, freed at return),
so kernels keep no mutable global state and are reentrant. Loops of kind "parallel" run on
the runtime's thread pool (see FunctionEmitter._parallel_for).
"""
from __future__ import annotations

import functools
import hashlib

from llvmlite import ir

from runtime.library import STATUS_OUT_OF_MEMORY
from runtime.native import PARALLEL_FOR_MAX  # the thread pool's entry (runtime/native.ll)

from ..errors import CodegenError
from ..tir.stmt import (
    Allocate, Buffer, ConstantBuffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, Store,
)
from ..tir.expr import Expr, Load, Var
from ..tir.dtype import itemsize
from ..tir.functor import children
from .emit_expr import ExprEmitter
from .textir import TextBlock, TextBuilder
from .types import I32, I64, PTR, mem_type

STACK_LIMIT = 64 * 1024


def _constant_global(module: ir.Module, buf: ConstantBuffer) -> ir.GlobalVariable:
    """The module's read-only copy of buf's bytes, named by content so kernels (and the
    parallel bodies outlined from them) share one copy of equal constants."""
    digest = hashlib.sha256(buf.data).hexdigest()[:32]
    name = f"__relayjit_const_{digest}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    array_ty = ir.ArrayType(ir.IntType(8), len(buf.data))
    gv = ir.GlobalVariable(module, array_ty, name)
    gv.global_constant = True
    gv.linkage = "internal"
    gv.align = 64
    gv.initializer = ir.Constant(array_ty, bytearray(buf.data))
    return gv


class _FunctionAttributes(ir.FunctionAttributes):
    """llvmlite's function attributes plus LLVM's "key"="value" string attributes (which
    llvmlite's set refuses), printed after the others."""

    def __init__(self, args=()):
        super().__init__(args)
        self.strings: dict[str, str] = {}

    def _to_list(self, ret_type):
        return super()._to_list(ret_type) + [f'"{k}"="{v}"' for k, v in
                                             sorted(self.strings.items())]


def _kernel_function(module: ir.Module, ftype: ir.FunctionType, name: str,
                     func: PrimFunc) -> ir.Function:
    """An LLVM function of kernel `func`, carrying the attributes its PrimFunc asks for."""
    fn = ir.Function(module, ftype, name)
    fn.attributes = _FunctionAttributes()
    width = func.attrs.get("prefer_vector_width")
    if width:
        fn.attributes.strings["prefer-vector-width"] = str(int(width))
    return fn


# A symbolic kernel's (codegen.symbolic) symbol variables are named SYMBOL_PREFIX + index;
# PrimFunc.attrs["symbols"] says how many it takes.
SYMBOL_PREFIX = "__symbol"


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
    """Emits one PrimFunc (statements here, expressions in ExprEmitter).

    The same class emits the body of each parallel loop, outlined into a function of its own
    (see _parallel_for) whose parameters are bound to the values captured from the enclosing
    function.
    """

    def __init__(self, module: ir.Module, func: PrimFunc) -> None:
        super().__init__()
        self.module, self.func, self.kernel = module, func, func.name
        self.buffers: dict[Buffer, ir.Value] = {}
        self.stack_bytes = 0
        self.heap: list[ir.Value] = []  # scratch from aligned_alloc, freed at every return

    def buffer_ptr(self, buf: Buffer) -> ir.Value:
        ptr = self.buffers.get(buf)
        if ptr is None:
            if isinstance(buf, ConstantBuffer):
                return _constant_global(self.module, buf)
            raise self.fail(f"buffer {buf.name} is neither a parameter nor allocated here")
        return ptr

    def emit(self) -> None:
        symbols = int(self.func.attrs.get("symbols", 0))
        body_fn = self.body_function([I64] * symbols, "alwaysinline")
        if symbols:  # a symbolic kernel (codegen.symbolic): its symbols are i64 arguments
            by_name = {v.name: v for v in _free_values(self.func.body)[0]}
            for j, arg in enumerate(body_fn.args[len(self.func.params):]):
                arg.name = f"{SYMBOL_PREFIX}{j}"
                if arg.name in by_name:
                    self.vars[by_name[arg.name]] = arg
        self._emit_function(body_fn, self.func.body)
        self._wrapper(body_fn, symbols)

    def body_function(self, extra_args: list[ir.Type], inlining: str) -> ir.Function:
        """The internal `<name>.body(ptr per buffer parameter..., *extra_args)`, its buffer
        arguments bound; `inlining` is its attribute ("alwaysinline" into the kernel's own
        wrapper, "noinline" for a body several wrappers share)."""
        f = self.func
        body_fn = _kernel_function(self.module, ir.FunctionType(
            I32, [PTR] * len(f.params) + extra_args), f"{f.name}.body", f)
        body_fn.linkage = "internal"
        body_fn.attributes.add(inlining)
        body_fn.attributes.add("nounwind")
        aligned = bool(f.attrs.get("assume_aligned", False))
        for arg, buf in zip(body_fn.args, f.params):
            if buf in self.buffers:
                raise self.fail(f"buffer {buf.name} appears twice among the parameters")
            self._bind_buffer_arg(arg, buf, aligned)
        return body_fn

    def _bind_buffer_arg(self, arg: ir.Argument, buf: Buffer, aligned: bool) -> None:
        """Bind a pointer parameter to buf: noalias (buffers never overlap), dereferenceable."""
        arg.name = _ident(buf.name)
        arg.add_attribute("noalias")
        if buf.nbytes > 0:
            arg.attributes.dereferenceable = buf.nbytes
            arg.add_attribute("nonnull")
            if aligned:
                arg.attributes.align = 64
        self.buffers[buf] = arg

    def _emit_function(self, fn: ir.Function, body: Stmt, loop: tuple | None = None) -> None:
        """Emit `body` (or, with loop = (var, begin, end), a loop over [begin, end) of it) as
        fn's code: returns 0, the or of the statuses raised inside (checked indices, parallel
        loops), or
        STATUS_OUT_OF_MEMORY when heap scratch could not be had (nothing runs then)."""
        entry = TextBlock(fn, "entry")
        start = TextBlock(fn, "start")
        self.entry_builder = TextBuilder(entry)
        self.builder = TextBuilder(start)
        self.status = self.entry_builder.alloca(I32, name="status")
        self.entry_builder.store(ir.Constant(I32, 0), self.status)
        if loop is None:
            self.stmt(body)
        else:
            self._loop(loop[0], loop[1], loop[2], body, guard=True)
        b = self.builder
        status = b.load(self.status, typ=I32)
        self._free_heap(b)
        b.ret(status)
        if not self.heap:
            self.entry_builder.branch(start)
            return
        eb = self.entry_builder
        failed = None
        for ptr in self.heap:
            null = eb.icmp_unsigned("==", ptr, ir.Constant(PTR, None))
            failed = null if failed is None else eb.or_(failed, null)
        oom = TextBlock(fn, "out_of_memory")
        eb.cbranch(failed, oom, start)
        b.position_at_end(oom)
        self._free_heap(b)
        b.ret(ir.Constant(I32, STATUS_OUT_OF_MEMORY))

    def _free_heap(self, b: TextBuilder) -> None:
        for ptr in self.heap:
            b.call(_libc(self.module, "free"), [ptr])

    def _wrapper(self, body_fn: ir.Function, symbols: int = 0) -> None:
        """The exported `i32 name(ptr args)`: buffer pointers from args[0..n), and for a
        symbolic kernel the symbols' int64 values from the array args[n] points to."""
        f = self.func
        fn = _kernel_function(self.module, ir.FunctionType(I32, [PTR]), f.name, f)
        fn.attributes.add("nounwind")
        b = TextBuilder(TextBlock(fn, "entry"))
        args = fn.args[0]
        args.name = "args"
        values = []
        for i, _ in enumerate(f.params):
            slot = b.gep(args, [ir.Constant(I64, i)], inbounds=True, source_etype=PTR)
            values.append(b.load(slot, typ=PTR, align=8))
        if symbols:
            slot = b.gep(args, [ir.Constant(I64, len(f.params))], inbounds=True,
                         source_etype=PTR)
            array = b.load(slot, typ=PTR, align=8)
            for j in range(symbols):
                at = b.gep(array, [ir.Constant(I64, j)], inbounds=True, source_etype=I64)
                values.append(b.load(at, typ=I64, align=8))
        b.ret(b.call(body_fn, values))

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Stmt) -> None:
        """Emit a statement at the builder (recursion depth = loop-nest depth)."""
        t = type(s)
        if t is SeqStmt:
            for c in s.stmts:
                self.stmt(c)
        elif t is For:
            if s.kind == "parallel":
                self._parallel_for(s)
            else:
                self._for(s)
        elif t is Store:
            val = self.expr(s.value)
            ptr = self.address(s.buffer, s.indices)
            self.store_value(s.buffer, val, ptr)
            self.forget_loads()
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
        if not isinstance(s.extent, int):  # a kernel family's extent: may be 0 at run time
            self._loop(s.var, self.const(I64, 0), self.expr(s.extent), s.body, guard=True)
            return
        if s.extent == 0:
            return
        # extent > 0 is static: a bottom-tested loop needs no guard
        self._loop(s.var, self.const(I64, 0), self.const(I64, s.extent), s.body, guard=False)

    def _loop(self, var: Var, begin: ir.Value, end: ir.Value, body: Stmt, guard: bool) -> None:
        """for var in [begin, end): body (guard: the range may be empty)."""
        if var in self.vars:
            raise self.fail(f"loop variable {var.name} is already bound by an outer loop")
        b = self.builder
        pre = b.block
        name = _ident(var.name)
        body_bb = b.append_basic_block(f"{name}.body")
        exit_ = b.append_basic_block(f"{name}.end")
        if guard:
            b.cbranch(b.icmp_signed("<", begin, end), body_bb, exit_)
        else:
            b.branch(body_bb)
        b.position_at_end(body_bb)
        iv = b.phi(I64, name=name)
        iv.add_incoming(begin, pre)
        self.vars[var] = iv
        self.push()
        self.stmt(body)
        self.pop()
        del self.vars[var]
        nxt = b.add(iv, self.const(I64, 1), name=f"{name}.next", flags=("nuw", "nsw"))
        iv.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, end), body_bb, exit_)
        b.position_at_end(exit_)

    def _parallel_for(self, s: For) -> None:
        """Outline the loop body into `i32 @<kernel>.par(ptr closure, i64 begin, i64 end)` and
        hand it to the runtime's pool (relayjit_parallel_for_max), which runs contiguous chunks
        of [0, extent) on its threads, at most s.threads of them (0: no cap).

        The closure is a struct of the values the body uses from here (buffer pointers, outer
        loop and let variables), stored on this function's stack; the pool returns only when
        every chunk is done. The outlined function loads them and calls `<kernel>.par.body`,
        whose pointer params are noalias like the kernel's own. Scratch allocated inside the
        body is per chunk, so tasks never share it.
        """
        if s.var in self.vars:
            raise self.fail(f"loop variable {s.var.name} is already bound by an outer loop")
        if isinstance(s.extent, int) and s.extent == 0:
            return
        extent = self.const(I64, s.extent) if isinstance(s.extent, int) else self.expr(s.extent)
        vars_used, bufs_used = _free_values(s.body)
        captured: list[tuple[Var | Buffer, ir.Value]] = []
        for v in vars_used:
            if v in self.vars:
                captured.append((v, self.vars[v]))
        for buf in bufs_used:
            if buf in self.buffers:
                captured.append((buf, self.buffers[buf]))
        struct_ty = ir.LiteralStructType([val.type for _, val in captured])
        task_fn = self._outline(s, captured, struct_ty)
        # here: fill the closure, call the pool, keep the first failure
        b = self.builder
        frame = self.entry_builder.alloca(struct_ty, name=f"{_ident(s.var.name)}.closure")
        frame.type = PTR  # llvmlite types allocas as typed pointers; the IR is opaque
        for i, (_, val) in enumerate(captured):
            slot = b.gep(frame, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True,
                         source_etype=struct_ty)
            b.store(val, slot)
        launch = self.module.globals.get(PARALLEL_FOR_MAX) or ir.Function(
            self.module, ir.FunctionType(I32, [PTR, PTR, I64, I64]), PARALLEL_FOR_MAX)
        st = b.call(launch, [task_fn, frame, extent, self.const(I64, s.threads)])
        b.store(b.or_(b.load(self.status, typ=I32), st), self.status)
        self.forget_loads()  # the loop stored through these buffers

    def _outline(self, s: For, captured: list, struct_ty: ir.Type) -> ir.Function:
        """The task function the pool calls for the parallel loop s (see _parallel_for)."""
        module = self.module
        name = module.get_unique_name(f"{self.kernel}.par")
        # created first, so a parallel loop nested in the body gets a name of its own
        task_fn = _kernel_function(module, ir.FunctionType(I32, [PTR, I64, I64]), name,
                                   self.func)
        task_fn.linkage = "internal"
        task_fn.attributes.add("nounwind")
        # the body: captured values as parameters, then the chunk's [begin, end)
        body_ty = ir.FunctionType(I32, [val.type for _, val in captured] + [I64, I64])
        body_fn = _kernel_function(module, body_ty, f"{name}.body", self.func)
        body_fn.linkage = "internal"
        body_fn.attributes.add("nounwind")
        inner = FunctionEmitter(module, self.func)
        for (key, _), arg in zip(captured, body_fn.args):
            if isinstance(key, Buffer):
                inner._bind_buffer_arg(arg, key, False)
            else:
                arg.name = _ident(key.name)
                inner.vars[key] = arg
        begin, end = body_fn.args[-2], body_fn.args[-1]
        inner._emit_function(body_fn, s.body, loop=(s.var, begin, end))
        # the task: unpack the closure, run the chunk
        tb = TextBuilder(TextBlock(task_fn, "entry"))
        closure, tbegin, tend = task_fn.args
        fields = []
        for i, (_, val) in enumerate(captured):
            slot = tb.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True,
                          source_etype=struct_ty)
            fields.append(tb.load(slot, typ=val.type))
        tb.ret(tb.call(body_fn, [*fields, tbegin, tend]))
        return task_fn

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
        self.forget_loads()  # a branch may have stored

    def _allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf in self.buffers:
            raise self.fail(f"buffer {buf.name} allocated twice")
        ty = mem_type(buf.dtype)
        nbytes = max(buf.nbytes, 1)
        if s.size is not None:  # a symbolic kernel's: its size from the symbols, at entry
            ptr = self.entry_builder.call(_libc(self.module, "aligned_alloc"),
                                          [ir.Constant(I64, 64), self._heap_bytes(s)],
                                          name=_ident(buf.name))
            self.heap.append(ptr)
        elif self.stack_bytes + nbytes <= STACK_LIMIT:
            self.stack_bytes += nbytes
            ptr = self.entry_builder.alloca(ty, size=ir.Constant(I64, max(buf.size, 1)),
                                            name=_ident(buf.name))
            ptr.align = 64 if nbytes >= 64 else None
        else:  # per call (per chunk in a parallel body): reentrant, unlike a static buffer
            size = ir.Constant(I64, -(-nbytes // 64) * 64)  # aligned_alloc wants a multiple
            ptr = self.entry_builder.call(_libc(self.module, "aligned_alloc"),
                                          [ir.Constant(I64, 64), size], name=_ident(buf.name))
            self.heap.append(ptr)
        if buf.size == 1 and s.size is None:
            self.accumulators.add(buf)
        self.buffers[buf] = ptr
        self.stmt(s.body)
        del self.buffers[buf]

    def _heap_bytes(self, s: Allocate) -> ir.Value:
        """A dynamic scratch's bytes rounded up to 64 (aligned_alloc wants a multiple),
        computed in the entry block (its size reads only the kernel's symbols)."""
        here, self.builder = self.builder, self.entry_builder
        try:
            n = self.expr(s.size)
        finally:
            self.builder = here
        eb = self.entry_builder
        nbytes = eb.mul(n, ir.Constant(I64, itemsize(s.buffer.dtype)))
        nbytes = eb.add(nbytes, ir.Constant(I64, 64))  # + 64: never 0, and rounded up
        return eb.and_(nbytes, ir.Constant(I64, -64))


def _free_values(body: Stmt) -> tuple[list[Var], list[Buffer]]:
    """Variables and buffers `body` mentions, in first-use order (explicit-stack walks)."""
    seen_vars: dict[Var, None] = {}
    seen_bufs: dict[Buffer, None] = {}
    seen_exprs: set[Expr] = set()

    def exprs(e: Expr) -> None:
        """Post-order over the nodes not seen before (a seen node's operands were seen too)."""
        if e in seen_exprs:
            return
        work: list[tuple[Expr, bool]] = [(e, False)]
        while work:
            n, expanded = work.pop()
            if expanded:
                t = type(n)
                if t is Var:
                    seen_vars.setdefault(n)
                elif t is Load:
                    seen_bufs.setdefault(n.buffer)
                continue
            if n in seen_exprs:
                continue
            seen_exprs.add(n)
            work.append((n, True))
            work.extend((c, False) for c in reversed(children(n)) if c not in seen_exprs)

    stack = [body]
    while stack:
        s = stack.pop()
        t = type(s)
        if t is SeqStmt:
            stack.extend(reversed(s.stmts))
        elif t is For:
            if not isinstance(s.extent, int):
                exprs(s.extent)
            stack.append(s.body)
        elif t is Store:
            seen_bufs.setdefault(s.buffer)
            for i in s.indices:
                exprs(i)
            exprs(s.value)
        elif t is Allocate:
            if s.size is not None:
                exprs(s.size)
            stack.append(s.body)
        elif t is IfThenElse:
            exprs(s.cond)
            stack.append(s.then_body)
            if s.else_body is not None:
                stack.append(s.else_body)
        elif t is LetStmt:
            exprs(s.value)
            stack.append(s.body)
        elif t is Evaluate:
            exprs(s.value)
    return list(seen_vars), list(seen_bufs)


def _libc(module: ir.Module, name: str) -> ir.Function:
    """Declaration of the C library's aligned_alloc or free in this module."""
    fn = module.globals.get(name)
    if fn is None:
        ty = ir.FunctionType(PTR, [I64, I64]) if name == "aligned_alloc" else \
            ir.FunctionType(ir.VoidType(), [PTR])
        fn = ir.Function(module, ty, name)
    return fn


@functools.lru_cache(maxsize=4096)
def _ident(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
