"""GraphBuilder: grows a valid ONNX graph node by node, tracking every value's shape and dtype.

Op templates (ops_math, ops_nn, ops_shape) ask the builder for operands that satisfy a
predicate (an existing value, preferring recent ones so chains get deep, or a fresh graph
input), compute the output shapes themselves and add the node. Every value also carries a
small forward error analysis, which the oracle turns into its tolerance:

- `mag`: an upper estimate of |element|; templates refuse ops that could overflow the dtype
  (float16 tops out at 65504), since where an intermediate rounds to inf is not something
  two correct implementations agree on.
- `err`: an estimate of the absolute error a correct implementation may carry (rounding per
  op, amplified by what follows: a sum of K terms, exp, division by a value >= lo...).
  `err == 0` means exact: graph inputs, integer math, data movement, max/min of exact
  values. Only exact values feed discontinuous ops (Cast float->int, comparisons, Floor,
  ArgMax...), so a last-ulp difference upstream cannot flip a result and look like a bug.
- `lo`: a known positive lower bound (None when the sign is unknown): divisors, Log and
  Sqrt take values with lo >= 0.05, or exact ones (whose NaN/inf every engine must agree on).
- `nonfinite`: may hold inf/NaN (Log of an exact 0...); such values never reach a float->int
  Cast (undefined behaviour in C and LLVM alike).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOATS = ("float32", "float16")
INTS = ("int32", "int64")
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10}
# the largest magnitude a template lets a value reach (estimated), per dtype
MAG_LIMIT = {"float32": 1e30, "float16": 3e4, "int32": 2.0 ** 30, "int64": 2.0 ** 62,
             "bool": 1.0}
MAX_NODES = 15
MAX_INPUTS = 5


def spec(shape, dtype: str, mag: float = 1.0, err: float = 0.0, lo: float | None = None,
         nonfinite: bool = False, absmin: float = 0.0) -> dict:
    """What a template knows about one node output (see the module docstring)."""
    if lo is not None:
        absmin = max(absmin, lo)
    return {"shape": tuple(int(d) for d in shape), "dtype": dtype, "mag": float(mag),
            "err": float(err), "lo": lo, "nonfinite": nonfinite, "absmin": float(absmin)}


def rounding(dtype: str, mag: float) -> float:
    """The rounding error of storing a value of magnitude mag in dtype."""
    return EPS.get(dtype, 0.0) * mag


@dataclass(eq=False)
class Value:
    """One ONNX value (graph input, initializer or node output) and what we know about it."""

    name: str
    shape: tuple
    dtype: str
    mag: float = 2.0
    err: float = 0.0
    lo: float | None = None
    absmin: float = 0.0
    nonfinite: bool = False
    const: bool = False
    uses: int = 0

    @property
    def exact(self) -> bool:
        return self.err == 0.0

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOATS

    @property
    def is_int(self) -> bool:
        return self.dtype in INTS


def tensor_type(dtype: str) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def random_data(rng: np.random.Generator, shape: tuple, dtype: str,
                kind: str = "normal") -> np.ndarray:
    """Input data: floats in [-2, 2] ('positive': [0.5, 2], 'nonzero': |v| in [0.5, 2])."""
    return np.asarray(_random_values(rng, tuple(shape), dtype, kind), dtype=dtype)


def _random_values(rng: np.random.Generator, shape: tuple, dtype: str, kind: str):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in INTS:
        if kind == "positive":
            return rng.integers(1, 6, shape).astype(dtype)
        if kind == "nonzero":
            v = rng.integers(1, 6, shape) * rng.choice([-1, 1], shape)
            return v.astype(dtype)
        return rng.integers(-5, 6, shape).astype(dtype)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape).astype(dtype)
    if kind == "nonzero":
        return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)
    # quarter steps keep inputs exact in float16 too, and make ties reachable
    if rng.random() < 0.3:
        return (rng.integers(-8, 9, shape) / 4.0).astype(dtype)
    return rng.uniform(-2.0, 2.0, shape).astype(dtype)


@dataclass
class GraphBuilder:
    """Accumulates nodes, inputs and initializers; `model()` returns the finished ModelProto."""

    rng: np.random.Generator
    opset: int
    max_nodes: int = MAX_NODES
    nodes: list = field(default_factory=list)
    values: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    feeds: dict = field(default_factory=dict)
    initializers: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    _count: int = 0

    # -- names and randomness ---------------------------------------------------------------
    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, options):
        options = list(options)
        return options[int(self.rng.integers(len(options)))]

    def room(self, k: int = 1) -> bool:
        """True when k more nodes fit under the node budget."""
        return len(self.nodes) + k <= self.max_nodes

    # -- operands -------------------------------------------------------------------------
    def fresh_input(self, shape: tuple, dtype: str, kind: str = "normal") -> Value:
        v = Value(self.name("in"), tuple(int(d) for d in shape), dtype, **_data_facts(dtype, kind))
        self.inputs.append(v)
        self.values.append(v)
        self.feeds[v.name] = random_data(self.rng, v.shape, dtype, kind)
        return v

    def constant(self, array, dtype: str | None = None, kind: str = "normal") -> Value:
        """An initializer (never offered as an operand by pick)."""
        array = np.asarray(array, dtype=dtype) if dtype else np.asarray(array)
        facts = _data_facts(array.dtype.name, kind)
        if array.size and array.dtype.kind in "fiu":
            wide = array.astype(np.float64)
            facts["mag"] = max(float(np.abs(wide).max()), 1e-3)
            facts["lo"] = float(wide.min()) if wide.min() > 0 else None
            facts["absmin"] = float(np.abs(wide).min())
        v = Value(self.name("c"), tuple(array.shape), array.dtype.name, const=True, **facts)
        self.initializers.append(numpy_helper.from_array(array, v.name))
        return v

    def operand(self, shape: tuple, dtype: str, kind: str = "normal", p_const: float = 0.4):
        """A fresh operand of this shape: a graph input or (p_const) a random initializer."""
        if self.chance(p_const) or len(self.inputs) >= MAX_INPUTS:
            return self.constant(random_data(self.rng, shape, dtype, kind))
        return self.fresh_input(shape, dtype, kind)

    def pick(self, pred: Callable[[Value], bool], make: Callable[[], Value] | None = None,
             p_fresh: float = 0.15) -> Value | None:
        """An existing non-constant value satisfying pred (recent ones likelier), else make()."""
        cands = [v for v in self.values if not v.const and pred(v)]
        if cands and not (make is not None and self.chance(p_fresh)):
            weights = np.array([2.0 ** (i / 2) for i in range(len(cands))])
            weights = weights / (1 + np.array([v.uses for v in cands]))
            return cands[int(self.rng.choice(len(cands), p=weights / weights.sum()))]
        if make is None or len(self.inputs) >= MAX_INPUTS:
            return None
        return make()

    # -- nodes ------------------------------------------------------------------------------
    def node(self, op: str, inputs: list, outputs: list, **attrs) -> list:
        """Add a node; inputs are Values, names ('' = omitted) or None; outputs are spec()s.

        Returns the output Values.
        """
        names = []
        for v in inputs:
            if isinstance(v, Value):
                v.uses += 1
                names.append(v.name)
            else:
                names.append(v or "")
        while names and names[-1] == "":
            names.pop()
        outs = [Value(self.name("v"), **o) for o in outputs]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op, names, [o.name for o in outs],
                                           name=self.name(op.lower() + "_"), **attrs))
        self.values.extend(outs)
        self.ops.append(op)
        return outs

    def fits(self, dtype: str, mag: float) -> bool:
        """Whether a value of this estimated magnitude stays clear of overflow in dtype."""
        return np.isfinite(mag) and mag <= MAG_LIMIT.get(dtype, 1e30)

    # -- result -----------------------------------------------------------------------------
    def outputs(self) -> list:
        """Every node output nothing consumes, plus now and then an intermediate one."""
        produced = [v for v in self.values if not v.const and v not in self.inputs]
        outs = [v for v in produced if v.uses == 0]
        for v in produced:
            if v.uses and self.chance(0.1):
                outs.append(v)
        return outs

    def model(self, outputs: list) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "fuzz",
            [helper.make_tensor_value_info(v.name, tensor_type(v.dtype), v.shape)
             for v in self.inputs],
            [helper.make_tensor_value_info(v.name, tensor_type(v.dtype), v.shape)
             for v in outputs],
            self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="relayjit-fuzz")
        model.ir_version = min(model.ir_version, ir_version_for(self.opset))
        return model


def _data_facts(dtype: str, kind: str) -> dict:
    """mag / lo of random_data(kind) in dtype (exact: err 0)."""
    bound = 1.0 if dtype in INTS else 0.5
    facts = {"mag": 1.0 if dtype == "bool" else 5.0 if dtype in INTS else 2.0,
             "lo": bound if kind == "positive" else None,
             "absmin": bound if kind in ("positive", "nonzero") else 0.0}
    return facts


def ir_version_for(opset: int) -> int:
    """The IR version the opset shipped with (so older runtimes accept the model)."""
    for entry in helper.VERSION_TABLE:
        if entry[2] == opset:
            return entry[1]
    return onnx.IR_VERSION


# -- shape helpers ----------------------------------------------------------------------------
def broadcast(*shapes) -> tuple:
    return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))


def broadcast_partner(b: GraphBuilder, shape: tuple) -> tuple:
    """A shape that broadcasts against `shape` (fewer dims, 1s, or expanding its 1s)."""
    if b.rng.random() < 0.25:
        return tuple(shape)
    out = []
    for d in shape:
        if d == 1 and b.chance(0.5):
            out.append(int(b.rng.integers(2, 4)))
        elif d != 1 and b.chance(0.3):
            out.append(1)
        else:
            out.append(d)
    if b.chance(0.1) and len(out) < 5:
        out = [int(b.rng.integers(1, 3))] + out
    elif b.chance(0.4) and out:
        out = out[int(b.rng.integers(0, len(out) + 1)):]
    return tuple(out)


def neg_axis(b: GraphBuilder, axis: int, rank: int) -> int:
    """axis as given or (half the time) counted from the end."""
    return axis - rank if b.chance(0.5) else axis


def random_shape(b: GraphBuilder, rank: int | None = None, lo: int = 1, hi: int = 6,
                 p_empty: float = 0.04, p_one: float = 0.2) -> tuple:
    rank = int(b.rng.integers(0, 5)) if rank is None else rank
    dims = []
    for _ in range(rank):
        if b.chance(p_empty):
            dims.append(0)
        elif b.chance(p_one):
            dims.append(1)
        else:
            dims.append(int(b.rng.integers(lo, hi + 1)))
    return tuple(dims)


def float_dtype(b: GraphBuilder) -> str:
    return "float16" if b.chance(0.2) else "float32"


def any_dtype(b: GraphBuilder, ints: bool = True) -> str:
    r = b.rng.random()
    if not ints or r < 0.6:
        return float_dtype(b)
    return "int32" if r < 0.8 else "int64"


def tensor_proto_dtype(dtype: str) -> int:
    return {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
            "int32": TensorProto.INT32, "int64": TensorProto.INT64,
            "bool": TensorProto.BOOL}[dtype]
