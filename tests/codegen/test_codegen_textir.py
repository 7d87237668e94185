"""codegen.llvm.textir writes the text llvmlite.ir.IRBuilder would print, character for character.

The same emission script runs once through llvmlite's IRBuilder and once through TextBuilder,
on functions of identical modules; the printed modules must be equal. Every TextBuilder
method appears in a script, with and without names, flags and alignment.
"""
from __future__ import annotations

import math

import llvmlite.binding as llvm
import pytest
from llvmlite import ir

from codegen.llvm.textir import TextBlock, TextBuilder

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()


def _llvmlite_block(fn: ir.Function, name: str):
    return fn.append_basic_block(name)


def _both(script, arg_types=(I64, I64, F32, F32, PTR), ret=I32) -> tuple[str, str]:
    """Module text with `script(builder, fn, new_block)` emitted by llvmlite and by textir."""
    out = []
    for make_block, make_builder in ((_llvmlite_block, ir.IRBuilder), (TextBlock, TextBuilder)):
        module = ir.Module(name="m")
        fn = ir.Function(module, ir.FunctionType(ret, list(arg_types)), "kernel")
        fn.args[0].name = "x"  # a renamed argument keeps its old number used, as in emit.py
        script(make_builder(make_block(fn, "entry")), fn, lambda name, f=fn: make_block(f, name))
        out.append(str(module))
    return out[0], out[1]


def test_integer_arithmetic_and_flags():
    def script(b, fn, block):
        x, y = fn.args[0], fn.args[1]
        v = b.add(x, y)
        v = b.add(v, ir.Constant(I64, 1), name="v.next", flags=("nuw", "nsw"))
        v = b.sub(v, y, name="v")  # a name already taken: deduplicated
        v = b.mul(v, ir.Constant(I64, -3))
        for op in (b.sdiv, b.udiv, b.srem, b.urem, b.and_, b.or_, b.xor, b.shl, b.lshr,
                   b.ashr):
            v = op(v, y)
        v = b.neg(v, name="negated")
        b.ret(b.trunc(v, I32))

    old, new = _both(script)
    assert old == new


def test_float_arithmetic_compare_select():
    def script(b, fn, block):
        a, c = fn.args[2], fn.args[3]
        v = b.fadd(a, c, flags=("reassoc", "contract"))
        v = b.fmul(v, ir.Constant(F32, 0.1), flags=("contract",))
        v = b.fsub(b.fdiv(v, c), ir.Constant(F32, math.inf))
        v = b.frem(v, ir.Constant(F32, -0.0))
        v = b.fneg(v)
        picks = [b.fcmp_ordered(op, v, a) for op in (">", "<", "==", "!=", ">=", "<=")]
        picks += [b.fcmp_unordered(op, v, a) for op in ("uno", "!=", "<")]
        picks.append(b.fcmp_ordered("ord", v, a, name="ordered"))
        picks += [b.icmp_signed(op, fn.args[0], fn.args[1]) for op in ("<", ">=", "==")]
        picks += [b.icmp_unsigned(op, fn.args[0], fn.args[1]) for op in ("<", "!=")]
        for p in picks:
            v = b.select(p, v, a)
        d = b.fpext(v, F64)
        h = b.fptrunc(b.fptrunc(d, F32), F16)
        i = b.fptosi(b.fpext(h, F32), I32)
        bits = b.bitcast(b.sitofp(i, F32), I32)
        u = b.uitofp(b.zext(b.icmp_signed("<", bits, ir.Constant(I32, 0)), I32), F64)
        b.ret(b.sext(b.trunc(b.fptosi(u, I64), I8), I32))

    old, new = _both(script)
    assert old == new


