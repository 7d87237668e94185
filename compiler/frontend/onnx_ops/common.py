"""What every ONNX converter needs: the converter table, the node context and small helpers."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.dims import Any as AnyDim, describe
from compiler.ir.expr import Call, Constant, Op, RelayExpr, Tuple, TupleGetItem, Var
from compiler.ir.expr import const as relay_const
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType, TupleType, Type
from compiler.op.registry import VARIADIC, get_def, make_call
from compiler.op.transform import infer_newshape
from compiler.op.type_relations import broadcast_shape

DEFAULT_DOMAIN = ""
_DEFAULT_DOMAIN_ALIASES = ("", "ai.onnx")


def canonical_domain(domain: str) -> str:
    """The table's name for an operator domain: "" and "ai.onnx" are both the default one."""
    return DEFAULT_DOMAIN if domain in _DEFAULT_DOMAIN_ALIASES else domain


class ConverterTable(dict):
    """(domain, op_type) -> [(since_version, converter)], sorted by version.

    A bare op_type key means the default domain, so `CONVERTERS["Relu"]` still reads the
    ai.onnx entry.
    """

    @staticmethod
    def key(key) -> tuple[str, str]:
        if isinstance(key, str):
            return DEFAULT_DOMAIN, key
        domain, op_type = key
        return canonical_domain(domain), op_type

    def __getitem__(self, key):
        return super().__getitem__(self.key(key))

    def __contains__(self, key) -> bool:
        return super().__contains__(self.key(key))

    def get(self, key, default=None):
        return super().get(self.key(key), default)

    def setdefault(self, key, default=None):
        return super().setdefault(self.key(key), default)


CONVERTERS: ConverterTable = ConverterTable()


def converter(op_type: str, since: int = 1, domain: str = DEFAULT_DOMAIN):
    """Register `fn(ctx, inputs)` for (domain, op_type) from that domain's opset `since`.

    The registration holds until a newer one for the same (domain, op_type). A second
    registration of the same (domain, op_type, since) is an error: otherwise the module
    imported last would silently win and the other converter would be dead code.
    """
    def decorate(fn: Callable) -> Callable:
        versions = CONVERTERS.setdefault((domain, op_type), [])
        for known_since, known in versions:
            if known_since == since and known is not fn:
                label = op_type if canonical_domain(domain) == DEFAULT_DOMAIN \
                    else f"{domain}.{op_type}"
                raise ValueError(f"ONNX converter for {label} (since opset {since}) is "
                                 f"already registered by {known.__module__}.{known.__name__}")
        versions.append((since, fn))
        versions.sort(key=lambda item: item[0])
        return fn
    return decorate


def find_converter(op_type: str, opset: int, domain: str = DEFAULT_DOMAIN) -> Callable | None:
    """The converter for the newest version not after `opset` of `domain` (None if none)."""
    chosen = None
    for since, fn in CONVERTERS.get((domain, op_type), ()):
        if since <= opset:
            chosen = fn
    return chosen


class FrontendError(CompilerError):
    """An ONNX model the frontend cannot convert (bad attribute, dynamic shape, dtype...)."""


def infer_type(expr: RelayExpr, memo: dict) -> Type:
    """Type of a freshly built expression through the registry's type relations (no recursion).

    Incremental on purpose: `memo` (the graph's type table) persists across the whole
    conversion, so each converted node types only the calls it just built. InferTypeLocal
    (compiler.ir.type_infer) starts from scratch and re-types the whole expression below
    its root on every call, which over an N-node graph is O(N^2); it also sets checked_type on
    the nodes, which the frontend does not need. Errors carry the op, its argument types and
    attrs, as InferType's do.
    """
    if expr in memo:
        return memo[expr]
    for node in post_order(expr, visited=memo, expand=_typed_by_frontend):
        kind = type(node)
        if kind is Call:
            memo[node] = _type_op_call(node, [memo[a] for a in node.args])
        elif kind is Tuple:
            memo[node] = TupleType([memo[f] for f in node.fields])
        elif kind is TupleGetItem:
            tty = memo[node.tuple_value]
            if not isinstance(tty, TupleType) or node.index >= len(tty.fields):
                raise FrontendError(f"cannot take field {node.index} of a value of type {tty}")
            memo[node] = tty.fields[node.index]
        elif kind is Constant:
            memo[node] = TensorType(node.data.shape, node.data.dtype)
        elif kind is Var:
            if node.type_annotation is None:
                raise FrontendError(f"variable %{node.name_hint} has no type annotation")
            memo[node] = node.type_annotation
        elif kind is not Op:  # ops are typed by the calls that apply them
            raise FrontendError(f"cannot type a {kind.__name__} in the ONNX frontend")
    return memo[expr]


