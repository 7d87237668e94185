"""Kernel families: kernels that differ only in an extent share one compiled body.

DenseNet-121 lowers to 58 BN+ReLU kernels and 58 1x1 convs whose loop nests are the same
but for their channel count; compiled one by one they were two thirds of its LLVM time.

Finding a family. Each kernel is read into a *skeleton* and its integer *slots*, in one
deterministic walk numbering nodes, variables and buffers by identity: the skeleton is
everything the kernel_text cache key covers (node kinds, dtypes, loop kinds, call names,
floats, constant data, the sharing of sub-expressions) except the integers, which go to the
slots (integer constants, loop extents, buffer dimensions and strides). Kernels with equal
skeletons are candidates. One varying slot is the family's parameter t; every slot that
varies must be a*t + b (whole a, b) on every member, else the candidates are split by the
value of one slot (DenseNet: by spatial size) and each part fitted again. Scratch buffers
must keep their size, and a guarded (if_then_else) load may not read a buffer whose shape
varies (the emitter may speculate it with each index clamped to its dimension, which the flat
addressing below does not keep), and nothing may be divided by a varying constant (a divide
by t costs far more than one by a constant, which becomes a multiply or a shift).

Compiling it. The family body is written from the first member with each varying slot
replaced by a*t + b over a new variable t: loop extents become expressions, and buffers whose
shape varies are addressed by flat offsets with strides in t (each declared dereferenceable
for its smallest member). It compiles once, as `<name>.body(ptr ..., i64 t)`, not inlined;
each member keeps an exported `i32 member(ptr args)` of its own that calls the body with its
own constant t. So the runtime, the signature table and its checks see every member exactly
as before (a graph giving a member another shape is refused like for any kernel), and no
value from a file ever reaches t.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from llvmlite import ir

from .llvm.emit import FunctionEmitter, _kernel_function
from .llvm.textir import TextBlock, TextBuilder
from .llvm.types import I32, I64, PTR
from .tir.dtype import INDEX_DTYPE, itemsize
from .tir.expr import (
    BinaryOp, Call, Expr, FloatImm, IfThenElseExpr, IntImm, Load, Reduce, Var,
)
from .tir.functor import children, post_order, rewrite
from .tir.stmt import (
    Allocate, Buffer, ConstantBuffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt,
    Stmt, Store,
)

__all__ = ["Family", "find_families", "emit_family", "MIN_MEMBERS"]

MIN_MEMBERS = 2  # a family of one saves nothing


@dataclass(frozen=True, eq=False)
class Family:
    """Kernels sharing one compiled body: `body` takes the buffers of `members[0]` (flattened
    where their shape varies) and `extent`; member k runs it with extent = extents[k]."""

    body: PrimFunc
    extent: Var
    members: tuple[PrimFunc, ...]
    extents: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.body.name


_DIVISIONS = ("div", "mod", "floordiv", "floormod")


# ---- reading a kernel: skeleton and slots ----------------------------------------------------

class KernelReading:
    """One kernel's skeleton (tokens) and integer slots (values; where: what each one is)."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.tokens: list[str] = []
        self.values: list[int] = []
        self.where: list[tuple] = []  # ("imm", IntImm) | ("extent", For) | ("dim"|"stride", Buffer, d)
        self.supported = True
        # each loop's thread cap, in walk order: not in the skeleton (members of one size
        # class differ in it; see generalised_body)
        self.caps: list[int] = []
        self.cap_index: dict[int, int] = {}
        self.guarded: list[IfThenElseExpr] = []  # loads speculated with clamped indices
        self.divisors: set[int] = set()  # slots of integer constants something is divided by
        self._imm_slots: dict[int, int] = {}
        self._nodes: dict[int, int] = {}
        self._buffers: dict[int, int] = {}
        self._vars: dict[int, int] = {}
        self._keep: list = []  # keeps numbered objects alive, so their ids stay theirs
        self._read()

    def _slot(self, value: int, where: tuple) -> None:
        self.tokens.append("?")
        self.values.append(value)
        self.where.append(where)

    def _buffer(self, b: Buffer) -> str:
        k = self._buffers.get(id(b))
        if k is None:
            k = self._buffers[id(b)] = len(self._buffers)
            self._keep.append(b)
            data = hashlib.sha256(b.data).hexdigest() if isinstance(b, ConstantBuffer) else ""
            self.tokens.append(f"buf {type(b).__name__} {b.dtype} {b.alignment} {len(b.shape)} "
                               f"{b.strides is None} {data}")
            for d, n in enumerate(b.shape):
                self._slot(n, ("dim", b, d))
            for d, s in enumerate(b.strides or ()):
                self._slot(s, ("stride", b, d))
        return f"b{k}"

    def _var(self, v: Var) -> str:
        k = self._vars.get(id(v))
        if k is None:
            k = self._vars[id(v)] = len(self._vars)
            self._keep.append(v)
            self.tokens.append(f"var {v.dtype} {v.dom}")
        return f"v{k}"

    def _expr(self, e: Expr) -> str:
        """Number of e, reading its unseen sub-expressions first (post-order, no recursion)."""
        nodes = self._nodes
        if id(e) not in nodes:
            stack: list[tuple[Expr, bool]] = [(e, False)]
            while stack:
                n, expanded = stack.pop()
                if id(n) in nodes:
                    continue
                kids = children(n)
                if not expanded and kids:
                    stack.append((n, True))
                    stack.extend((c, False) for c in reversed(kids) if id(c) not in nodes)
                    continue
                self._node(n, [f"#{nodes[id(c)]}" for c in kids])
                nodes[id(n)] = len(nodes)
                self._keep.append(n)
        return f"#{nodes[id(e)]}"

    def _node(self, n: Expr, kids: list[str]) -> None:
        t = type(n)
        if t is IntImm:
            if type(n.value) is int and n.dtype == INDEX_DTYPE:
                self.tokens.append(f"int {n.dtype}")
                self._imm_slots[id(n)] = len(self.values)
                self._slot(n.value, ("imm", n))
            else:  # bools and narrower integers stay in the skeleton
                self.tokens.append(f"int {n.dtype} {n.value!r}")
            return
        if t is FloatImm:
            head = f"float {n.dtype} {n.value!r}"
        elif t is Var:
            head = f"ref {self._var(n)}"
        elif t is BinaryOp:
            head = f"{n.kind} {n.dtype}"
            if n.kind in _DIVISIONS and id(n.b) in self._imm_slots:
                self.divisors.add(self._imm_slots[id(n.b)])
        elif t is Load:
            head = f"load {n.dtype} {self._buffer(n.buffer)}"
        elif t is Call:
            head = f"call {n.name} {n.dtype}"
        else:
            if t is IfThenElseExpr:
                self.guarded.append(n)
            elif t is Reduce:
                self.supported = False
            head = f"{t.__name__} {n.dtype}"
        self.tokens.append(f"{head} {' '.join(kids)}")

    def _read(self) -> None:
        f = self.func
        self.tokens.append(f"params {' '.join(self._buffer(b) for b in f.params)}")
        self.tokens.append(f"attrs {sorted((k, repr(v)) for k, v in f.attrs.items())}")
        work: list[Stmt | str] = [f.body]
        while work:
            s = work.pop()
            if isinstance(s, str):
                self.tokens.append(s)
                continue
            t = type(s)
            if t is SeqStmt:
                self.tokens.append(f"seq {len(s.stmts)}")
                work.extend(reversed(s.stmts))
            elif t is For:
                self.tokens.append(f"for {self._var(s.var)} {s.kind}")
                self.cap_index[id(s)] = len(self.caps)
                self.caps.append(s.threads)
                if isinstance(s.extent, int):
                    self._slot(s.extent, ("extent", s))
                else:
                    self.supported = False
                work += ["}", s.body]
            elif t is Store:
                idx = " ".join(self._expr(i) for i in s.indices)
                self.tokens.append(f"store {self._buffer(s.buffer)} [{idx}] {self._expr(s.value)}")
            elif t is Allocate:
                if s.size is not None:  # a symbolic kernel's dynamic scratch
                    self.supported = False
                    return
                self.tokens.append(f"allocate {self._buffer(s.buffer)}")
                work += ["}", s.body]
            elif t is IfThenElse:
                self.tokens.append(f"if {self._expr(s.cond)} {s.else_body is None}")
                work += ["}", *(() if s.else_body is None else (s.else_body, "} else {")),
                         s.then_body]
            elif t is LetStmt:
                self.tokens.append(f"let {self._var(s.var)} = {self._expr(s.value)}")
                work.append(s.body)
            elif t is Evaluate:
                self.tokens.append(f"eval {self._expr(s.value)}")
            else:
                self.supported = False
                return

    def skeleton(self) -> str:
        return "\n".join(self.tokens)


