"""Expression emission: arithmetic with numpy semantics, casts, loads, math calls.

float16 values live in registers as LLVM `half`; every operation on them widens to float32,
computes there and rounds the result back to half (numpy's float16 loops do the same), so
no half arithmetic instruction or soft-float library call is needed.
"""
from __future__ import annotations

import math

import numpy as np

from llvmlite import ir

from ..errors import CodegenError
from ..tir.dtype import (DATA_ONLY, SMALL_FLOATS, SUB_BYTE_INTS, is_bool, is_float, is_int, is_integer,
                         is_uint, itemsize)
from ..tir.expr import (
    BinaryOp, Call, Cast, Expr, FloatImm, IfThenElseExpr, IntImm, Load, Not, Reinterpret, Select,
    Var,
)
from ..tir.functor import children, post_order
from ..tir.half import NARROW
from ..tir.stmt import Buffer
from runtime.library import STATUS_INDEX_OUT_OF_RANGE

from ..tir.ops import CHECKED_INDEX
from . import float8, mathlib
from .microkernels import PREFIX as MICROKERNEL_PREFIX, emit_call as emit_microkernel_call
from .textir import TextBuilder
from .types import (F16, F32, F64, I1, I16, I32, I64, get_function, intrinsic, llvm_suffix, mem_type,
                    reg_type)

_FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_SPECULATE_LIMIT = 96  # if_then_else branches up to this many nodes become clamped selects
_REASSOC = ("reassoc", "contract")


