"""ShapeProgram: the output shapes of a kernel computed from its input shapes, at run time.

A Relay function whose types hold `Any` dims (relay.Any(), `?`) has shapes known only when
it runs. compiler.op.shape_func.shape_program(func) derives, for a type-checked function
(typically a fused primitive function), a ShapeProgram; the VM evaluates it before each call
to allocate the outputs, and at input binding to check what the user gave. It lives here, in
the runtime, because the VM runs it without the compiler; it is plain data (to_json /
from_json) so it travels inside a saved executable, and a loaded program is untrusted: every
register, input index, kind and shape-function name is validated before anything runs.

The contract (what the VM codes against):

    prog = shape_program(func)            # compiler side; func's params are prog.inputs
    prog.inputs                           # [(name, shape)], shape entries int or None (?)
    prog.needs_values                     # input indices whose *values* it reads (dyn ops)
    prog.evaluate(input_shapes, input_values=None) -> [tuple of ints per output]
    prog.check_inputs(input_shapes, input_values=None)   # only the checks; ShapeError
    prog.to_json() / ShapeProgram.from_json(text)        # also to_dict / from_dict

Inputs are the function's parameters in order, tuple-typed parameters flattened field by
field; outputs are the function's result, flattened the same way. `input_shapes` is a
sequence of int tuples, one per input; `input_values` maps an input index (those in
needs_values) to its numpy value, as a dict or a sequence with None where not needed.

Evaluation is a straight-line register program; each instruction defines one register:

    ["dim", i, j]                      input i's dim j
    ["const", v]                       an integer
    [op, a, b, where?]                 op in add sub mul floordiv floormod max min bcast
                                       (bcast: numpy broadcasting of two dims, ShapeError
                                       naming `where` when they clash)
    ["call", name, attrs, args, out_ranks]
                                       a registered shape function (runtime.shape_functions,
                                       TVM's shape-func signature fn(attrs, inputs, out_ndims)
                                       -> one int64 shape vector per output); each arg is
                                       ["shape", [regs]] (a shape), ["value", i] (input i's
                                       data) or ["const", nested list, dtype]
    ["item", r, k, j]                  dim j of output k of the call in register r

`checks` are [kind, a, b, message] with kind eq, ne, ge, gt, bcast (a and b broadcast) or
bcast_to (a broadcasts to b: equal, or a is 1):
the constraints the type relations met (a matmul's K of a dynamic input against a weight's
768). A failing check is a ShapeError naming the input, the shape expected and the shape
given: "input 'x': expected (?, 768) (dim 1 = 768), got (2, 512)". `outputs` lists, per
output, the registers of its dims.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import numpy as np

from . import shape_functions_builtin  # noqa: F401  (registers the built-in functions)
from .shape_functions import ShapeFuncAttrs, get_shape_function, has_shape_function

FORMAT = "relayjit.shape_program"
VERSION = 1
MAX_INSTRUCTIONS = 1 << 16
MAX_RANK = 64
MAX_DIM = 1 << 48  # a computed dim beyond this is an error, not an allocation

_BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
    "max": max, "min": min,
}
_CHECKS = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
           "ge": lambda a, b: a >= b, "gt": lambda a, b: a > b,
           "bcast": lambda a, b: a == b or a == 1 or b == 1,
           "bcast_to": lambda a, b: a == b or a == 1}
_CHECK_WORDS = {"eq": "==", "ne": "!=", "ge": ">=", "gt": ">", "bcast": "broadcasts with",
                "bcast_to": "broadcasts to"}
_CHECK_PHRASES = {"eq": "equal to", "ne": "different from", "ge": "at least",
                  "gt": "greater than", "bcast": "broadcastable with",
                  "bcast_to": "broadcastable to"}


class ShapeError(ValueError):
    """A run-time shape breaks the program's constraints (names the input, expected, got)."""


class ShapeProgramFormatError(ValueError):
    """A shape program that is malformed (a corrupt or hand-edited file)."""


def format_shape(shape: Sequence) -> str:
    """(?, 768) for [None, 768]; (3,) for one dim as Python writes it, () for a scalar."""
    dims = ["?" if d is None else str(int(d)) for d in shape]
    return f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"