# ---- fitting the varying slots to a*t + b ------------------------------------------------------

Fit = tuple[int, dict[int, tuple[int, int]]]  # (slot of t, {varying slot: (a, b)})


def _fit(readings: list[KernelReading]) -> Fit | None:
    """The parameter slot and each varying slot's (a, b), or None when they do not fit (or
    a scratch buffer's size varies)."""
    columns: dict[tuple[int, ...], list[int]] = {}
    for s, column in enumerate(zip(*(r.values for r in readings))):
        if any(v != column[0] for v in column):
            columns.setdefault(column, []).append(s)
    if not columns:
        return None
    params = {id(b) for b in readings[0].func.params}
    where = readings[0].where
    for slots in columns.values():
        for s in slots:
            if where[s][0] in ("dim", "stride") and id(where[s][1]) not in params:
                return None  # a scratch (or constant) buffer's size varies
    for ts in columns:
        if len(set(ts)) != len(ts):
            continue
        fits: dict[int, tuple[int, int]] = {}
        for column, slots in columns.items():
            a, rem = divmod(column[1] - column[0], ts[1] - ts[0])
            b = column[0] - a * ts[0]
            if rem or any(v != a * t + b for v, t in zip(column, ts)):
                break
            fits.update((s, (a, b)) for s in slots)
        else:
            return columns[ts][0], fits
    return None