class ExprEmitter:
    """Emits expressions at the builder's position; memoised per dominating block scope."""

    builder: TextBuilder
    kernel: str

    def __init__(self) -> None:
        self.vars: dict[Var, ir.Value] = {}
        # Values of the expressions emitted in the open (dominating) scopes, by node: one dict
        # for plain and one for clamped emission (speculated if_then_else arms). A flat list
        # of dicts, so code that writes memory clears them all (microkernels.emit_call too).
        self.memo: list[dict[Expr, ir.Value]] = [{}, {}]
        self._scope_entries: list[list[tuple[dict, Expr]]] = [[]]  # what each scope added
        self.clamp = False
        self.accumulators: set[Buffer] = set()
        self._int_consts: dict[tuple[ir.Type, int], ir.Constant] = {}

    def fail(self, msg: str) -> CodegenError:
        return CodegenError(f"codegen {self.kernel}: {msg}")

    # ------------------------------------------------------------------ scopes
    def push(self) -> None:
        self._scope_entries.append([])

    def pop(self) -> None:
        """Forget what the closing scope emitted: its block does not dominate what follows."""
        for memo, node in self._scope_entries.pop():
            memo.pop(node, None)  # may be gone already (forget_loads)

    def forget_loads(self) -> None:
        """After a store (or a call that writes memory) no earlier load may be reused."""
        for memo in self.memo:
            memo.clear()

    def lookup(self, e: Expr) -> ir.Value | None:
        """The value of e already emitted in a dominating scope, if any."""
        return self.memo[self.clamp].get(e)

    def const(self, ty: ir.Type, value: int) -> ir.Constant:
        """An integer constant, shared: formatting a constant costs more than finding it."""
        key = (ty, value)
        c = self._int_consts.get(key)
        if c is None:
            c = self._int_consts[key] = ir.Constant(ty, value)
        return c

    def expr(self, e: Expr) -> ir.Value:
        """LLVM value of e (i1 for bool); operands first in explicit-stack post-order."""
        memo = self.memo[self.clamp]  # if_then_else switches clamp only inside nested calls
        got = memo.get(e)
        if got is not None:
            return got
        added = self._scope_entries[-1]
        stack: list[tuple[Expr, bool]] = [(e, False)]
        while stack:
            node, expanded = stack.pop()
            if node in memo:
                continue
            if not expanded:
                kids = _eager_children(node)
                if kids:
                    stack.append((node, True))
                    stack.extend((c, False) for c in reversed(kids) if c not in memo)
                    continue
            method = _DISPATCH.get(type(node))
            if method is None:
                raise self.fail(f"cannot emit {type(node).__name__} "
                                "(reductions must be lowered first)")
            memo[node] = method(self, node)
            added.append((memo, node))
        return memo[e]

    # ------------------------------------------------------------------ leaves
    def _int(self, e: IntImm) -> ir.Value:
        if type(e.value) is int:  # not a bool: ir.Constant prints True as `true`
            return self.const(reg_type(e.dtype), e.value)
        return ir.Constant(reg_type(e.dtype), e.value)

    def _float(self, e: FloatImm) -> ir.Value:
        if e.dtype == "bfloat16":  # its bits (the value is already a bfloat16, tir.const)
            return ir.Constant(I16, int(np.float32(e.value).view(np.uint32)) >> 16)
        return ir.Constant(reg_type(e.dtype), e.value)

    def _var(self, e: Var) -> ir.Value:
        val = self.vars.get(e)
        if val is None:
            raise self.fail(f"variable {e.name} used outside its loop/let")
        return val

    # ------------------------------------------------------------------ memory
    def address(self, buf: Buffer, indices: tuple[Expr, ...]) -> ir.Value:
        """Pointer to buf[indices] (flat int64 offset from the strides)."""
        base = self.buffer_ptr(buf)
        if len(indices) != len(buf.shape):
            raise self.fail(f"buffer {buf.name}: expected {len(buf.shape)} indices, "
                            f"got {len(indices)}")
        b = self.builder
        offset: ir.Value | None = None
        for idx, stride, dim in _fuse_div_mod_pairs(indices, buf.elem_strides(), buf.shape):
            v = self.expr(idx)
            if v.type != I64:
                v = b.sext(v, I64) if v.type.width < 64 else v
            if self.clamp and dim > 0:  # speculated load: keep the address in bounds
                zero = self.const(I64, 0)
                v = b.select(b.icmp_signed("<", v, zero), zero, v)
                hi = self.const(I64, dim - 1)
                v = b.select(b.icmp_signed(">", v, hi), hi, v)
            if stride != 1:
                v = b.mul(v, self.const(I64, stride))
            offset = v if offset is None else b.add(offset, v)
        if offset is None:
            return base
        return b.gep(base, [offset], inbounds=True, source_etype=mem_type(buf.dtype))

    def buffer_ptr(self, buf: Buffer) -> ir.Value:
        raise NotImplementedError

    def _load(self, e: Load) -> ir.Value:
        ptr = self.address(e.buffer, e.indices)
        val = self.builder.load(ptr, typ=mem_type(e.dtype), align=_align(e.dtype))
        if is_bool(e.dtype):
            return self.builder.icmp_unsigned("!=", val, ir.Constant(val.type, 0))
        return val

    def store_value(self, buf: Buffer, val: ir.Value, ptr: ir.Value) -> None:
        """Store a register value to memory (bool -> i8)."""
        if is_bool(buf.dtype):
            val = self.builder.zext(val, mem_type("bool"))
        self.builder.store(val, ptr, align=_align(buf.dtype))

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, e: BinaryOp) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        dt, k, bld = e.a.dtype, e.kind, self.builder
        if dt in DATA_ONLY:
            raise self.fail(f"{k} on {dt}: float8 and sub-byte int values are only cast, "
                            "loaded and stored")
        if dt in NARROW:  # in float32, rounded back (comparisons need no rounding)
            a, b = self._widen(a, dt), self._widen(b, dt)
            if k in _FCMP:
                return bld.fcmp_unordered("!=", a, b) if k == "ne" else \
                    bld.fcmp_ordered(_FCMP[k], a, b)
            return self._narrow(self._float_binary(e, k, a, b), dt)
        if k in _FCMP:
            if is_float(dt):
                if k == "ne":
                    return bld.fcmp_unordered("!=", a, b)
                return bld.fcmp_ordered(_FCMP[k], a, b)
            if is_uint(dt) or is_bool(dt):
                return bld.icmp_unsigned(_FCMP[k], a, b)
            return bld.icmp_signed(_FCMP[k], a, b)
        if k in ("and", "bitand"):
            return bld.and_(a, b)
        if k in ("or", "bitor"):
            return bld.or_(a, b)
        if k == "bitxor":
            return bld.xor(a, b)
        if k in ("shl", "shr"):
            return self._shift(k, dt, a, b)
        if is_float(dt):
            return self._float_binary(e, k, a, b)
        return self._int_binary(e, k, a, b)

    def _float_binary(self, e: BinaryOp, k: str, a: ir.Value, b: ir.Value) -> ir.Value:
        bld = self.builder
        flags = _REASSOC if self._is_acc_update(e) else ()
        if k == "add":
            return bld.fadd(a, b, flags=flags)
        if k == "sub":
            return bld.fsub(a, b)
        if k == "mul":
            return bld.fmul(a, b, flags=flags)
        if k == "div":
            return bld.fdiv(a, b)
        if k in ("max", "min") and flags:
            # a reduction's update: llvm.maximum / minimum keep NaN as the select below does,
            # and the loop vectoriser knows them as reductions (it does not know the select);
            # nsz: -0 and +0 tie either way (numpy's order), no sign-bit blend each step
            name = f"llvm.{'maximum' if k == 'max' else 'minimum'}.{llvm_suffix(a.type)}"
            return bld.call(get_function(bld.module, name, a.type, [a.type, b.type]), [a, b],
                            fastmath=("nsz",))
        if k == "max":  # numpy.maximum: NaN in either operand propagates
            take_a = bld.or_(bld.fcmp_ordered(">", a, b), bld.fcmp_unordered("uno", a, a))
            return bld.select(take_a, a, b)
        if k == "min":
            take_a = bld.or_(bld.fcmp_ordered("<", a, b), bld.fcmp_unordered("uno", a, a))
            return bld.select(take_a, a, b)
        if k == "mod":
            return bld.frem(a, b)
        if k == "floordiv":
            return intrinsic(bld, "floor", bld.fdiv(a, b))
        if k == "floormod":  # numpy.mod exactly: fmod, moved to b's side, zero signed like b
            r = bld.frem(a, b)
            zero = ir.Constant(a.type, 0.0)
            fix = bld.and_(bld.fcmp_ordered("!=", r, zero),
                           bld.xor(bld.fcmp_ordered("<", r, zero), bld.fcmp_ordered("<", b, zero)))
            out = bld.select(fix, bld.fadd(r, b), r)
            return bld.select(bld.fcmp_ordered("==", r, zero),
                              intrinsic(bld, "copysign", zero, b), out)
        raise self.fail(f"float op {k} not supported")

    def _is_acc_update(self, e: BinaryOp) -> bool:
        """acc + x / acc * x on a reduction accumulator may be reassociated (vectorised)."""
        return type(e.a) is Load and e.a.buffer in self.accumulators

    def _int_binary(self, e: BinaryOp, k: str, a: ir.Value, b: ir.Value) -> ir.Value:
        bld, dt = self.builder, e.dtype
        if k == "add":
            return bld.add(a, b)
        if k == "sub":
            return bld.sub(a, b)
        if k == "mul":
            return bld.mul(a, b)
        if k in ("min", "max"):
            op = {"min": "<", "max": ">"}[k]
            cmp = bld.icmp_unsigned(op, a, b) if is_uint(dt) or is_bool(dt) else \
                bld.icmp_signed(op, a, b)
            return bld.select(cmp, a, b)
        if k in ("div", "mod", "floordiv", "floormod"):
            return self._int_divmod(e, k, a, b)
        raise self.fail(f"integer op {k} not supported for {dt}")

    def _shift(self, k: str, dt: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """Shifts with numpy results where LLVM's are poison: amounts outside [0, width)."""
        bld, ty = self.builder, a.type
        width = ir.Constant(ty, ty.width)
        ok = bld.icmp_unsigned("<", b, width)  # a negative signed amount is huge unsigned
        if k == "shr" and is_int(dt):  # ashr by width-1 gives the 0 / -1 fill
            return bld.ashr(a, bld.select(ok, b, ir.Constant(ty, ty.width - 1)))
        amount = bld.select(ok, b, ir.Constant(ty, 0))
        r = bld.shl(a, amount) if k == "shl" else bld.lshr(a, amount)
        return bld.select(ok, r, ir.Constant(ty, 0))

    def _int_divmod(self, e: BinaryOp, k: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """Integer division with numpy results for x/0 (0) and INT_MIN/-1 (wraps), no traps."""
        bld, dt = self.builder, e.dtype
        ty = a.type
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        const_b = e.b.value if type(e.b) is IntImm else None
        signed = is_int(dt)
        safe = const_b is not None and const_b != 0 and not (signed and const_b == -1)
        if safe:
            bs, is_zero, is_m1 = b, None, None
        else:
            is_zero = bld.icmp_unsigned("==", b, zero)
            bad = is_zero
            is_m1 = None
            if signed:
                is_m1 = bld.icmp_signed("==", b, ir.Constant(ty, -1))
                bad = bld.or_(is_zero, is_m1)
            bs = bld.select(bad, one, b)
        if not signed:
            q = bld.udiv(a, bs) if k in ("div", "floordiv") else bld.urem(a, bs)
        elif k in ("div", "floordiv"):
            q = bld.sdiv(a, bs)
            if k == "floordiv":
                r = bld.srem(a, bs)
                adjust = bld.and_(bld.icmp_signed("!=", r, zero),
                                  bld.xor(bld.icmp_signed("<", r, zero),
                                          bld.icmp_signed("<", bs, zero)))
                q = bld.sub(q, bld.zext(adjust, ty))
            if is_m1 is not None:
                q = bld.select(is_m1, bld.sub(zero, a), q)
        else:
            q = bld.srem(a, bs)
            if k == "floormod":
                adjust = bld.and_(bld.icmp_signed("!=", q, zero),
                                  bld.xor(bld.icmp_signed("<", q, zero),
                                          bld.icmp_signed("<", bs, zero)))
                q = bld.select(adjust, bld.add(q, bs), q)
            if is_m1 is not None:
                q = bld.select(is_m1, zero, q)
        if is_zero is not None:
            q = bld.select(is_zero, zero, q)
        return q

    def _not(self, e: Not) -> ir.Value:
        return self.builder.xor(self.expr(e.a), ir.Constant(I1, 1))

    def _select(self, e: Select) -> ir.Value:
        return self.builder.select(self.expr(e.cond), self.expr(e.a), self.expr(e.b))

    def _if_then_else(self, e: IfThenElseExpr) -> ir.Value:
        """Small branches: evaluate both with clamped loads and select (vectorises)."""
        cond = self.expr(e.cond)
        nodes = post_order(e.a) + post_order(e.b)
        if len(nodes) <= _SPECULATE_LIMIT and all(
                n.buffer.size > 0 for n in nodes if type(n) is Load):
            saved = self.clamp
            self.clamp = True
            try:
                a, b = self.expr(e.a), self.expr(e.b)
            finally:
                self.clamp = saved
            return self.builder.select(cond, a, b)
        bld = self.builder
        then_bb, else_bb = bld.append_basic_block("ite.then"), bld.append_basic_block("ite.else")
        end_bb = bld.append_basic_block("ite.end")
        bld.cbranch(cond, then_bb, else_bb)
        vals = []
        for bb, sub in ((then_bb, e.a), (else_bb, e.b)):
            bld.position_at_end(bb)
            self.push()
            vals.append((self.expr(sub), bld.block))
            self.pop()
            bld.branch(end_bb)
        bld.position_at_end(end_bb)
        phi = bld.phi(reg_type(e.dtype))
        for v, bb in vals:
            phi.add_incoming(v, bb)
        return phi

    # ------------------------------------------------------------------ casts
    def _cast(self, e: Cast) -> ir.Value:
        return self._convert(self.expr(e.value), e.value.dtype, e.dtype)

    def _convert(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """A register value of dtype src as dtype dst (numpy's conversions)."""
        bld = self.builder
        if src == dst:
            return v
        if src in SMALL_FLOATS:  # exact in float32, as a half or bfloat16 is
            v, src = float8.decode(bld, v, src), "float32"
            if dst == "float32":
                return v
        if src in SUB_BYTE_INTS:  # its value as an int8 / uint8
            v, src = float8.widen_int(bld, v, src), "int8" if SUB_BYTE_INTS[src][1] else "uint8"
        if dst in SUB_BYTE_INTS:  # the low bits of the value as int64
            return float8.narrow_int(bld, self._convert(v, src, "int64"), dst)
        if src in NARROW:  # exact in float32; from there numpy's float32 semantics
            v, src = self._widen(v, src), "float32"
            if dst == "float32":
                return v
        if dst in SMALL_FLOATS:  # through float32 (from float64 rounding twice, as ml_dtypes)
            return float8.encode(bld, self._to_single(v, src, "bfloat16"), dst)
        if dst in NARROW:
            return self._narrow(self._to_single(v, src, dst), dst)
        to = reg_type(dst)
        if is_bool(dst):
            if is_float(src):
                return bld.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return bld.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if is_float(src):
            if is_float(dst):
                return bld.fpext(v, to) if to == F64 else bld.fptrunc(v, to)
            return self._float_to_int(v, dst, to)
        if is_float(dst):
            return bld.sitofp(v, to) if is_int(src) else bld.uitofp(v, to)
        if v.type.width == to.width:
            return v
        if v.type.width > to.width:
            return bld.trunc(v, to)
        return bld.sext(v, to) if is_int(src) else bld.zext(v, to)

    def _to_single(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """The float32 from which a value is rounded to half or bfloat16 to nearest even, as
        numpy (float16) and ml_dtypes (bfloat16) round: ints via float32, exact below 2**24
        (larger ones round either way); float64 for half rounded to float32 *to odd*
        (inexact results get their last bit set), so the second rounding is the correct one;
        for bfloat16 plainly to float32 (ml_dtypes rounds twice)."""
        bld = self.builder
        if is_bool(src) or is_integer(src):
            return bld.uitofp(v, F32) if is_uint(src) or is_bool(src) else bld.sitofp(v, F32)
        if src == "float64" and dst == "bfloat16":
            return bld.fptrunc(v, F32)
        if src == "float64":
            f = bld.fptrunc(v, F32)
            back = bld.fpext(f, F64)
            bits_ = bld.bitcast(f, I32)
            away = bld.fcmp_ordered(">", intrinsic(bld, "fabs", back), intrinsic(bld, "fabs", v))
            bits_ = bld.select(away, bld.sub(bits_, ir.Constant(I32, 1)), bits_)
            odd = bld.or_(bits_, ir.Constant(I32, 1))
            return bld.bitcast(bld.select(bld.fcmp_ordered("!=", back, v), odd, bits_), F32)
        return v

    def _widen(self, v: ir.Value, dtype: str) -> ir.Value:
        """A float16 or bfloat16 register as float32 (exact)."""
        bld = self.builder
        if dtype == "float16":
            return bld.fpext(v, F32)
        return bld.bitcast(bld.shl(bld.zext(v, I32), ir.Constant(I32, 16)), F32)

    def _narrow(self, v: ir.Value, dtype: str) -> ir.Value:
        """A float32 rounded to float16 or bfloat16, to nearest even; a bfloat16 NaN stays a
        quiet NaN of the same sign (ml_dtypes' conversion)."""
        bld = self.builder
        if dtype == "float16":
            return bld.fptrunc(v, F16)
        bits_ = bld.bitcast(v, I32)
        lsb = bld.and_(bld.lshr(bits_, ir.Constant(I32, 16)), ir.Constant(I32, 1))
        rounded = bld.lshr(bld.add(bits_, bld.add(lsb, ir.Constant(I32, 0x7FFF))),
                           ir.Constant(I32, 16))
        quiet = bld.or_(bld.lshr(bits_, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
        nan = bld.fcmp_unordered("uno", v, v)
        return bld.trunc(bld.select(nan, quiet, rounded), I16)

    def _reinterpret(self, e: Reinterpret) -> ir.Value:
        """Same bits, other type; bool is its stored byte (0/1) and a byte read as bool is != 0."""
        v, bld = self.expr(e.value), self.builder
        if is_bool(e.value.dtype):
            return bld.zext(v, reg_type(e.dtype))
        if is_bool(e.dtype):
            return bld.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        return bld.bitcast(v, reg_type(e.dtype))

    def _float_to_int(self, v: ir.Value, dst: str, to: ir.IntType) -> ir.Value:
        """x86 cvtt* semantics (see tir.dtype.float_to_int) instead of fptosi's poison."""
        bld = self.builder
        if dst == "uint64":
            top = ir.Constant(v.type, 2.0 ** 63)
            high = bld.fcmp_ordered(">=", v, top)
            r = self._cvtt(bld.select(high, bld.fsub(v, top), v), 64)
            flip = bld.select(high, ir.Constant(I64, -(1 << 63)), ir.Constant(I64, 0))
            return bld.xor(r, flip)
        width = 64 if dst in ("int64", "uint32") else 32
        r = self._cvtt(v, width)
        return r if width == to.width else bld.trunc(r, to)

    def _cvtt(self, v: ir.Value, width: int) -> ir.Value:
        """Truncate to a signed width-bit int; NaN and out-of-range give INT_MIN."""
        bld, ty = self.builder, ir.IntType(width)
        bound = float(1 << (width - 1))
        ok = bld.and_(bld.fcmp_ordered(">=", v, ir.Constant(v.type, -bound)),
                      bld.fcmp_ordered("<", v, ir.Constant(v.type, bound)))
        # select picks INT_MIN wherever fptosi would be poison; poison in the unpicked arm is
        # harmless for select
        return bld.select(ok, bld.fptosi(v, ty), ir.Constant(ty, -(1 << (width - 1))))

    # ------------------------------------------------------------------ math
    def _call(self, e: Call) -> ir.Value:
        if e.name.startswith(MICROKERNEL_PREFIX):  # schedule micro-kernels (llvm/microkernels)
            return emit_microkernel_call(self, e)
        if e.name == CHECKED_INDEX:
            return self._checked_index(e)
        args = [self.expr(a) for a in e.args]
        narrow = e.args[0].dtype
        if narrow in NARROW:  # float32 math, result rounded back
            wide = [self._widen(a, x.dtype) if x.dtype in NARROW else a
                    for a, x in zip(args, e.args)]
            out = emit_math(self.builder, e.name, wide, "float32", self.fail)
            return self._narrow(out, e.dtype) if e.dtype in NARROW else out
        return emit_math(self.builder, e.name, args, e.args[0].dtype, self.fail)

    def _checked_index(self, e: Call) -> ir.Value:
        """tir.ops.checked_index: i + n for -n <= i < 0, i for 0 <= i < n; any other i sets the
        function's STATUS_INDEX_OUT_OF_RANGE bit (or-ed, so the loop stays vectorisable) and is
        clamped, so no access goes out of bounds before the caller sees the status."""
        b = self.builder
        i, n = self.expr(e.args[0]), self.expr(e.args[1])
        zero = ir.Constant(I64, 0)
        bad = b.or_(b.icmp_signed("<", i, b.neg(n)), b.icmp_signed(">=", i, n))
        flag = b.select(bad, ir.Constant(I32, STATUS_INDEX_OUT_OF_RANGE), ir.Constant(I32, 0))
        b.store(b.or_(b.load(self.status, typ=I32), flag), self.status)
        j = b.select(b.icmp_signed("<", i, zero), b.add(i, n), i)
        j = b.select(b.icmp_signed("<", j, zero), zero, j)
        last = b.sub(n, ir.Constant(I64, 1))
        return b.select(b.icmp_signed(">", j, last), last, j)


def emit_math(b: ir.IRBuilder, name: str, args: list[ir.Value], dtype: str, fail) -> ir.Value:
    """One math intrinsic: LLVM instructions, inline polynomials or libm (see mathlib)."""
    x = args[0]
    if name in ("abs", "fabs") and not is_float(dtype):
        if is_uint(dtype):
            return x
        return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)
    if name == "sign" and not is_float(dtype):
        pos = b.zext(b.icmp_signed(">", x, ir.Constant(x.type, 0)), x.type) if is_int(dtype) \
            else b.zext(b.icmp_unsigned(">", x, ir.Constant(x.type, 0)), x.type)
        if is_uint(dtype):
            return pos
        return b.sub(pos, b.zext(b.icmp_signed("<", x, ir.Constant(x.type, 0)), x.type))
    if not is_float(dtype):
        raise fail(f"math function {name} needs a float argument, got {dtype}")
    c = lambda v: ir.Constant(x.type, v)  # noqa: E731
    simple = {"sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
              "round": "roundeven", "fabs": "fabs", "abs": "fabs"}
    if name in simple:
        return intrinsic(b, simple[name], x)
    if name == "rsqrt":
        return b.fdiv(c(1.0), intrinsic(b, "sqrt", x))
    if name == "isnan":
        return b.fcmp_unordered("uno", x, x)
    if name == "isinf":
        return b.fcmp_ordered("==", intrinsic(b, "fabs", x), c(math.inf))
    if name == "isfinite":
        return b.fcmp_ordered("<", intrinsic(b, "fabs", x), c(math.inf))
    if name == "sign":
        r = b.select(b.fcmp_ordered("<", x, c(0.0)), c(-1.0), x)
        return b.select(b.fcmp_ordered(">", x, c(0.0)), c(1.0), r)
    if name == "sigmoid":
        return mathlib.sigmoid(b, x, mathlib.exp_any)
    if name == "softplus":  # max(x, 0) + log1p(exp(-|x|))
        t = mathlib.log1p_any(b, mathlib.exp_any(b, b.fneg(intrinsic(b, "fabs", x))))
        m = b.select(b.fcmp_ordered(">", x, c(0.0)), x, c(0.0))
        return b.select(b.fcmp_unordered("uno", x, x), x, b.fadd(m, t))
    if x.type == F32 and name in mathlib.F32_POLY:  # vectorisable polynomials
        return mathlib.F32_POLY[name](b, x)
    return mathlib.libm_call(b, name, args)


def _fuse_div_mod_pairs(indices, strides, shape) -> list[tuple[Expr, int, int]]:
    """(index, stride, dim) per dimension, with a pair (x // c, x % c) over dims of extent c
    and strides c*s, s merged into (x, s, c * dim): its offset is x*s whatever x is, so a
    flattened index split over two dims (a conv tile's pixels crossing rows) addresses
    memory linearly and its loop vectorises."""
    out = []
    d = 0
    while d < len(indices):
        a = indices[d]
        if d + 1 < len(indices):
            m = indices[d + 1]
            if (type(a) is BinaryOp and type(m) is BinaryOp and a.kind == "floordiv"
                    and m.kind == "floormod" and a.a is m.a and type(a.b) is IntImm
                    and type(m.b) is IntImm and a.b.value == m.b.value == shape[d + 1]
                    and strides[d] == a.b.value * strides[d + 1]):
                out.append((a.a, strides[d + 1], shape[d] * shape[d + 1]))
                d += 2
                continue
        out.append((a, strides[d], shape[d]))
        d += 1
    return out


def _eager_children(e: Expr) -> tuple[Expr, ...]:
    """Operands emitted before e at the same place: all but if_then_else arms (emitted in
    their own blocks or clamped) and micro-kernel arguments (Loads there are addresses)."""
    t = type(e)
    if t is IfThenElseExpr:
        return (e.cond,)
    if t is Call and e.name.startswith("relayjit.ukr."):
        return ()
    return children(e)


def _align(dtype: str) -> int:
    return itemsize(dtype)


_DISPATCH = {
    IntImm: ExprEmitter._int, FloatImm: ExprEmitter._float, Var: ExprEmitter._var,
    BinaryOp: ExprEmitter._binary, Not: ExprEmitter._not, Select: ExprEmitter._select,
    IfThenElseExpr: ExprEmitter._if_then_else, Cast: ExprEmitter._cast, Load: ExprEmitter._load,
    Call: ExprEmitter._call, Reinterpret: ExprEmitter._reinterpret,
}