class ShapeProgram:
    """A validated shape program; see the module docstring."""

    __slots__ = ("inputs", "needs_values", "instructions", "checks", "outputs", "_kinds")

    def __init__(self, inputs, needs_values, instructions, checks, outputs):
        self.inputs = [(str(n), tuple(None if d is None else int(d) for d in s))
                       for n, s in inputs]
        self.needs_values = tuple(int(i) for i in needs_values)
        self.instructions = [tuple(i) for i in instructions]
        self.checks = [tuple(c) for c in checks]
        self.outputs = [tuple(int(r) for r in o) for o in outputs]
        self._kinds = _validate(self)

    # ----- evaluation
    def evaluate(self, input_shapes: Sequence, input_values=None) -> list:
        """The output shapes (int tuples) for these input shapes; ShapeError when they break
        a constraint."""
        regs, shapes = self._run(input_shapes, input_values)
        return [tuple(self._dim(regs[r], k, j, shapes) for j, r in enumerate(out))
                for k, out in enumerate(self.outputs)]

    def check_inputs(self, input_shapes: Sequence, input_values=None) -> None:
        """Only the checks: a ShapeError when the inputs break the program's constraints."""
        self._run(input_shapes, input_values)

    def _dim(self, value: int, k: int, j: int, shapes: list) -> int:
        if not 0 <= value < MAX_DIM:
            raise ShapeError(f"output {k} dim {j} computes to {value}, outside [0, {MAX_DIM}) "
                             f"(inputs {self._given_text(shapes)})")
        return value

    def _run(self, input_shapes: Sequence, input_values) -> tuple[list, list]:
        shapes = self._check_given(input_shapes)
        values = self._values(input_values)
        regs: list = []
        for ins in self.instructions:
            regs.append(self._execute(ins, regs, shapes, values))
        for kind, a, b, message in self.checks:
            if not _CHECKS[kind](regs[a], regs[b]):
                raise ShapeError(self._check_message(kind, a, b, message, regs, shapes))
        return regs, shapes

    def _execute(self, ins: tuple, regs: list, shapes: list, values: dict):
        op = ins[0]
        if op == "dim":
            return shapes[ins[1]][ins[2]]
        if op == "const":
            return ins[1]
        if op == "item":
            return regs[ins[1]][ins[2]][ins[3]]
        if op == "call":
            return self._call(ins, regs, values, shapes)
        a, b = regs[ins[1]], regs[ins[2]]
        if op == "bcast":
            if a == b or b == 1:
                return a
            if a == 1:
                return b
            where = ins[3] if len(ins) > 3 else "broadcast"
            raise ShapeError(f"{where}: dims {a} and {b} do not broadcast (inputs "
                             f"{self._given_text(shapes)}, expected {self._expected_text()})")
        if op in ("floordiv", "floormod") and b == 0:
            raise ShapeError(f"a shape expression divides by a zero dim (inputs "
                             f"{self._given_text(shapes)})")
        return _BINARY[op](a, b)

    def _call(self, ins: tuple, regs: list, values: dict, shapes: list) -> list:
        _, name, attrs, args, out_ranks = ins
        inputs = []
        for arg in args:
            if arg[0] == "shape":
                inputs.append(np.array([regs[r] for r in arg[1]], dtype=np.int64))
            elif arg[0] == "value":
                inputs.append(values[arg[1]])
            else:
                inputs.append(np.array(arg[1], dtype=arg[2]))
        try:
            result = get_shape_function(name)(ShapeFuncAttrs(attrs), inputs, list(out_ranks))
        except ShapeError:
            raise
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError) as err:
            raise ShapeError(f"{name}: {err} (inputs {self._given_text(shapes)})") from err
        if not isinstance(result, (list, tuple)) or len(result) != len(out_ranks):
            raise ShapeError(f"shape function {name!r} returned {type(result).__name__}, "
                             f"expected {len(out_ranks)} shape(s)")
        outs = []
        for k, (shape, rank) in enumerate(zip(result, out_ranks)):
            dims = [int(d) for d in np.asarray(shape).reshape(-1)]
            if len(dims) != rank or any(not 0 <= d < MAX_DIM for d in dims):
                raise ShapeError(f"{name}: output {k} shape {dims} is not {rank} non-negative "
                                 f"dims (inputs {self._given_text(shapes)})")
            outs.append(dims)
        return outs

    # ----- inputs and messages
    def _check_given(self, input_shapes: Sequence) -> list:
        if len(input_shapes) != len(self.inputs):
            raise ShapeError(f"expected {len(self.inputs)} input shape(s) "
                             f"{[n for n, _ in self.inputs]}, got {len(input_shapes)}")
        shapes = []
        for (name, want), given in zip(self.inputs, input_shapes):
            got = tuple(int(d) for d in given)
            if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
                raise ShapeError(f"input {name!r}: expected {format_shape(want)}, got "
                                 f"{format_shape(got)}")
            shapes.append(got)
        return shapes

    def _values(self, input_values) -> dict:
        if not self.needs_values:
            return {}
        if input_values is None:
            input_values = {}
        get = input_values.get if isinstance(input_values, Mapping) else (
            lambda i: input_values[i] if i < len(input_values) else None)
        values = {}
        for i in self.needs_values:
            value = get(i)
            if value is None:
                raise ShapeError(f"input {self.inputs[i][0]!r}: its value is needed to compute "
                                 "the output shapes, but none was given")
            values[i] = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        return values

    def _given_text(self, shapes: list) -> str:
        return ", ".join(f"{n!r} {format_shape(s)}" for (n, _), s in zip(self.inputs, shapes))

    def _expected_text(self) -> str:
        return ", ".join(f"{n!r} {format_shape(s)}" for n, s in self.inputs)

    def _input_dim(self, reg: int) -> tuple | None:
        ins = self.instructions[reg]
        return (ins[1], ins[2]) if ins[0] == "dim" else None

    def _check_message(self, kind, a, b, message, regs, shapes) -> str:
        da, db = self._input_dim(a), self._input_dim(b)
        if da and db:
            (ia, ja), (ib, jb) = da, db
            return (f"input {self.inputs[ia][0]!r} dim {ja} ({regs[a]}) must be "
                    f"{_CHECK_PHRASES[kind]} input {self.inputs[ib][0]!r} dim {jb} ({regs[b]}) "
                    f"({message}); inputs {self._given_text(shapes)}")
        for dim_reg, const_reg in ((a, b), (b, a)):
            where = self._input_dim(dim_reg)
            if kind == "eq" and where and self.instructions[const_reg][0] == "const":
                i, j = where
                name, want = self.inputs[i]
                expected = list(want)
                expected[j] = regs[const_reg]
                return (f"input {name!r}: expected {format_shape(expected)} (dim {j} = "
                        f"{regs[const_reg]}), got {format_shape(shapes[i])} ({message})")
        return (f"{message}: needs {regs[a]} {_CHECK_PHRASES[kind]} {regs[b]}; inputs "
                f"{self._given_text(shapes)}, expected {self._expected_text()}")

    # ----- serialisation
    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION,
                "inputs": [[n, list(s)] for n, s in self.inputs],
                "needs_values": list(self.needs_values),
                "instructions": [list(i) for i in self.instructions],
                "checks": [list(c) for c in self.checks],
                "outputs": [list(o) for o in self.outputs]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any) -> ShapeProgram:
        """A program from to_dict's form; ShapeProgramFormatError when anything is off."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ShapeProgramFormatError(f"not a shape program (expected format {FORMAT!r})")
        if data.get("version") != VERSION:
            raise ShapeProgramFormatError(f"shape program version {data.get('version')!r}, "
                                          f"this runtime reads version {VERSION}")
        keys = ("inputs", "needs_values", "instructions", "checks", "outputs")
        if any(not isinstance(data.get(k), list) for k in keys):
            raise ShapeProgramFormatError(f"shape program: each of {keys} must be a list")
        try:
            inputs = [(n, s) for n, s in data["inputs"]]
        except (TypeError, ValueError):
            raise ShapeProgramFormatError("shape program: inputs must be [name, shape] "
                                          "pairs") from None
        try:
            return cls(inputs, data["needs_values"], data["instructions"], data["checks"],
                       data["outputs"])
        except ShapeProgramFormatError:
            raise
        except (TypeError, ValueError, IndexError, KeyError) as err:
            raise ShapeProgramFormatError(f"shape program: malformed ({type(err).__name__}: "
                                          f"{err})") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> ShapeProgram:
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise ShapeProgramFormatError(f"shape program: not JSON ({err})") from None
        return cls.from_dict(data)

    def __eq__(self, other) -> bool:
        return isinstance(other, ShapeProgram) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __str__(self) -> str:
        lines = [f"ShapeProgram(inputs {self._expected_text()}, needs_values "
                 f"{list(self.needs_values)})"]
        lines += [f"  r{i} = {ins[0]} {list(ins[1:])}" for i, ins in enumerate(self.instructions)]
        lines += [f"  check r{a} {_CHECK_WORDS[k]} r{b}  # {m}" for k, a, b, m in self.checks]
        lines += [f"  output {k}: ({', '.join(f'r{r}' for r in o)})"
                  for k, o in enumerate(self.outputs)]
        return "\n".join(lines)

    __repr__ = __str__


# ----- validation ---------------------------------------------------------------------------

def _bad(message: str) -> ShapeProgramFormatError:
    return ShapeProgramFormatError(f"shape program: {message}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_DIM < value < MAX_DIM


def _validate(prog: ShapeProgram) -> list:
    """Every index in range, every kind known; returns each register's kind (int or call)."""
    n_inputs = len(prog.inputs)
    for name, shape in prog.inputs:
        if len(shape) > MAX_RANK or any(d is not None and not 0 <= d < MAX_DIM for d in shape):
            raise _bad(f"input {name!r} has a bad shape {shape}")
    if any(not 0 <= i < n_inputs for i in prog.needs_values):
        raise _bad(f"needs_values {list(prog.needs_values)} names an input out of range")
    if len(prog.instructions) > MAX_INSTRUCTIONS:
        raise _bad(f"{len(prog.instructions)} instructions, more than {MAX_INSTRUCTIONS}")
    kinds: list = []

    def reg(r, want="int"):
        if not isinstance(r, int) or not 0 <= r < len(kinds) or kinds[r] != want:
            raise _bad(f"instruction {len(kinds)} reads register {r!r}, which is not an "
                       f"earlier {want} register")
        return r

    for ins in prog.instructions:
        if not ins or not isinstance(ins[0], str):
            raise _bad(f"instruction {len(kinds)} is {list(ins)!r}")
        op = ins[0]
        where = f"instruction {len(kinds)} ({op})"
        if op == "dim":
            if len(ins) != 3 or not isinstance(ins[1], int) or not 0 <= ins[1] < n_inputs or \
                    not isinstance(ins[2], int) or not 0 <= ins[2] < len(prog.inputs[ins[1]][1]):
                raise _bad(f"{where}: no such input dim {list(ins[1:])}")
        elif op == "const":
            if len(ins) != 2 or not _is_int(ins[1]):
                raise _bad(f"{where}: {ins[1:]!r} is not an integer")
        elif op in _BINARY or op == "bcast":
            if len(ins) not in (3, 4) or (len(ins) == 4 and not isinstance(ins[3], str)):
                raise _bad(f"{where}: expected two registers")
            reg(ins[1]), reg(ins[2])
        elif op == "item":
            if len(ins) != 4:
                raise _bad(f"{where}: expected a call register, an output and a dim")
            ranks = prog.instructions[reg(ins[1], "call")][4]
            if not isinstance(ins[2], int) or not 0 <= ins[2] < len(ranks) or \
                    not isinstance(ins[3], int) or not 0 <= ins[3] < ranks[ins[2]]:
                raise _bad(f"{where}: no dim {ins[3]!r} of output {ins[2]!r}")
        elif op == "call":
            _validate_call(ins, where, reg, prog)
            kinds.append("call")
            continue
        else:
            raise _bad(f"{where}: unknown instruction")
        kinds.append("int")
    for check in prog.checks:
        if len(check) != 4 or check[0] not in _CHECKS or not isinstance(check[3], str):
            raise _bad(f"check {list(check)!r} is not [kind, a, b, message]")
        reg(check[1]), reg(check[2])
    for out in prog.outputs:
        if len(out) > MAX_RANK:
            raise _bad(f"an output of rank {len(out)}")
        for r in out:
            reg(r)
    return kinds