def _families_of(readings: list[KernelReading]) -> list[tuple[list[KernelReading], Fit]]:
    """Fitting families among kernels of one skeleton: all of them, else the parts of the best
    split by one varying slot's value."""
    fit = _fit(readings)
    if fit is not None:
        return [(readings, fit)]
    columns = {column for column in zip(*(r.values for r in readings))
               if any(v != column[0] for v in column)}
    best: list[tuple[list[KernelReading], Fit]] = []
    tried: set[tuple[int, ...]] = set()
    for column in columns:
        labels = tuple(sorted(set(column)).index(v) for v in column)
        if labels in tried or len(set(labels)) == len(labels):
            continue
        tried.add(labels)
        parts: dict[int, list[KernelReading]] = {}
        for label, r in zip(labels, readings):
            parts.setdefault(label, []).append(r)
        found = [(part, f) for part in parts.values() if len(part) >= MIN_MEMBERS
                 for f in (_fit(part),) if f is not None]
        if sum(len(p) for p, _ in found) > sum(len(p) for p, _ in best):
            best = found
    return best


def _outline(f: PrimFunc) -> tuple:
    """What a kernel's skeleton begins with (its parameters but their sizes, its attrs): kernels
    of different outlines are never read against each other."""
    return (tuple((type(b), b.dtype, len(b.shape), b.strides is None) for b in f.params),
            repr(sorted(f.attrs.items())))


