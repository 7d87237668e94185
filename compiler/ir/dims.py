"""Dynamic shape dimensions: `Any` (TVM's tir.Any), a dimension unknown until run time.

Every `Any()` is a fresh *symbol*. Arithmetic on symbols gives symbolic expressions (also
`Any`, printed `?` as TVM prints every unknown dim), so a type relation written for static
shapes, `(h + 2 * p - k) // s + 1`, computes the output dim of a dynamic input as an
expression of the input's symbol, unchanged. That expression is the op's shape function:
compiler.op.shape_func turns the output types of a function into a runtime ShapeProgram.

Expressions are kept in a canonical form: an integer constant plus a sum of integer
multiples of *atoms*, an atom being a symbol or a non-linear node (floordiv, floormod, mul,
max, min, bcast) over canonical forms. So `s - s` is the int 0, `(2*s + 4) // 2` is `s + 2`,
and two expressions compare equal (`==`) exactly when their canonical forms do: Python `==`
on dims means *provably equal*, never "maybe". structural_equal is TVM's instead: any two
Any compare equal there (compiler.ir.types.structurally_equal_types).

Dims have no order: `<`, `bool()`, `int()` on an Any raise TypeError, so a type relation
that branches on a dynamic dim fails loudly rather than guessing. Relations compare dims
through compiler.op.type_relations (equal_dims, broadcast_dim, ...), which check static
dims at once and, for dynamic ones, record a *constraint* with `require`: when a collector
is active (collect_constraints), the constraint becomes a run-time check of the program
that binds the inputs ("input 'x': expected (?, 768) (dim 1 = 768), got (2, 512)").

Expression depth is bounded by the nesting of non-linear ops; each node stores its sort key
when built, so nothing here recurses over an expression.
"""
from __future__ import annotations

import operator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import count

_serials = count()


class IntImm(int):
    """A static shape dimension: a plain int (equal, hashing and computing like one, so shape
    code is unchanged) that also answers TVM's IntImm surface, `.value` and `.dtype`."""

    __slots__ = ()
    dtype = "int32"

    @property
    def value(self) -> int:
        return int(self)

    def same_as(self, other) -> bool:
        """TVM's identity test; an int has no identity worth keeping, so equal values are
        the same dimension."""
        return type(other) in (int, IntImm) and int(self) == int(other)


class _Symbol:
    """A leaf unknown; identity is what distinguishes two symbols."""

    __slots__ = ("name", "serial", "key")
    nonneg = True  # a dimension

    def __init__(self, name: str):
        self.name = name
        self.serial = next(_serials)
        self.key = (0, self.serial)

    def __repr__(self) -> str:
        return self.name or f"s{self.serial}"


class _Node:
    """A non-linear atom: op applied to dims (ints or Any), args ordered when commutative."""

    __slots__ = ("op", "args", "key", "_hash", "nonneg")

    def __init__(self, op: str, args: tuple):
        self.op, self.args = op, args
        self.key = (1, op, tuple(dim_key(a) for a in args))
        self._hash = hash(self.key)
        self.nonneg = all(nonneg(a) for a in args) or (op == "max" and any(map(nonneg, args)))

    def __eq__(self, other) -> bool:
        return isinstance(other, _Node) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        a, b = (_operand(x) for x in self.args)
        infix = {"floordiv": "//", "floormod": "%", "mul": "*"}.get(self.op)
        return f"({a} {infix} {b})" if infix else f"{self.op}({a}, {b})"


COMMUTATIVE = ("mul", "max", "min", "bcast")