def _validate_call(ins: tuple, where: str, reg, prog: ShapeProgram) -> None:
    if len(ins) != 5:
        raise _bad(f"{where}: expected [call, name, attrs, args, out_ranks]")
    _, name, attrs, args, out_ranks = ins
    if not isinstance(name, str) or not has_shape_function(name):
        raise _bad(f"{where}: no shape function named {name!r} is registered in this process")
    if not isinstance(attrs, dict) or not isinstance(args, list) or \
            not isinstance(out_ranks, list) or \
            any(not isinstance(r, int) or not 0 <= r <= MAX_RANK for r in out_ranks):
        raise _bad(f"{where}: attrs must be a dict, args a list and out_ranks ranks")
    for arg in args:
        kind = arg[0] if isinstance(arg, list) and arg else None
        if kind == "shape" and len(arg) == 2 and isinstance(arg[1], list):
            for r in arg[1]:
                reg(r)
        elif kind == "value" and len(arg) == 2 and arg[1] in prog.needs_values:
            pass
        elif kind == "const" and len(arg) == 3 and isinstance(arg[2], str):
            try:
                np.array(arg[1], dtype=arg[2])
            except (TypeError, ValueError):
                raise _bad(f"{where}: constant argument of dtype {arg[2]!r} does not "
                           "convert") from None
        else:
            raise _bad(f"{where}: bad argument {arg!r} (expected ['shape', regs], "
                       "['value', input in needs_values] or ['const', data, dtype])")