def find_families(funcs: list[PrimFunc]) -> list[PrimFunc | Family]:
    """The kernels as compile units: each family once (at its first member's place), the
    other kernels as they are."""
    outlines: dict[tuple, list[PrimFunc]] = {}
    for f in funcs:
        outlines.setdefault(_outline(f), []).append(f)
    groups: dict[str, list[KernelReading]] = {}
    for candidates in outlines.values():
        if len(candidates) < MIN_MEMBERS:
            continue
        for f in candidates:
            r = KernelReading(f)
            if r.supported:
                groups.setdefault(r.skeleton(), []).append(r)
    family_of: dict[int, Family] = {}
    taken = {f.name for f in funcs}
    for readings in groups.values():
        if len(readings) < MIN_MEMBERS:
            continue
        for members, (t_slot, fits) in _families_of(readings):
            if _clamps_varying_buffer(members[0], fits) or members[0].divisors & fits.keys():
                continue  # (a division by t would cost a hardware divide where a shift was)
            family = _generalise(members, t_slot, fits, taken)
            for r in members:
                family_of[id(r.func)] = family
    units: list[PrimFunc | Family] = []
    placed: set[int] = set()
    for f in funcs:
        family = family_of.get(id(f))
        if family is None:
            units.append(f)
        elif id(family) not in placed:
            placed.add(id(family))
            units.append(family)
    return units


def _clamps_varying_buffer(first: KernelReading, fits: dict[int, tuple[int, int]]) -> bool:
    """Whether a guarded (if_then_else) arm loads a buffer whose shape varies: the emitter
    may speculate such loads with each index clamped to its dimension, which the family
    body's flat addressing does not keep."""
    varying = {id(first.where[s][1]) for s in fits if first.where[s][0] in ("dim", "stride")}
    return any(type(n) is Load and id(n.buffer) in varying
               for e in first.guarded for arm in (e.a, e.b) for n in post_order(arm))


# ---- the family body ---------------------------------------------------------------------------

def _generalise(members: list[KernelReading], t_slot: int, fits: dict[int, tuple[int, int]],
                taken: set[str]) -> Family:
    """The family body: the first member with each varying slot as a*t + b (see the module
    docstring)."""
    first = members[0]
    t = Var("extent", INDEX_DTYPE)
    affine: dict[tuple[int, int], Expr] = {}

    def value(a: int, b: int) -> Expr:
        e = affine.get((a, b))
        if e is None:
            e = t if a == 1 else BinaryOp("mul", t, IntImm(a, INDEX_DTYPE), INDEX_DTYPE)
            if b:
                e = BinaryOp("add", e, IntImm(b, INDEX_DTYPE), INDEX_DTYPE)
            affine[(a, b)] = e
        return e

    def smallest(k: int, b: Buffer) -> int:
        return min(r.func.params[k].nbytes for r in members) // itemsize(b.dtype)

    # each loop's thread cap: the members' largest (0, no cap, above all)
    caps = [0 if 0 in column else max(column) for column in zip(*(m.caps for m in members))]
    params, body = generalised_body(first, {s: value(a, b) for s, (a, b) in fits.items()},
                                    smallest, caps=caps)
    name = f"{first.func.name}_family"
    while name in taken:
        name += "_"
    taken.add(name)
    return Family(PrimFunc(name, params, body, dict(first.func.attrs)), t,
                  tuple(r.func for r in members), tuple(r.values[t_slot] for r in members))


