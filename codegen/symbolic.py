"""Symbolic kernels: one compiled kernel for every value of a function's dynamic dims.

The compiler lowers a primitive function with dynamic (Any) dims through the ordinary
schedules at several sample values of its symbols (sample_points). When every sample has
the same loop nest but for its integers (codegen.kernel_families' skeleton), and every
integer that varies is a polynomial in the symbols with whole coefficients (interpolated on
points unisolvent for the degree, then checked at two more), the first sample with those
integers as expressions of the symbols computes the function at any value: loop extents,
index constants and the dims and strides of its buffers are read from the symbols (a
buffer whose size varies is declared of none, so the emitter never speculates a guarded
load from it: if_then_else arms reading one branch instead), scratch
whose size varies comes from the heap at the size the symbols give, and the loops keep
their kinds (vectorised innermost loops, parallel outer ones). A schedule whose structure
follows a size (tiles chosen per extent, a remainder loop of extent n % 8) does not fit:
the compiler tries the ops' generic rules then, else keeps run-time specialisation.

Calling convention: `i32 name(ptr args)` as every kernel, with one more slot: args[n] (after
the n buffer pointers) points to the int64 values of the symbols. The signature table gives
each buffer dim as an int or as a polynomial in the symbols (runtime.library.SymbolicDim):
the runtime reads each symbol from a dim that is that symbol alone and checks every other
dim against its polynomial before the kernel runs, so the loop bounds always agree with the
buffers it is given.
"""
from __future__ import annotations

from fractions import Fraction
from itertools import product

from .kernel_families import KernelReading, generalised_body
from .llvm.emit import SYMBOL_PREFIX
from .tir.dtype import INDEX_DTYPE
from .tir.expr import BinaryOp, Expr, IntImm, Var
from .tir.stmt import PrimFunc

__all__ = ["SYMBOL_PREFIX", "MAX_SYMBOLS", "sample_points", "symbolic_kernel", "degree_for"]

MAX_SYMBOLS = 4
# Sample values: odd and large, so no sample is a multiple of a vector width or tile (a
# schedule that splits an extent then shows a varying remainder) and every stage has work
# enough to go parallel, as it would at the sizes that matter; spread wide (a quarter of the
# base apart), so a count of coarse tiles (ceil(n / 288)) varies between them instead of
# passing for a constant.
_BASE, _SPAN, _STEP = 1001, 100, 258

# A polynomial: ((coefficient, exponent of each symbol), ...)
Poly = tuple[tuple[int, tuple[int, ...]], ...]


def degree_for(num_symbols: int) -> int:
    """The highest total degree fitted: cubic for one or two symbols (strides of a (b, h, s,
    s) attention score), quadratic for more."""
    return 3 if num_symbols <= 2 else 2


def _monomials(k: int, degree: int) -> list[tuple[int, ...]]:
    return [e for e in product(range(degree + 1), repeat=k) if sum(e) <= degree]


def sample_points(num_symbols: int) -> list[tuple[int, ...]]:
    """Values of the symbols to lower the function at: a lattice unisolvent for the degree
    (one point per monomial), then two more of the same size to check the fit, last one
    about four times smaller and a multiple of 64: where the loop nest has the same
    structure there, its integers must be the fit's (a size clipped to a constant,
    min(n, 512), would show, and so would ceil(n / 8) fitted as n // 8 + 1, which no odd
    sample tells apart)."""
    k, degree = num_symbols, degree_for(num_symbols)
    base = [_BASE + _SPAN * j for j in range(k)]
    points = [tuple(b + _STEP * a for b, a in zip(base, e)) for e in _monomials(k, degree)]
    for extra in (1, 2):
        points.append(tuple(b + _STEP * (degree + extra) + 2 * j for j, b in enumerate(base)))
    points.append(tuple(256 + 64 * j for j in range(k)))
    return points


def _value(poly: Poly, point: tuple[int, ...]) -> int:
    total = 0
    for coef, exps in poly:
        term = coef
        for v, e in zip(point, exps):
            term *= v ** e
        total += term
    return total