def _typed_by_frontend(node: RelayExpr) -> bool:
    """The frontend builds op calls, tuples and projections; nothing else is entered."""
    return type(node) in (Call, Tuple, TupleGetItem)


def _type_op_call(call: Call, arg_types: list) -> Type:
    if type(call.op) is not Op:
        raise FrontendError(f"cannot type a call of a {type(call.op).__name__} in the ONNX "
                            "frontend (only op calls)")
    opdef = get_def(call.op.name)
    if opdef.num_inputs != VARIADIC and opdef.num_inputs != len(arg_types):
        raise FrontendError(f"{opdef.name} takes {opdef.num_inputs} argument(s), got "
                            f"{len(arg_types)}")
    try:
        return opdef.type_rel(arg_types, call.attrs)
    except (CompilerError, TypeError, ValueError, IndexError, KeyError, AttributeError) as err:
        types = ", ".join(str(t) for t in arg_types)
        attrs = f", attrs {dict(call.attrs)}" if call.attrs else ""
        raise FrontendError(f"{opdef.name} rejects argument types ({types}){attrs}: "
                            f"{err}") from err


def op(name: str, *args: RelayExpr, **attrs: Any) -> Call:
    """A call of a registered Relay op."""
    return make_call(name, list(args), **attrs)


def const(value: Any, dtype: str) -> Constant:
    """A constant of an explicit dtype (relay.const would narrow int64 to int32)."""
    return relay_const(np.asarray(value, dtype=dtype), dtype=dtype)


_SUPPORTED_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                     "uint64", "float16", "bfloat16", "float32", "float64", "float8_e4m3fn",
                     "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "int4", "uint4",
                     "int2", "uint2", "float4_e2m1fn"}


def onnx_dtype(elem_type: int, where: str) -> str:
    """The numpy dtype name of an ONNX TensorProto element type; unsupported ones are errors."""
    from onnx import TensorProto, helper
    try:
        np_type = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError):
        np_type = None
    name = np.dtype(np_type).name if np_type is not None else ""
    if elem_type in (TensorProto.STRING, TensorProto.COMPLEX64,
                     TensorProto.COMPLEX128, TensorProto.UNDEFINED) or not name or \
            name not in _SUPPORTED_DTYPES:
        label = TensorProto.DataType.Name(elem_type) if elem_type in \
            TensorProto.DataType.values() else str(elem_type)
        raise FrontendError(f"{where}: the ONNX element type {label} is not supported")
    return name


class OptionalValue:
    """An ONNX optional during import: its element (a tensor or sequence expression), or None
    when it is empty.

    Relay has no option type without ADTs, so an optional lives only in the frontend's value
    table: whether it holds an element is known at import (from the graph, or for a graph
    input from what shape= says: None for an empty one), OptionalHasElement folds to a
    constant and OptionalGetElement to the element. An optional whose presence depends on
    run-time data (an If that returns an empty optional from one branch only) is an error.
    """

    __slots__ = ("element",)

    def __init__(self, element: RelayExpr | None):
        self.element = element

    def __repr__(self) -> str:
        return f"OptionalValue({'empty' if self.element is None else 'holding a value'})"


class StaticInputRequired(FrontendError):
    """A node needs the compile-time value of an input that is computed from graph inputs."""

    def __init__(self, message: str, value_name: str):
        super().__init__(message)
        self.value_name = value_name