def generalised_body(first: KernelReading, slot_values: dict[int, Expr], flat_size,
                     broadcast: dict[tuple[int, int], Expr] | None = None,
                     caps: list[int] | None = None) -> tuple[list[Buffer], Stmt]:
    """The parameters and body of `first` with each slot in slot_values replaced by its
    expression: loop extents and integer constants directly, buffers whose dims or strides
    vary flattened to one dim of flat_size(parameter index, buffer) elements and addressed
    by offsets computed from their varying dims. Scratch whose dims vary (codegen.symbolic's
    only; a family's never do) is flattened too, its Allocate sized by the expression.
    broadcast {(parameter index, dim): n} (codegen.symbolic's): that dim of the parameter
    is n at run time, which may also be 1 (broadcast): its index is clamped below n. caps:
    each loop's thread cap in first's walk order (For.threads; None: no cap, the work known
    only at run time)."""
    imms: dict[int, Expr] = {}
    extents: dict[int, Expr] = {}
    dims: dict[int, dict[int, Expr]] = {}     # id(buffer) -> {d: dim}
    strides: dict[int, dict[int, Expr]] = {}
    for s, e in slot_values.items():
        kind, obj, *d = first.where[s]
        if kind == "imm":
            imms[id(obj)] = e
        elif kind == "extent":
            extents[id(obj)] = e
        else:
            (dims if kind == "dim" else strides).setdefault(id(obj), {})[d[0]] = e
    flat: dict[int, tuple[Buffer, _Addressing]] = {}
    sizes: dict[int, Expr] = {}  # id(scratch buffer) -> its element count

    def flatten(b: Buffer, size: int, clamps: dict[int, Expr]) -> Buffer:
        shape = [clamps.get(d, dims.get(id(b), {}).get(d, n)) for d, n in enumerate(b.shape)]
        if b.strides is None:
            buf_strides: list[Expr | int] = []
            acc: Expr | int = 1
            for n in reversed(shape):
                buf_strides.append(acc)
                acc = _mul(acc, n)
            buf_strides.reverse()
            sizes[id(b)] = _index(acc)
        else:
            buf_strides = [strides.get(id(b), {}).get(d, s) for d, s in enumerate(b.strides)]
        new = Buffer(b.name, (size,), b.dtype, alignment=b.alignment)
        flat[id(b)] = (new, _Addressing(shape, buf_strides, b.strides is None, clamps))
        return new

    params = []
    for k, b in enumerate(first.func.params):
        if id(b) not in dims and id(b) not in strides:
            params.append(b)
        else:
            clamps = {d: n for (i, d), n in (broadcast or {}).items() if i == k}
            params.append(flatten(b, flat_size(k, b), clamps))
    for s in slot_values:
        kind, b, *_ = first.where[s]
        if kind in ("dim", "stride") and id(b) not in flat:
            flatten(b, 0, {})

    memo: dict = {}

    def expr(e: Expr) -> Expr:
        return rewrite(e, _rewriter, memo)

    def _rewriter(n: Expr) -> Expr | None:
        if type(n) is IntImm:
            return imms.get(id(n))
        if type(n) is Load and id(n.buffer) in flat:
            new, addressing = flat[id(n.buffer)]
            return Load(new, (addressing.offset(n.indices),), n.dtype)
        return None

    def stmt(s: Stmt) -> Stmt:  # recursion depth: the loop nest's
        t_ = type(s)
        if t_ is SeqStmt:
            return SeqStmt(tuple(stmt(c) for c in s.stmts))
        if t_ is For:
            cap = 0 if caps is None else caps[first.cap_index[id(s)]]
            return For(s.var, extents.get(id(s), s.extent), stmt(s.body), s.kind, cap)
        if t_ is Store:
            if id(s.buffer) in flat:
                new, addressing = flat[id(s.buffer)]
                index = addressing.offset(tuple(expr(i) for i in s.indices))
                return Store(new, (index,), expr(s.value))
            return Store(s.buffer, tuple(expr(i) for i in s.indices), expr(s.value))
        if t_ is Allocate:
            if id(s.buffer) in flat:
                return Allocate(flat[id(s.buffer)][0], stmt(s.body), sizes[id(s.buffer)])
            return Allocate(s.buffer, stmt(s.body))
        if t_ is IfThenElse:
            return IfThenElse(expr(s.cond), stmt(s.then_body),
                              None if s.else_body is None else stmt(s.else_body))
        if t_ is LetStmt:
            return LetStmt(s.var, expr(s.value), stmt(s.body))
        if t_ is Evaluate:
            return Evaluate(expr(s.value))
        raise TypeError(f"kernel family: unexpected statement {t_.__name__}")

    return params, stmt(first.func.body)