def test_memory_phi_branches_calls():
    def script(b, fn, block):
        module = fn.module
        status = b.alloca(I32, name="status")
        b.store(ir.Constant(I32, 0), status)
        scratch = b.alloca(F32, size=ir.Constant(I64, 16), name="scratch")
        scratch.align = 64
        frame_ty = ir.LiteralStructType([I64, PTR])
        frame = b.alloca(frame_ty, name="frame")
        frame.type = PTR  # as emit.py does for closures
        b.alloca(I8, size=4)  # a Python int count becomes an i32 constant
        slot = b.gep(frame, [ir.Constant(I32, 0), ir.Constant(I32, 1)], inbounds=True,
                     source_etype=frame_ty)
        b.store(fn.args[4], slot)
        start, body, end = block("start"), block("i.body"), block("i.end")
        b.cbranch(b.icmp_signed("<", fn.args[0], fn.args[1]), start, end)
        b.position_at_end(start)
        b.branch(body)
        b.position_at_end(body)
        i = b.phi(I64, name="i")
        i.add_incoming(ir.Constant(I64, 0), start)
        p = b.gep(fn.args[4], [i], source_etype=F32)
        val = b.load(p, typ=F32, align=4)
        b.store(val, b.gep(scratch, [ir.Constant(I64, 3)], inbounds=True, source_etype=F32),
                align=4)
        libm = ir.Function(module, ir.FunctionType(F64, [F64]), "exp")
        r = b.call(libm, [b.fpext(val, F64)], name="e")
        free = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), "free")
        b.call(free, [fn.args[4]])  # void: numbered, but no `%x =`
        loaded = b.load(status)  # typed pointer: the element type comes from it
        b.store(b.or_(loaded, b.fptosi(r, I32)), status)
        nxt = b.add(i, ir.Constant(I64, 1), name="i.next", flags=("nuw", "nsw"))
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, fn.args[1]), body, end)
        b.position_at_end(end)
        odd = b.append_basic_block('odd "name"')  # quoted and escaped label
        b.branch(odd)
        b.position_at_end(odd)
        b.ret(b.load(status, typ=I32))

    old, new = _both(script)
    assert old == new
    llvm.parse_assembly(new).verify()


def test_function_pointer_argument_and_void_function():
    def script(b, fn, block):
        task = ir.Function(fn.module, ir.FunctionType(I32, [PTR, I64, I64]), "task")
        pool = ir.Function(fn.module, ir.FunctionType(I32, [PTR, PTR, I64]), "pool")
        b.call(pool, [task, fn.args[0], ir.Constant(I64, 7)])
        b.ret_void()

    old, new = _both(script, arg_types=(PTR,), ret=ir.VoidType())
    assert old == new


def test_checks_match_llvmlite():
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I32, PTR]), "f")
    b = TextBuilder(TextBlock(fn, "entry"))
    with pytest.raises(ValueError, match="same type"):
        b.add(fn.args[0], fn.args[1])
    with pytest.raises(TypeError, match="not a pointer"):
        b.load(fn.args[0], typ=I64)
    with pytest.raises(TypeError, match="mismatching types"):
        b.store(fn.args[0], b.alloca(I32))
    callee = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64]), "g")
    with pytest.raises(TypeError, match="arg mismatch"):
        b.call(callee, [fn.args[1]])
    b.ret_void()
    with pytest.raises(ValueError, match="already terminated"):
        b.ret_void()


def test_vector_operations():
    vt = ir.VectorType(F32, 8)

    def script(b, fn, block):
        s = b.load(fn.args[0], typ=F32, align=4)
        v = b.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(I32, 0))
        v = b.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                             ir.Constant(ir.VectorType(I32, 8), [0] * 8), name="splat")
        w = b.load(fn.args[0], typ=vt, align=4)
        lo = b.shuffle_vector(v, w, ir.Constant(ir.VectorType(I32, 4), [0, 9, 2, 11]))
        fma = ir.Function(fn.module, ir.FunctionType(vt, [vt, vt, vt]), "llvm.fma.v8f32")
        acc = b.call(fma, [v, w, w])
        mask = b.fcmp_ordered("<", acc, w)  # a vector compare gives <8 x i1>
        acc = b.select(mask, acc, w)
        b.store(acc, fn.args[0], align=4)
        b.store(lo, fn.args[0])
        b.ret_void()

    old, new = _both(script, arg_types=(PTR,), ret=ir.VoidType())
    assert old == new
    llvm.parse_assembly(new).verify()