class NodeContext:
    """One ONNX node being converted: its attributes, opset and access to static facts.

    Attribute kinds are checked against the operator's ONNX schema here, once for every
    converter: a string where the schema declares an int, floats where it declares ints, ...
    are an error naming the node and the attribute, not a ValueError deep in a converter.
    """

    def __init__(self, node, opset: int, graph):
        self.node = node
        self.opset = opset
        self.graph = graph
        self.name = node.name or (node.output[0] if node.output else node.op_type)
        check_attribute_kinds(node, opset, self.where)
        self.attrs = _parse_attributes(node)

    @property
    def where(self) -> str:
        return f"node {self.name!r} ({self.node.op_type})"

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def error(self, message: str) -> FrontendError:
        return FrontendError(f"{self.where}: {message}")

    def num_outputs(self) -> int:
        return len(self.node.output)

    def output_used(self, index: int) -> bool:
        return index < len(self.node.output) and self.node.output[index] != ""

    def type_of(self, expr: RelayExpr) -> TensorType:
        try:
            ty = infer_type(expr, self.graph.types)
        except FrontendError as err:  # infer_type does not know which node it types for
            raise self.error(str(err)) from err
        if not isinstance(ty, TensorType):
            raise self.error(f"expected a tensor input, got {ty}")
        return ty

    def shape(self, expr: RelayExpr) -> tuple:
        return self.type_of(expr).shape

    def dtype(self, expr: RelayExpr) -> str:
        return self.type_of(expr).dtype

    def rank(self, expr: RelayExpr) -> int:
        return len(self.type_of(expr).shape)

    def value(self, expr: RelayExpr | None, what: str) -> np.ndarray:
        """The compile-time value of an input; an error naming the node when it is dynamic."""
        if expr is None:
            raise self.error(f"the {what} input is required")
        found = self.graph.static_value(expr)
        if found is None:
            names = [n for n in self.node.input if n and self.graph.values.get(n) is expr]
            name = names[0] if names else "?"
            raise StaticInputRequired(f"{self.where}: needs a static (constant) {what} input, "
                                      f"but {name!r} depends on a graph input; static shapes "
                                      "are required end to end", name)
        return found

    def maybe_value(self, expr: RelayExpr | None) -> np.ndarray | None:
        return None if expr is None else self.graph.static_value(expr)

    def symbolic_value(self, expr: RelayExpr | None) -> np.ndarray | None:
        """A shape-like input's value: ints, an object array with relay.Any for dims known
        only at run time, or None when it depends on data (compiler.frontend.onnx_symbolic)."""
        return None if expr is None else self.graph.symbolic_value(expr)

    def reshape(self, x: RelayExpr, shape: Sequence) -> RelayExpr:
        """reshape(x, shape) where shape may hold dynamic dims built from x's: reshape codes
        where they express it, else dyn.reshape to the shape computed at run time."""
        if not any(isinstance(d, AnyDim) for d in shape):
            return reshape(x, shape)
        in_shape = self.shape(x)
        empty = any(not isinstance(d, AnyDim) and int(d) == 0 for d in shape)
        codes = reshape_codes(tuple(in_shape), list(shape), allowzero=empty)
        if codes is not None:
            return op("reshape", x, newshape=codes, allowzero=empty)
        out = op("dyn.reshape", x, self.dims_tensor(x, shape), allowzero=True)
        # the frontend knows the result's dims symbolically (type inference cannot see
        # through the computed shape): later converters keep reading them
        self.graph.types[out] = TensorType(tuple(shape), self.dtype(x))
        return out

    def dims_tensor(self, x: RelayExpr, dims: Sequence) -> RelayExpr:
        """An int64 tensor of `dims` computed at run time: ints, and expressions of x's own
        dynamic dims (read from shape_of(x))."""
        in_shape = self.shape(x)
        sizes = op("shape_of", x, dtype="int64")
        where = {d.symbol.key: i for i, d in enumerate(in_shape)
                 if isinstance(d, AnyDim) and d.symbol is not None}
        items = [op("expand_dims", _dim_expr(d, sizes, where, self), axis=0, num_newaxis=1)
                 for d in dims]
        return op("concatenate", Tuple(items), axis=0)

    def broadcast_shapes(self, *named: tuple[str, Sequence[int]]) -> tuple:
        """numpy broadcasting of (label, shape) pairs; an error naming the node and the shapes
        when they clash. Dynamic dims broadcast as the type relations do."""
        if any(isinstance(d, AnyDim) for _, shape in named for d in shape):
            try:
                return broadcast_shape(self.node.op_type, *(shape for _, shape in named))
            except CompilerError as err:
                raise self.error(str(err)) from None
        shapes = [tuple(int(d) for d in shape) for _, shape in named]
        listed = " and ".join(f"{label} {shape}" for (label, _), shape in zip(named, shapes))
        if any(d < 0 for shape in shapes for d in shape):
            raise self.error(f"{listed}: a dimension is negative")
        try:
            return tuple(int(d) for d in np.broadcast_shapes(*shapes))
        except ValueError:
            raise self.error(f"{listed} do not broadcast (aligned from the right, each "
                             "dimension must match or be 1)") from None