def _as_int(value) -> int | None:
    """value as a Python int when it is an integer (IntImm, numpy int); else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def dim_key(d) -> tuple:
    """A sortable, hashable key of a dim: ints before symbolic expressions."""
    if isinstance(d, Any):
        return d._key
    return (0, int(d))


class DynamicDimError(TypeError):
    """Code that needs a static dim (an int, an order, a truth value) met a dynamic one."""


class Any:
    """An unknown dimension (relay.Any(), tvm.tir.Any()): a fresh symbol, or an expression of
    symbols made by arithmetic. `name` is a hint for messages (an ONNX dim_param)."""

    __slots__ = ("const", "terms", "_key", "_hash")
    __array_ufunc__ = None  # numpy scalars defer to Any's reflected operators

    def __init__(self, name: str = ""):
        self._set(0, ((_Symbol(name), 1),))

    def _set(self, const: int, terms: tuple) -> None:
        self.const, self.terms = const, terms
        self._key = (1, const, tuple((atom.key, c) for atom, c in terms))
        self._hash = hash(self._key)

    @staticmethod
    def _make(const: int, terms: dict):
        """The canonical dim of const + sum(coeff * atom): an int when no atom is left."""
        items = sorted(((a, c) for a, c in terms.items() if c != 0), key=lambda t: t[0].key)
        if not items:
            return IntImm(const)
        out = object.__new__(Any)
        out._set(const, tuple(items))
        return out

    @staticmethod
    def _atom(op: str, a, b):
        if op in COMMUTATIVE and dim_key(b) < dim_key(a):
            a, b = b, a
        return Any._make(0, {_Node(op, (a, b)): 1})

    # ----- structure
    @property
    def symbol(self) -> _Symbol | None:
        """The symbol when this dim is a bare symbol (not an expression), else None."""
        if self.const == 0 and len(self.terms) == 1 and self.terms[0][1] == 1 and \
                isinstance(self.terms[0][0], _Symbol):
            return self.terms[0][0]
        return None

    def atoms(self) -> list:
        """Every symbol and node this expression is built from, innermost first."""
        seen, order, stack = set(), [], [(a, False) for a, _ in self.terms]
        while stack:
            atom, expanded = stack.pop()
            if atom.key in seen:
                continue
            if expanded or isinstance(atom, _Symbol):
                seen.add(atom.key)
                order.append(atom)
                continue
            stack.append((atom, True))
            for arg in atom.args:
                if isinstance(arg, Any):
                    stack.extend((a, False) for a, _ in arg.terms)
        return order

    # ----- equality: provable equality of canonical forms
    def __eq__(self, other) -> bool:
        return isinstance(other, Any) and self._key == other._key

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._hash

    # ----- arithmetic
    def _linear(self) -> tuple[int, dict]:
        return self.const, dict(self.terms)

    def __add__(self, other):
        if isinstance(other, Any):
            const, terms = self._linear()
            for atom, c in other.terms:
                terms[atom] = terms.get(atom, 0) + c
            return Any._make(const + other.const, terms)
        value = _as_int(other)
        if value is None:
            return NotImplemented
        return Any._make(self.const + value, dict(self.terms))

    __radd__ = __add__

    def __neg__(self):
        return Any._make(-self.const, {a: -c for a, c in self.terms})

    def __sub__(self, other):
        if not isinstance(other, Any) and _as_int(other) is None:
            return NotImplemented
        return self + (-other)

    def __rsub__(self, other):
        if _as_int(other) is None:
            return NotImplemented
        return (-self) + other

    def __mul__(self, other):
        value = _as_int(other)
        if value is not None:
            return Any._make(self.const * value, {a: c * value for a, c in self.terms})
        if not isinstance(other, Any):
            return NotImplemented
        return Any._atom("mul", self, other)

    __rmul__ = __mul__

    def _divisible_by(self, value: int) -> bool:
        return self.const % value == 0 and all(c % value == 0 for _, c in self.terms)

    def __floordiv__(self, other):
        value = _as_int(other)
        if value is not None:
            if value == 0:
                raise ZeroDivisionError(f"dimension {describe(self)} divided by 0")
            if value == 1:
                return self
            if self._divisible_by(value):
                return Any._make(self.const // value, {a: c // value for a, c in self.terms})
        elif not isinstance(other, Any):
            return NotImplemented
        else:
            ratio = self._ratio(other)
            if ratio is not None:
                return _int(ratio)
        return Any._atom("floordiv", self, other)

    def _ratio(self, other: Any) -> int | None:
        """k when self == k * other exactly (4*s // s is 4), else None."""
        if len(self.terms) != len(other.terms) or not other.terms:
            return None
        c, c2 = self.terms[0][1], other.terms[0][1]
        if c % c2:
            return None
        k = c // c2
        if self.const != k * other.const or any(
                a.key != b.key or x != k * y for (a, x), (b, y) in zip(self.terms, other.terms)):
            return None
        return k

    def __rfloordiv__(self, other):
        if _as_int(other) is None:
            return NotImplemented
        return Any._atom("floordiv", _int(other), self)

    def __mod__(self, other):
        value = _as_int(other)
        if value is not None:
            if value == 0:
                raise ZeroDivisionError(f"dimension {describe(self)} modulo 0")
            if value == 1 or self._divisible_by(value):
                return _int(0)
        elif not isinstance(other, Any):
            return NotImplemented
        elif self._ratio(other) is not None:
            return _int(0)
        return Any._atom("floormod", self, other)

    def __rmod__(self, other):
        if _as_int(other) is None:
            return NotImplemented
        return Any._atom("floormod", _int(other), self)

    # ----- what a dynamic dim cannot do
    def _no(self, what: str):
        raise DynamicDimError(f"a dynamic dimension (?) has no {what}; compare dims with "
                              "compiler.op.type_relations helpers (equal_dims, broadcast_dim, "
                              "...)")

    def __bool__(self):
        self._no("truth value")

    def __index__(self):
        self._no("integer value")

    __int__ = __index__

    def __float__(self):
        self._no("float value")

    def __lt__(self, other):
        self._no("order")

    __le__ = __gt__ = __ge__ = __lt__

    def __truediv__(self, other):
        self._no("true division (use //)")

    __rtruediv__ = __truediv__

    def __str__(self) -> str:
        return "?"

    __repr__ = __str__

    # TVM's tir.Any surface
    @property
    def dtype(self) -> str:
        return "int32"

    def same_as(self, other) -> bool:
        return self is other


def _int(value: int) -> IntImm:
    return IntImm(value)


def _one() -> IntImm:
    return IntImm(1)


# a dim at least this large stands for "to the end" (strided_slice's end = INT64_MAX): no real
# dimension reaches it, so min(HUGE, d) is d
HUGE = 1 << 48


def nonneg(dim) -> bool:
    """dim is provably >= 0 (every dim is; expressions of dims may not be)."""
    if not isinstance(dim, Any):
        return int(dim) >= 0
    return dim.const >= 0 and all(c > 0 and atom.nonneg for atom, c in dim.terms)


def is_dynamic(dim) -> bool:
    return isinstance(dim, Any)


def is_static_shape(shape) -> bool:
    return not any(isinstance(d, Any) for d in shape)


def describe(dim) -> str:
    """A dim as an expression for messages: 768, batch, (s3 + 2) // 2."""
    if not isinstance(dim, Any):
        return str(int(dim))
    parts = []
    for atom, c in dim.terms:
        text = repr(atom)
        parts.append(text if c == 1 else f"-{text}" if c == -1 else f"{c}*{text}")
    if dim.const:
        parts.append(str(dim.const))
    return " + ".join(parts).replace("+ -", "- ")


def _operand(dim) -> str:
    """describe(dim), parenthesised when it is a sum."""
    text = describe(dim)
    if isinstance(dim, Any) and (dim.const or len(dim.terms) > 1 or dim.terms[0][1] != 1):
        return f"({text})"
    return text


def _pair(op: str, a, b, static):
    ia, ib = _as_int(a), _as_int(b)
    if ia is not None and ib is not None:
        return _int(static(ia, ib))
    if a == b:
        return a
    return Any._atom(op, a, b)


def dim_max(a, b):
    """max of two dims (symbolic when either is dynamic)."""
    for x, y in ((a, b), (b, a)):
        if _as_int(x) is not None and x <= 0 and isinstance(y, Any) and nonneg(y):
            return y
    return _pair("max", a, b, max)


def dim_min(a, b):
    """min of two dims (symbolic when either is dynamic)."""
    for x, y in ((a, b), (b, a)):
        if _as_int(x) is not None and isinstance(y, Any):
            if x >= HUGE:
                return y
            if x <= 0 and nonneg(y):
                return _int(x)
    return _pair("min", a, b, min)


def ceil_div(a, b):
    """ceil(a / b) for a >= 0, b > 0."""
    return -((-a) // b)


def bcast(a, b):
    """numpy broadcasting of two dims, one of which is dynamic: 1 gives the other, equal
    dims stay; else a bcast node, which the run time evaluates and checks."""
    if _as_int(a) == 1:
        return b
    if _as_int(b) == 1 or a == b:
        return a
    return Any._atom("bcast", a, b)


def symbols_of(dim) -> list:
    """The symbols a dim is built from (none for a static dim), innermost first."""
    return [a for a in dim.atoms() if isinstance(a, _Symbol)] if isinstance(dim, Any) else []


def broadcast_sides(dim) -> list[tuple[list, list]]:
    """For each bcast node in a dim, the symbols of its two sides."""
    if not isinstance(dim, Any):
        return []
    return [tuple(symbols_of(x) for x in a.args) for a in dim.atoms()
            if isinstance(a, _Node) and a.op == "bcast"]


def _bcast_value(a: int, b: int) -> int:
    if a != b and 1 not in (a, b):
        raise ValueError(f"dims {a} and {b} do not broadcast")
    return b if a == 1 else a


_VALUE_OPS = {"floordiv": operator.floordiv, "floormod": operator.mod, "mul": operator.mul,
              "max": max, "min": min, "bcast": _bcast_value}


def evaluate(dim, values: dict) -> int:
    """The value of a dim when each symbol it is built from has the value values[symbol]
    (KeyError for a symbol not given; ValueError for a bcast of sizes that do not)."""
    if not isinstance(dim, Any):
        return int(dim)
    known: dict = {}

    def linear(d) -> int:
        if not isinstance(d, Any):
            return int(d)
        return d.const + sum(c * known[a.key] for a, c in d.terms)

    for atom in dim.atoms():  # innermost first: a node's arguments are known before it
        if isinstance(atom, _Symbol):
            known[atom.key] = int(values[atom])
        else:
            known[atom.key] = _VALUE_OPS[atom.op](*(linear(a) for a in atom.args))
    return linear(dim)


# ----- constraints -----------------------------------------------------------------------

# bcast: a and b broadcast (equal, or one is 1); bcast_to: a broadcasts to b (a == b or a == 1)
CONSTRAINT_KINDS = ("eq", "ne", "ge", "gt", "bcast", "bcast_to")
_COLLECTOR: ContextVar[list | None] = ContextVar("relayjit_dim_constraints", default=None)


@contextmanager
def collect_constraints():
    """Collect the constraints `require` records while the block runs (a list of
    (kind, a, b, message))."""
    found: list = []
    token = _COLLECTOR.set(found)
    try:
        yield found
    finally:
        _COLLECTOR.reset(token)


def require(kind: str, a, b, message: str) -> None:
    """Record that `a <kind> b` must hold at run time (a or b dynamic). The caller has
    checked static dims itself; without an active collector this does nothing."""
    found = _COLLECTOR.get()
    if found is not None:
        found.append((kind, a, b, message))