def _mul(a: Expr | int, b: Expr | int) -> Expr | int:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return BinaryOp("mul", _index(a), _index(b), INDEX_DTYPE)


def _index(v: Expr | int) -> Expr:
    return IntImm(v, INDEX_DTYPE) if isinstance(v, int) else v


@dataclass(frozen=True, eq=False)
class _Addressing:
    """How the family body addresses a buffer whose shape varies: dims and strides in t."""

    shape: list[Expr | int]
    strides: list[Expr | int]
    contiguous: bool
    clamps: dict[int, Expr] = field(default_factory=dict)  # dim -> n: index min(i, n - 1)

    def offset(self, indices: tuple[Expr, ...]) -> Expr:
        """sum(index * stride); a pair (x // c, x % c) over dims d, d+1 of static extent c with
        stride[d] = c * stride[d+1] merged into x (as the emitter merges it for static strides:
        the offset stays linear in x, so the loop over x vectorises)."""
        shape, strides = self.shape, self.strides
        terms: list[Expr] = []
        d = 0
        while d < len(indices):
            a = indices[d]
            if d in self.clamps:  # a dim that may broadcast: 1 reads index 0 throughout
                last = BinaryOp("sub", self.clamps[d], IntImm(1, INDEX_DTYPE), INDEX_DTYPE)
                a = BinaryOp("min", a, last, INDEX_DTYPE)
            elif d + 1 < len(indices) and d + 1 not in self.clamps:
                m = indices[d + 1]
                c = shape[d + 1]
                if (type(a) is BinaryOp and type(m) is BinaryOp and a.kind == "floordiv"
                        and m.kind == "floormod" and a.a is m.a and type(a.b) is IntImm
                        and type(m.b) is IntImm and a.b.value == m.b.value == c
                        and (self.contiguous or (isinstance(strides[d], int)
                                                 and strides[d] == _mul(c, strides[d + 1])))):
                    a, d = a.a, d + 1
            if not (type(a) is IntImm and a.value == 0):
                terms.append(_index(_mul(a, strides[d])))
            d += 1
        if not terms:
            return IntImm(0, INDEX_DTYPE)
        out = terms[0]
        for term in terms[1:]:
            out = BinaryOp("add", out, term, INDEX_DTYPE)
        return out


# ---- emission ----------------------------------------------------------------------------------

def emit_family(module: ir.Module, family: Family) -> None:
    """The family body (not inlined: compiled once) and one exported wrapper per member."""
    _FamilyEmitter(module, family).emit()


class _FamilyEmitter(FunctionEmitter):
    """Emits `<body>.body(ptr ..., i64 extent)` and the members' `i32 name(ptr args)`."""

    def __init__(self, module: ir.Module, family: Family) -> None:
        super().__init__(module, family.body)
        self.family = family

    def emit(self) -> None:
        f, family = self.func, self.family
        n = len(f.params)
        body_fn = self.body_function([I64], "noinline")
        body_fn.args[n].name = "extent"
        self.vars[family.extent] = body_fn.args[n]
        self._emit_function(body_fn, f.body)
        for member, extent in zip(family.members, family.extents):
            fn = _kernel_function(self.module, ir.FunctionType(I32, [PTR]), member.name, member)
            fn.attributes.add("nounwind")
            b = TextBuilder(TextBlock(fn, "entry"))
            args = fn.args[0]
            args.name = "args"
            ptrs = []
            for i in range(n):
                slot = b.gep(args, [ir.Constant(I64, i)], inbounds=True, source_etype=PTR)
                ptrs.append(b.load(slot, typ=PTR, align=8))
            b.ret(b.call(body_fn, [*ptrs, ir.Constant(I64, extent)]))