_ATTR_KINDS = {1: "a float", 2: "an int", 3: "a string", 4: "a tensor", 5: "a graph",
               6: "a list of floats", 7: "a list of ints", 8: "a list of strings",
               9: "a list of tensors", 10: "a list of graphs", 11: "a sparse tensor",
               12: "a list of sparse tensors", 13: "a type", 14: "a list of types"}


@functools.lru_cache(maxsize=None)
def _declared_attr_types(op_type: str, opset: int, domain: str) -> dict | None:
    """attribute name -> AttributeProto type the op's ONNX schema declares (None: no schema)."""
    from onnx import defs
    try:
        schema = defs.get_schema(op_type, opset, domain)
    except defs.SchemaError:
        return None
    return {name: int(a.type) for name, a in schema.attributes.items()}


def check_attribute_kinds(node, opset: int, where: str) -> None:
    """Every attribute the schema declares must have the declared kind (int, ints, string...)."""
    declared = _declared_attr_types(node.op_type, opset, canonical_domain(node.domain))
    if not declared:
        return
    for attr in node.attribute:
        expected = declared.get(attr.name)
        if expected is None or attr.ref_attr_name or attr.type == expected:
            continue
        given = _ATTR_KINDS.get(attr.type, f"of attribute type {attr.type}")
        if attr.type in _ATTR_KINDS and attr.type not in (4, 5, 9, 10, 11, 12, 13, 14):
            from onnx import helper
            value = helper.get_attribute_value(attr)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif isinstance(value, list):
                value = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                         for v in value]
            shown = repr(value)
            given += f" {shown[:60] + '...' if len(shown) > 60 else shown}"
        raise FrontendError(f"{where}: attribute {attr.name!r} must be "
                            f"{_ATTR_KINDS.get(expected, f'attribute type {expected}')}, "
                            f"got {given}")


def _parse_attributes(node) -> dict:
    from onnx import AttributeProto, helper, numpy_helper
    out = {}
    for attr in node.attribute:
        if attr.type == AttributeProto.TENSOR:
            out[attr.name] = numpy_helper.to_array(attr.t)
        elif attr.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
            out[attr.name] = attr  # subgraphs: only ops that support them look at these
        else:
            value = helper.get_attribute_value(attr)
            if isinstance(value, bytes):
                value = value.decode("utf-8")
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode("utf-8") for v in value]
            out[attr.name] = value
    return out


def norm_axis(ctx: NodeContext, axis: int, rank: int, what: str = "axis") -> int:
    """A negative axis counted from the end; out of range is an error naming the node."""
    if not -rank <= axis < max(rank, 1):
        raise ctx.error(f"{what} {axis} is out of range for a rank-{rank} input")
    return axis + rank if axis < 0 else axis


_DIM_OPS = {"floordiv": "floor_divide", "floormod": "floor_mod", "mul": "multiply",
            "max": "maximum", "min": "minimum", "bcast": "maximum"}


def _dim_expr(dim, sizes: RelayExpr, where: dict, ctx) -> RelayExpr:
    """A scalar int64 expression computing dim from the run-time shape `sizes` of a tensor
    whose dynamic dims' symbols are at the positions `where` (a shallow recursion over the
    dim's expression, whose depth is that of its nested floordiv/min/max nodes)."""
    if not isinstance(dim, AnyDim):
        return const(np.int64(int(dim)), "int64")
    total = const(np.int64(dim.const), "int64")
    for atom, coeff in dim.terms:
        if atom.key in where:
            value = op("take", sizes, const(np.int64(where[atom.key]), "int64"), axis=0,
                       batch_dims=0, mode="fast")
        elif hasattr(atom, "op"):
            a, b = (_dim_expr(arg, sizes, where, ctx) for arg in atom.args)
            value = op(_DIM_OPS[atom.op], a, b)
        else:
            raise ctx.error(f"a dynamic dim ({describe(dim)}) is not one of the input's")
        term = value if coeff == 1 else op("multiply", value,
                                           const(np.int64(coeff), "int64"))
        total = op("add", total, term)
    return total