def _inverse(rows: list[list[int]]) -> list[list[Fraction]] | None:
    """The exact inverse of a square integer matrix (Gauss-Jordan over fractions)."""
    n = len(rows)
    m = [[Fraction(v) for v in row] + [Fraction(int(i == j)) for j in range(n)]
         for i, row in enumerate(rows)]
    for c in range(n):
        pivot = next((r for r in range(c, n) if m[r][c] != 0), None)
        if pivot is None:
            return None
        m[c], m[pivot] = m[pivot], m[c]
        inv = 1 / m[c][c]
        m[c] = [v * inv for v in m[c]]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c]
                m[r] = [a - f * b for a, b in zip(m[r], m[c])]
    return [row[n:] for row in m]


def _fitted_value(fitted: Fitted, point: tuple[int, ...]) -> int:
    if isinstance(fitted[0], str):
        op, q, c, a, b = fitted
        v = _value(q, point)
        return a * (v // c if op == "floordiv" else v % c) + b
    return _value(fitted, point)


# A fitted slot: a Poly, or (op, Q, c, a, b) for a * op(Q, c) + b, op "floordiv" or
# "floormod" of a polynomial Q by a constant c (a schedule's blocks of c and its remainder).
Fitted = tuple
_DIVISORS = (2, 4, 8, 16, 32, 64)  # blocks of vectors and rows; few, so none fits by chance


def fit(columns: list[tuple[int, ...]], points: list[tuple[int, ...]]) -> list[Fitted] | None:
    """Each column (a slot's value at every point) as a polynomial with whole coefficients
    in the symbols (interpolated on the first points, checked at the rest), else as
    a * (Q // c) + b or a * (Q % c) + b for Q a monomial or another column's polynomial;
    None when one does not fit."""
    k = len(points[0])
    monos = _monomials(k, degree_for(k))
    n = len(monos)
    inverse = _inverse([[_value(((1, e),), p) for e in monos] for p in points[:n]])
    if inverse is None:
        return None
    out: list[Fitted | None] = []
    for column in columns:
        coefs = [sum(a * v for a, v in zip(row, column[:n])) for row in inverse]
        poly = tuple((int(c), e) for c, e in zip(coefs, monos) if c != 0)
        exact = all(c.denominator == 1 for c in coefs) and all(
            _value(poly, p) == v for p, v in zip(points[n:], column[n:]))
        out.append(poly if exact else None)
    candidates = list(dict.fromkeys(
        [p for p in out if p] + [((1, e),) for e in monos if sum(e) >= 1]))
    for i, column in enumerate(columns):
        if out[i] is None:
            out[i] = _quotient_fit(column, points, candidates)
            if out[i] is None:
                return None
    return out


def _quotient_fit(column: tuple[int, ...], points: list[tuple[int, ...]],
                  candidates: list[Poly]) -> Fitted | None:
    for q in candidates:
        values = [_value(q, p) for p in points]
        for c in _DIVISORS:
            for op, f in (("floordiv", [v // c for v in values]),
                          ("floormod", [v % c for v in values])):
                pairs = {(x, y) for x, y in zip(f, column)}
                xs = sorted({x for x, _ in pairs})
                if len(xs) < 2 or len(pairs) != len(xs):
                    continue  # f does not vary, or does not decide the column
                (x0, y0), (x1, y1) = sorted(pairs)[:2]
                a, rem = divmod(y1 - y0, x1 - x0)
                if rem == 0 and a != 0 and all(y == a * (x - x0) + y0 for x, y in pairs):
                    return (op, q, c, a, y0 - a * x0)
    return None


def symbolic_kernel(name: str, samples: list[PrimFunc], points: list[tuple[int, ...]],
                    broadcast: frozenset[tuple[int, int]] = frozenset()) -> PrimFunc | None:
    """The kernel computing the function whose lowerings at `points` (sample_points) are
    `samples`, for any value of its symbols, or None when the samples do not fit (see the
    module docstring; the last sample only checks). Its attrs say "symbols" (their count)
    and "symbolic_signature".

    broadcast: (parameter, dim) pairs that equal the output's extent at every sample but may
    be 1 at run time (numpy broadcasting between two dynamic dims): each is a symbol of its
    own, read from that dim, and the kernel clamps its index below it."""
    k = len(points[0])
    *readings, check = [KernelReading(f) for f in samples]
    if not all(r.supported for r in readings) or \
            any(r.skeleton() != readings[0].skeleton() for r in readings[1:]):
        return None
    first = readings[0]
    columns = list(zip(*(r.values for r in readings)))
    varying = [s for s, column in enumerate(columns) if any(v != column[0] for v in column)]
    polys = fit([columns[s] for s in varying], points[:-1])
    if polys is None:
        return None
    slot_poly = dict(zip(varying, polys))
    quotients = [f for f in polys if isinstance(f[0], str)]
    same = check.supported and check.skeleton() == first.skeleton()
    if same and any((_fitted_value(slot_poly[s], points[-1]) if s in slot_poly
                     else columns[s][0]) != v for s, v in enumerate(check.values)):
        return None  # the smaller size has the structure but other integers: a clip
    if quotients and not (same and all(_value(q, points[-1]) % c == 0
                                       for _, q, c, _, _ in quotients)):
        return None  # a quotient not checked where every block is full
    for s in slot_poly:
        kind, obj, *_ = first.where[s]
        if kind == "stride" and not any(id(b) == id(obj) for b in first.func.params):
            return None  # strided scratch whose strides vary
    signature = _signature(first, slot_poly)
    if any(not isinstance(d, int) and isinstance(d[0], str)
           for shape, _ in signature for d in shape):
        return None  # a buffer dim that is a quotient: not a signature's polynomial
    plain = {poly[0][1].index(1) for arg in signature for poly in arg[0]
             if isinstance(poly, tuple) and len(poly) == 1 and poly[0][0] == 1
             and sum(poly[0][1]) == 1}
    if plain != set(range(k)):
        return None  # a symbol the runtime could not read from any dim
    symbols = [Var(f"{SYMBOL_PREFIX}{j}", INDEX_DTYPE) for j in range(k + len(broadcast))]
    extra = {pair: k + j for j, pair in enumerate(sorted(broadcast))}
    exprs: dict[Poly, Expr] = {}
    params_, body = generalised_body(
        first, {s: _expr(p, symbols, exprs) for s, p in slot_poly.items()},
        lambda _k, _b: 0,  # no size promised: it is only known at run time
        {pair: symbols[j] for pair, j in extra.items()})
    attrs = {key: v for key, v in first.func.attrs.items() if key != "in_place"}
    attrs["symbols"] = len(symbols)
    attrs["symbolic_signature"] = tuple(
        (tuple(((1, extra[(i, d)]),) if (i, d) in extra else
               dim if isinstance(dim, int) else poly_json(dim) for d, dim in enumerate(shape)),
         dtype) for i, (shape, dtype) in enumerate(signature))
    return PrimFunc(name, params_, body, attrs)


def _signature(first: KernelReading, slot_poly: dict[int, Poly]) -> list:
    """Per parameter: (dims as ints or Polys, dtype)."""
    dims = {(id(first.where[s][1]), first.where[s][2]): p for s, p in slot_poly.items()
            if first.where[s][0] == "dim"}
    return [(tuple(dims.get((id(b), d), n) for d, n in enumerate(b.shape)), b.dtype)
            for b in first.func.params]


def poly_json(poly: Poly) -> tuple:
    """A Poly as the signature table writes a dim: ((coefficient, symbol, symbol, ...), ...),
    each term's symbols repeated by their exponents."""
    return tuple((c, *[j for j, e in enumerate(exps) for _ in range(e)]) for c, exps in poly)


def _expr(fitted: Fitted, symbols: list[Var], memo: dict) -> Expr:
    e = memo.get(fitted)
    if e is not None:
        return e
    if isinstance(fitted[0], str):
        op, q, c, a, b = fitted
        e = BinaryOp(op, _expr(q, symbols, memo), IntImm(c, INDEX_DTYPE), INDEX_DTYPE)
        if a != 1:
            e = BinaryOp("mul", e, IntImm(a, INDEX_DTYPE), INDEX_DTYPE)
        if b:
            e = BinaryOp("add", e, IntImm(b, INDEX_DTYPE), INDEX_DTYPE)
        memo[fitted] = e
        return e
    out: Expr | None = None
    for coef, exps in fitted:
        term: Expr | None = None
        for j, n in enumerate(exps):
            for _ in range(n):
                term = symbols[j] if term is None else \
                    BinaryOp("mul", term, symbols[j], INDEX_DTYPE)
        c = IntImm(coef, INDEX_DTYPE)
        if term is None:
            term = c
        elif coef != 1:
            term = BinaryOp("mul", term, c, INDEX_DTYPE)
        out = term if out is None else BinaryOp("add", out, term, INDEX_DTYPE)
    memo[fitted] = out
    return out
