"""The signatures of symbolic kernels: dims that are polynomials in the kernel's symbols.

A symbolic kernel (codegen.symbolic) takes its buffers and, in args[n], the int64 values of
its symbols; its loop bounds are computed from them. Its signature gives each dim as an int
or a polynomial, ((coefficient, symbol, symbol, ...), ...) with each term's symbols repeated
by their exponents. Before such a kernel runs, `bind` reads each symbol from the first dim
that is that symbol alone and checks every dim against its polynomial, so the kernel never
computes bounds that disagree with the buffers it is given (the table comes from a file).
"""
from __future__ import annotations

from collections.abc import Sequence

MAX_SYMBOLS = 8
MAX_TERMS = 16
MAX_DEGREE = 4

Poly = tuple[tuple[int, ...], ...]


def check_dim(d: object) -> int | Poly | None:
    """A signature dim as read from a table: an int >= 0 or a well-formed polynomial (as
    tuples), else None."""
    if isinstance(d, int) and not isinstance(d, bool):
        return d if d >= 0 else None
    if not isinstance(d, (list, tuple)) or not 0 < len(d) <= MAX_TERMS:
        return None
    terms = []
    for term in d:
        if not isinstance(term, (list, tuple)) or not 1 <= len(term) <= MAX_DEGREE + 1 or any(
                not isinstance(v, int) or isinstance(v, bool) for v in term) or any(
                not 0 <= j < MAX_SYMBOLS for j in term[1:]):
            return None
        terms.append(tuple(term))
    return tuple(terms)


def is_symbolic(signature: Sequence) -> bool:
    """Whether a checked signature has a polynomial dim."""
    return any(not isinstance(d, int) for shape, _ in signature for d in shape)


def _evaluate(poly: Poly, values: list[int]) -> int:
    total = 0
    for coef, *symbols in poly:
        for j in symbols:
            coef *= values[j]
        total += coef
    return total


class SymbolicSignature:
    """A symbolic kernel's checked signature: where each symbol is read, and bind()."""

    __slots__ = ("signature", "num_symbols", "sources")

    def __init__(self, name: str, signature: Sequence) -> None:
        self.signature = tuple(signature)
        used = {j for shape, _ in signature for d in shape if not isinstance(d, int)
                for term in d for j in term[1:]}
        self.num_symbols = max(used) + 1 if used else 0
        self.sources: list[tuple[int, int] | None] = [None] * self.num_symbols
        for i, (shape, _) in enumerate(signature):
            for k, d in enumerate(shape):
                if not isinstance(d, int) and len(d) == 1 and d[0][0] == 1 and len(d[0]) == 2 \
                        and self.sources[d[0][1]] is None:
                    self.sources[d[0][1]] = (i, k)
        missing = [j for j, s in enumerate(self.sources) if s is None]
        if missing:
            raise ValueError(f"signature of symbolic kernel {name!r}: symbol {missing[0]} is "
                             f"not any argument's dim, so it cannot be read")

    def bind(self, name: str, shapes: Sequence[tuple[int, ...]]) -> list[int]:
        """The symbols' values for buffers of these shapes (ranks and static dims checked
        too); ValueError naming the argument that does not fit."""
        if len(shapes) != len(self.signature):
            raise ValueError(f"kernel {name!r} takes {len(self.signature)} buffers, given "
                             f"{len(shapes)}")
        values = []
        for i, k in self.sources:
            if len(shapes[i]) <= k:
                raise ValueError(f"argument {i} of kernel {name!r} has rank {len(shapes[i])}")
            values.append(int(shapes[i][k]))
        for i, (shape, (dims, _)) in enumerate(zip(shapes, self.signature)):
            want = tuple(d if isinstance(d, int) else _evaluate(d, values) for d in dims)
            if tuple(shape) != want:
                raise ValueError(f"argument {i} of kernel {name!r} must be {want} (its "
                                 f"symbols {values}), the program gives {tuple(shape)}")
        return values
