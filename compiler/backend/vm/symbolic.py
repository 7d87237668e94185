"""A dynamic primitive function -> a symbolic kernel, when its schedule allows one.

The kernel's symbols are the model's symbols its inputs' dynamic dims are built from (and
its outputs', when their shapes depend on input values: dyn.strided_slice, ...), symbols on
the two sides of a broadcast sampled as one (equal); an input dim that may still be 1 there
at run time gets a symbol of its own and a clamped index, and a symbol that must be 1 for
the function to type (it broadcasts against a static dim) is held at 1. Its dims are
polynomials in the symbols (12 * batch; a floordiv that does not divide does not fit), and
each symbol must be some dim alone (times a constant), for the run time to read it. The
function is specialised (specialise.py) at
codegen.symbolic's sample values of them, lowered by the same strategies and schedules as a
static kernel, and codegen.symbolic fits the samples into one kernel for every value. The
signature that comes out is then checked against the function's shape program at small
values the samples never saw (1, 2, 3, ...): a dim that a schedule clipped or chose per size
would show there, and the function keeps run-time specialisation instead.

What fits: anything whose loop nest has the same structure at every size, which is what the
default lowering makes of elementwise / injective / broadcast functions and reductions into
their outputs (innermost loop vectorised, outer loops fused and parallel). A function whose
schedule tiles a dynamic extent (dense, batch_matmul, conv2d: the strategy layer's
implementations) is tried again without the strategies, by the ops' generic compute rules
(plain reductions, parallel over the outputs): slower than the schedules, but a kernel for
every size.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import combinations

from codegen.options import CodegenOptions
from codegen.symbolic import MAX_SYMBOLS, sample_points, symbolic_kernel
from codegen.tir.stmt import PrimFunc
from compiler.backend.kernel_table import lower_kernel
from compiler.errors import CompilerError
from compiler.ir.dims import broadcast_sides, evaluate, symbols_of
from compiler.ir.expr import Function
from compiler.op.shape_func import ShapeFuncError, shape_program
from runtime.library import check_signatures
from runtime.shape_program import ShapeProgramFormatError
from runtime.symbolic_signature import SymbolicSignature

from .specialise import specialise
from .value_types import tensor_types

# symbol values the fit is checked at (on top of the samples): small sizes, 1 included
_CHECK_VALUES = ((1, 2, 3, 4), (2, 1, 5, 3), (3, 7, 1, 2), (16, 64, 128, 9))


def lower_symbolic(func: Function, name: str, options: CodegenOptions) -> PrimFunc | None:
    """The symbolic kernel of a dynamic primitive function, or None when it has none (see the
    module docstring)."""
    inputs = [t for p in func.params for t in tensor_types(p.checked_type, "a parameter")]
    outputs = tensor_types(func.ret_type or func.body.checked_type, "the result")
    try:
        program = shape_program(func)
    except (ShapeFuncError, ShapeProgramFormatError):
        return None
    read = [d for t in inputs + (outputs if program.needs_values else []) for d in t.shape]
    every = read + [d for t in outputs for d in t.shape]
    classes = _symbol_classes(every)

    def shapes_at(values: dict) -> list[tuple[int, ...]]:
        """Every argument's shape at these values of the model's symbol classes: the
        outputs' from the shape program, or, where it reads input values, symbols of their
        own (ValueError when the program refuses the inputs)."""
        at_symbol = {sym: values[root] for sym, root in classes.items() if root in values}

        def at(t):
            return tuple(evaluate(d, at_symbol) for d in t.shape)
        ins = [at(t) for t in inputs]
        if program.needs_values:
            return ins + [at(t) for t in outputs]
        return ins + [tuple(int(x) for x in s) for s in program.evaluate(ins, {})]

    read_roots = list(dict.fromkeys(classes[s] for d in read for s in symbols_of(d)))
    ones = _broadcast_ones(read_roots, shapes_at)
    if ones is None:
        return None
    roots = [r for r in read_roots if r not in ones]
    units = _units(every, classes, roots)
    if not roots or len(roots) > MAX_SYMBOLS or units is None:
        return None

    def at_point(point) -> dict:
        return {**dict.fromkeys(ones, 1), **dict(zip(roots, point))}

    points = sample_points(len(roots))
    broadcast = _broadcast_dims(inputs, every, classes, ones)
    dtypes = [t.dtype for t in inputs + outputs]
    try:
        concrete = []
        for values in points:
            args = tuple(zip(shapes_at(at_point(values)), dtypes))
            concrete.append(specialise(func, args[:len(inputs)], args[len(inputs):]))
        kernel = None
        # every stage that can go parallel over its outer axes does, at any size (whether it
        # pays depends on the size, known only at run time); none splits its vector loop
        # (into a number of chunks that divides the extent: a size's divisors)
        options = replace(options, parallel=replace(options.parallel, min_thread_ns=1,
                                                    min_inner=1 << 62))
        for opts in (options, replace(options, strategies=False)):
            samples = [lower_kernel(f, name, opts) for f in concrete]
            kernel = symbolic_kernel(name, samples, [tuple(u * v for u, v in zip(units, p))
                                                     for p in points], broadcast)
            if kernel is not None:
                break
        if kernel is None:
            return None
        # what a library loader accepts (a kernel of more symbols than a signature may name
        # is specialised per shape instead)
        check_signatures({name: kernel.attrs["symbolic_signature"]}, [name])
        signature = SymbolicSignature(name, kernel.attrs["symbolic_signature"])
        for values in _CHECK_VALUES:
            signature.bind(name, shapes_at(at_point(values)))
    except (CompilerError, ValueError):
        return None
    return kernel


def _symbol_classes(dims: list) -> dict:
    """{model symbol: the symbol standing for its class}: symbols on the two sides of a
    broadcast are one class (sampled at one value: equal, they broadcast), the others
    classes of their own."""
    parent: dict = {}

    def root(s):
        while parent[s] is not s:
            s = parent[s]
        return s
    for d in dims:
        for s in symbols_of(d):
            parent.setdefault(s, s)
    for d in dims:
        for left, right in broadcast_sides(d):
            both = [*left, *right]
            for b in both[1:]:
                ra, rb = root(both[0]), root(b)
                if ra is not rb:
                    parent[rb] = ra
    return {s: root(s) for s in parent}


def _units(dims: list, classes: dict, roots: list) -> list[int] | None:
    """Per class of `roots`, the smallest c such that some dim is c times the class's value: the
    kernel's symbol for the class is that dim (12 * batch where no dim is batch alone);
    None when a class has no such dim (nothing to read it from)."""
    units: dict = {}
    for d in dims:
        own = {classes[s] for s in symbols_of(d)}
        if len(own) != 1:
            continue
        (root,) = own
        try:
            v1, v2 = (evaluate(d, {s: x for s, r in classes.items() if r is root})
                      for x in (1009, 1013))
        except ValueError:  # a broadcast inside the dim that these sizes break
            continue
        if v1 % 1009 == 0 and v2 == v1 // 1009 * 1013:
            units[root] = min(units.get(root, v1 // 1009), v1 // 1009)
    if any(r not in units or units[r] < 1 for r in roots):
        return None
    return [units[r] for r in roots]


def _broadcast_ones(roots: list, shapes_at) -> set | None:
    """The fewest classes to hold at 1 for the shape program to accept the inputs at
    distinct sample values of the others: a dim that broadcasts against a static one (a
    mask's (batch, 1, 1, sequence) declared all dynamic) is 1 there, and the kernel then
    takes it as 1 (a call that gives another size fails its signature check)."""
    base = sample_points(len(roots))[0]
    for size in range(len(roots) + 1):
        for ones in combinations(roots, size):
            try:
                shapes_at({r: 1 if r in ones else v for r, v in zip(roots, base)})
            except ValueError:
                continue
            return set(ones)
    return None


def _broadcast_dims(inputs: list, dims: list, classes: dict, ones: set) -> frozenset:
    """(input, dim) pairs that may be 1 at run time where the samples make them equal to what
    they broadcast against: a dim that is a symbol of its own, on one side of a broadcast,
    which no other input mentions (a mask's (batch, 1, 1, sequence) declared all dynamic:
    each of its dims may be the model's or 1)."""
    sides = {s for d in dims for left, right in broadcast_sides(d) for s in left + right}
    mentions: dict = {}
    for i, t in enumerate(inputs):
        for d in t.shape:
            for s in symbols_of(d):
                mentions.setdefault(s, set()).add(i)
    return frozenset(
        (i, k) for i, t in enumerate(inputs) for k, d in enumerate(t.shape)
        if symbols_of(d) and symbols_of(d) == [getattr(d, "symbol", None)]
        and d.symbol in sides and mentions[d.symbol] == {i} and classes[d.symbol] not in ones)