def static_ints(value) -> list | None:
    """A shape-like value's entries as ints; None when it is unknown or holds a symbol."""
    if value is None or (isinstance(value, np.ndarray) and value.dtype == object and
                         any(not isinstance(v, (int, np.integer)) for v in value.reshape(-1))):
        return None
    return as_ints(value)


def as_ints(values: Sequence) -> list:
    return [int(v) for v in np.asarray(values).reshape(-1).tolist()]


def num_elements(shape: Sequence[int]) -> int:
    """The element count of a shape (1 for a scalar; an expression when a dim is dynamic)."""
    if any(isinstance(d, AnyDim) for d in shape):
        total = 1
        for d in shape:
            total = total * d
        return total
    return int(np.prod(shape, dtype=np.int64))


def reshape(x: RelayExpr, shape: Sequence, in_shape: Sequence | None = None) -> Call:
    """Reshape to a static ONNX-style target: a 0 is an empty dim, never "copy the input's".

    A -1 is still inferred, which only works when no other dim is 0: with an empty input the
    caller computes every dim itself. A target holding dynamic dims (relay.Any) of the
    input's shape `in_shape` becomes reshape codes (0 copies, -3 merges two, -1 infers).
    """
    if in_shape is not None:
        empty = any(not isinstance(d, AnyDim) and int(d) == 0 for d in shape)
        codes = reshape_codes(tuple(in_shape), list(shape), allowzero=empty)
        if codes is None:
            raise FrontendError(f"cannot express the reshape of {tuple(in_shape)} to "
                                f"{tuple(shape)} statically")
        return op("reshape", x, newshape=codes, allowzero=empty)
    newshape = [int(s) for s in shape]
    return op("reshape", x, newshape=newshape, allowzero=0 in newshape)


def reshape_codes(shape: tuple, target: list, allowzero: bool = False) -> list | None:
    """Reshape codes (TVM's: 0 copies a dim, -3 merges two, -1 infers one, ints as they are)
    turning `shape` into exactly `target`, whose dims may be symbols (relay.Any) built from
    shape's; None when the symbols do not allow it."""
    codes, src, i = [], 0, 0
    inferred = any(not isinstance(t, AnyDim) and int(t) == -1 for t in target)
    while i < len(target):
        t, nxt = target[i], target[i + 1] if i + 1 < len(target) else None
        here = shape[src] if src < len(shape) else None
        pair = shape[src] * shape[src + 1] if src + 1 < len(shape) else None
        split = isinstance(t, AnyDim) != isinstance(nxt, AnyDim) and nxt is not None and \
            here is not None and isinstance(here, AnyDim) and here == t * nxt
        if isinstance(t, AnyDim) and not allowzero and here is not None and t == here:
            codes.append(0)
            src += 1
        elif isinstance(t, AnyDim) and pair is not None and t == pair:
            codes.append(-3)
            src += 2
        elif split:  # one dynamic dim split into a symbol and a static factor
            codes += [-4, -1, int(nxt)] if isinstance(t, AnyDim) else [-4, int(t), -1]
            src += 1
            i += 1
        elif not isinstance(t, AnyDim):
            codes.append(int(t))
            src += 1
        elif not inferred:
            codes.append(-1)
            inferred = True
            src += 1
        else:
            return None
        i += 1
    try:
        out = infer_newshape("reshape", tuple(shape), tuple(codes), allowzero)
    except (CompilerError, TypeError, ZeroDivisionError):
        return None
    if len(out) != len(target) or any(
            o != t for o, t in zip(out, target) if isinstance(t, AnyDim) or int(t) > 0 or
            (int(t) == 0 and allowzero)):
        return None
    return codes


def cast(x: RelayExpr, ctx: NodeContext, dtype: str) -> RelayExpr:
    return x if ctx.dtype(x) == dtype else op("cast", x, dtype=dtype)


def scalar_like(ctx: NodeContext, x: RelayExpr, value: float) -> Constant:
    return const(value, ctx.dtype(x))


def scalar_bool(ctx, cond, what: str):
    """A one-element bool tensor as the bool scalar relay.If tests."""
    shape = ctx.shape(cond)
    if int(np.prod(shape, dtype=np.int64)) != 1:
        raise ctx.error(f"the {what} must have one element, got shape {shape}")
    if ctx.dtype(cond) != "bool":
        cond = op("not_equal", cond, const(0, ctx.dtype(cond)))
    return cond if shape == () else op("reshape", cond, newshape=[])
