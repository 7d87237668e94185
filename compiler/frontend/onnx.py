"""from_onnx: an ONNX ModelProto becomes a Relay IRModule and its params, as TVM's frontend does.

The conversion walks the graph's nodes in order (ONNX requires topological order), keeping
for every ONNX value name the Relay expression computing it. Nodes whose inputs are all
constants are evaluated at once with the debug interpreter, so shape arithmetic
(Shape -> Gather -> Concat -> Reshape) ends up as constants and every shape in the final
graph is static.
"""
from __future__ import annotations

import os
from collections import ChainMap
from typing import Any, Mapping

import numpy as np

from compiler.errors import CompilerError, OpNotImplemented
from compiler.ir.dims import Any as AnyDim, DynamicDimError
from compiler.ir.expr import Constant, Function, RelayExpr, Tuple, Var
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType, TupleType, Type
from compiler.op.interpreter import Interpreter
from runtime import ndarray as nd

from .onnx_ops import find_converter
from .onnx_ops.bfloat16 import check_bfloat16
from .onnx_ops.common import (DEFAULT_DOMAIN, FrontendError, NodeContext, OptionalValue,
                              canonical_domain, const, infer_type, onnx_dtype)
from .onnx_symbolic import symbolic_values


# What a converter's unchecked corner raises (numpy shape errors, int("last"), a short list...):
# reported as a FrontendError naming the node instead of escaping raw.
_CONVERTER_FAILURES = (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError,
                       OverflowError)


def _has_subgraph(node) -> bool:
    from onnx import AttributeProto
    return any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute)


def _model_opsets(model) -> dict[str, int]:
    """domain -> opset version from the model's opset_import ("ai.onnx" is the default "")."""
    opsets = {canonical_domain(entry.domain): int(entry.version)
              for entry in model.opset_import}
    opsets.setdefault(DEFAULT_DOMAIN, 1)
    return opsets


def _op_label(node) -> str:
    domain = canonical_domain(node.domain)
    return node.op_type if domain == DEFAULT_DOMAIN else f"{domain}.{node.op_type}"


def _all_nodes(graph) -> list:
    """The graph's nodes and those of every subgraph attribute (If/Loop/Scan bodies), nested
    to any depth (an explicit stack)."""
    from onnx import AttributeProto
    out, stack = [], [graph]
    while stack:
        for node in stack.pop().node:
            out.append(node)
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    stack.append(attr.g)
                elif attr.type == AttributeProto.GRAPHS:
                    stack.extend(attr.graphs)
    return out


def _missing_ops(graph, opsets: Mapping[str, int]) -> list:
    """Every node kind without a converter at its domain's opset (qualified unless default),
    subgraphs included.

    A node whose domain the model does not import has no opset, so no converter either.
    """
    missing = []
    for node in _all_nodes(graph):
        version = opsets.get(canonical_domain(node.domain))
        if version is not None and find_converter(node.op_type, version, node.domain):
            continue
        label = _op_label(node)
        if label not in missing:
            missing.append(label)
    return missing


def _opsets_label(opsets: Mapping[str, int], missing: list) -> str:
    """'opset 21' and, for the domains of the missing ops, 'ai.onnx.ml opset 5'."""
    parts = [f"opset {opsets[DEFAULT_DOMAIN]}"]
    for domain, version in opsets.items():
        if domain != DEFAULT_DOMAIN and any(m.startswith(domain + ".") for m in missing):
            parts.append(f"{domain} opset {version}")
    return ", ".join(parts)


class GraphConverter:
    """Converts one ONNX graph; holds the value table, inferred types and static values.

    A subgraph (an If branch, a Loop or Scan body) is converted by a child converter
    (`subgraph`) whose value table falls back to its parent's, so a body may name any value
    of an enclosing scope (ONNX's outer-scope references); types and static values are
    shared with the parent.
    """

    def __init__(self, model, shape: Mapping | None, dtype: Any, opset: int,
                 freeze_params: bool, opsets: Mapping[str, int] | None = None):
        self.model = model
        self.graph_proto = model.graph
        self.shape = dict(shape or {})
        self.dtype = dtype
        self.opset = opset  # the default domain's
        self.opsets = {**(opsets or {}), DEFAULT_DOMAIN: opset}
        self.freeze_params = freeze_params
        self.values: Mapping = {}  # ONNX value name -> RelayExpr (or OptionalValue)
        self.types: dict = {}
        self.param_values: dict = {}  # param Var -> numpy value (for static_value)
        self._static: dict = {}
        self._symbolic: dict = {}  # expr -> value with Any dims (onnx_symbolic), or None
        self.dim_symbols: dict = {}  # dim_param name -> its relay.Any, shared by the inputs

    def subgraph(self, graph_proto, inputs: list, where: str) -> list:
        """Convert a subgraph whose declared inputs take the expressions `inputs` (Vars of
        a loop body, or none for an If branch); its outputs' expressions, in order."""
        child = GraphConverter.__new__(GraphConverter)
        child.__dict__.update(self.__dict__)
        child.graph_proto = graph_proto
        child.values = ChainMap({}, self.values)
        declared = [i.name for i in graph_proto.input]
        if len(declared) != len(inputs):
            raise FrontendError(f"{where}: the subgraph {graph_proto.name!r} declares "
                                f"{len(declared)} inputs ({declared}), expected {len(inputs)}")
        child.values.update(zip(declared, inputs))
        from onnx import numpy_helper
        for tensor in graph_proto.initializer:
            array = numpy_helper.to_array(tensor)
            onnx_dtype(tensor.data_type, f"initializer {tensor.name!r}")
            child.values[tensor.name] = const(array, array.dtype.name)
        for node in graph_proto.node:
            child._convert_node(node)
        outputs = []
        for out in graph_proto.output:
            if out.name not in child.values:
                raise FrontendError(f"{where}: subgraph output {out.name!r} is not computed "
                                    "by any node")
            outputs.append(child.values[out.name])
        return outputs

    # -- static values ---------------------------------------------------------------------
    def static_value(self, expr: RelayExpr) -> np.ndarray | None:
        """The value of an expression computable at compile time (constants and params)."""
        if isinstance(expr, Constant):
            return expr.data.numpy()
        if expr in self._static:
            return self._static[expr]
        leaves = [n for n in post_order(expr) if isinstance(n, Var)]
        if any(v not in self.param_values for v in leaves):
            return None
        env = {v: self.param_values[v] for v in leaves}
        value = Interpreter().eval(expr, env)
        self._static[expr] = value
        return value

    def symbolic_value(self, expr: RelayExpr) -> np.ndarray | None:
        """The value of a shape-like expression: ints, or an object array holding Any where
        a dim is dynamic (onnx_symbolic); None when it depends on data."""
        return symbolic_values(expr, self._symbolic, self.types, self.static_value)

    def fold(self, expr: RelayExpr, where: str) -> RelayExpr:
        """Replace an expression over constants only by its value."""
        try:
            ty = infer_type(expr, self.types)
        except FrontendError as err:  # infer_type does not know which node it types for
            raise FrontendError(f"{where}: {err}") from err
        return self._folded(Interpreter().eval(expr), ty, where)

    def _folded(self, value, ty: Type, where: str) -> RelayExpr:
        """Constants for a value of type ty (tuples, as sequences are, field by field)."""
        if isinstance(ty, TensorType):
            return self._as_constant(value, ty, where)
        folded = Tuple([self._folded(v, t, where) for v, t in zip(value, ty.fields)])
        self.types[folded] = TupleType([self.types[f] for f in folded.fields])
        return folded

    def _as_constant(self, value: np.ndarray, ty: TensorType, where: str) -> Constant:
        value = np.asarray(value)
        # a dynamic dim (a data-dependent op's, as NonZero's) takes the folded value's size
        if value.dtype.name != ty.dtype or value.ndim != len(ty.shape) or any(
                not isinstance(d, AnyDim) and int(d) != n for d, n in zip(ty.shape, value.shape)):
            raise FrontendError(f"{where}: folding gave {value.shape} {value.dtype}, but the type "
                                f"relation says {ty.shape} {ty.dtype} (an op reference/type "
                                "relation disagree)")
        folded = const(value, ty.dtype)
        self.types[folded] = TensorType(value.shape, ty.dtype)
        return folded

    # -- inputs ----------------------------------------------------------------------------
    def _input_type(self, value_info, name: str) -> Type | None:
        """The Relay type of a graph input: a tensor, a tuple for a sequence (its element
        shapes from shape=, the length being static after import), or for an optional its
        element's type (None when shape= gives None: the optional is empty)."""
        kind = value_info.type.WhichOneof("value")
        if kind == "tensor_type":
            return self._tensor_input_type(value_info.type.tensor_type, name)
        if kind == "sequence_type":
            return self._sequence_input_type(value_info.type.sequence_type, name)
        if kind == "optional_type":
            if name in self.shape and self.shape[name] is None:
                return None
            inner = value_info.type.optional_type.elem_type
            inner_kind = inner.WhichOneof("value")
            if inner_kind == "tensor_type":
                return self._tensor_input_type(inner.tensor_type, name)
            if inner_kind == "sequence_type":
                return self._sequence_input_type(inner.sequence_type, name)
            kind = f"optional of {inner_kind}"
        raise FrontendError(f"graph input {name!r} has type {kind}; only tensors, sequences of "
                            "tensors and optionals of those are supported")

    def _sequence_input_type(self, seq_type, name: str) -> TupleType:
        elem = seq_type.elem_type
        if elem.WhichOneof("value") != "tensor_type":
            raise FrontendError(f"graph input {name!r} is a sequence of "
                                f"{elem.WhichOneof('value')}; only sequences of tensors are "
                                "supported")
        shapes = self.shape.get(name)
        if not isinstance(shapes, (list, tuple)) or \
                not all(isinstance(s, (list, tuple)) for s in shapes):
            raise FrontendError(f"graph input {name!r} is a sequence: give its element shapes "
                                f"with shape={{{name!r}: [(...), ...]}} (a sequence's length is "
                                "static after import)")
        dtype = self._input_dtype(elem.tensor_type, name)
        return TupleType([TensorType(tuple(int(d) for d in s), dtype) for s in shapes])

    def _input_dtype(self, ttype, name: str) -> str:
        if isinstance(self.dtype, Mapping) and name in self.dtype:
            return str(self.dtype[name])
        if ttype.elem_type:
            return onnx_dtype(ttype.elem_type, f"graph input {name!r}")
        return self.dtype if isinstance(self.dtype, str) else "float32"

    def _tensor_input_type(self, ttype, name: str) -> TensorType:
        """Dims with a dim_param or no value are relay.Any (one symbol per dim_param name, so
        inputs sharing 'batch' share the dim); shape= pins dims (None or -1 there: dynamic)."""
        dtype = self._input_dtype(ttype, name)
        if name in self.shape:
            return TensorType(tuple(AnyDim() if d is None or int(d) < 0 else int(d)
                                    for d in self.shape[name]), dtype)
        if not ttype.HasField("shape"):
            raise FrontendError(f"graph input {name!r} has no shape (not even a rank); give it "
                                f"with shape={{{name!r}: (...)}}")
        dims = []
        for dim in ttype.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value >= 0:
                dims.append(int(dim.dim_value))
            elif dim.dim_param:
                dims.append(self.dim_symbols.setdefault(dim.dim_param, AnyDim(dim.dim_param)))
            else:
                dims.append(AnyDim())
        return TensorType(tuple(dims), dtype)

    def _bind_graph_inputs(self) -> tuple[list, dict]:
        from onnx import numpy_helper
        graph = self.graph_proto
        initializers = {}
        for tensor in graph.initializer:
            array = numpy_helper.to_array(tensor)
            onnx_dtype(tensor.data_type, f"initializer {tensor.name!r}")
            initializers[tensor.name] = array
        if graph.sparse_initializer:
            raise FrontendError("sparse initializers are not supported")
        input_names = [i.name for i in graph.input]
        for name in self.shape:
            if name not in input_names or name in initializers:
                inputs = [n for n in input_names if n not in initializers]
                raise FrontendError(f"shape= names {name!r}, which is not a graph input; the "
                                    f"inputs are {inputs}")
        user_inputs = []
        for info in graph.input:
            if info.name in initializers:
                continue
            ty = self._input_type(info, info.name)
            var = None if ty is None else Var(info.name, ty)
            if var is not None:
                user_inputs.append(var)
            optional = info.type.WhichOneof("value") == "optional_type"
            self.values[info.name] = OptionalValue(var) if optional else var
        params: dict = {}
        for name, array in initializers.items():
            if self.freeze_params:
                expr = const(array, array.dtype.name)
            else:
                expr = Var(name, TensorType(array.shape, array.dtype.name))
                self.param_values[expr] = array
                params[name] = expr
            self.values[name] = expr
        return user_inputs, params

    # -- nodes -----------------------------------------------------------------------------
    def _convert_node(self, node) -> None:
        opset = self.opsets[canonical_domain(node.domain)]
        ctx = NodeContext(node, opset, self)
        inputs = []
        for name in node.input:
            if name == "":
                inputs.append(None)
            elif name not in self.values:
                raise FrontendError(f"{ctx.where}: input {name!r} is not produced by any "
                                    "earlier node, initializer or graph input")
            else:
                inputs.append(self.values[name])
        fn = find_converter(node.op_type, opset, node.domain)
        check_bfloat16(ctx, inputs)
        try:
            result = fn(ctx, inputs)
        except CompilerError:
            raise
        except DynamicDimError as err:  # the converter computes with static dims only
            raise ctx.error(f"dynamic (Any) input dims are not supported by this converter "
                            f"yet ({err})") from err
        except _CONVERTER_FAILURES as err:  # a converter's unchecked case: still name the node
            raise ctx.error(f"cannot convert: {type(err).__name__}: {err}") from err
        outputs = list(result) if isinstance(result, (list, tuple)) else [result]
        # a body may read outer-scope values its node's inputs do not show: never folded
        foldable = all(i is None or isinstance(i, Constant) for i in inputs) and \
            not _has_subgraph(node)
        for index, name in enumerate(node.output):
            if name == "":
                continue
            if index >= len(outputs) or outputs[index] is None:
                raise FrontendError(f"{ctx.where}: output {index} ({name!r}) is not supported")
            expr = outputs[index]
            if isinstance(expr, (Var, Constant, OptionalValue)):
                self.values[name] = expr
                continue
            if foldable:
                expr = self.fold(expr, ctx.where)
            else:
                try:  # type errors surface at the node that caused them, naming it
                    infer_type(expr, self.types)
                except FrontendError as err:
                    raise ctx.error(str(err)) from err
            self.values[name] = expr

    def convert(self) -> tuple[IRModule, dict]:
        if not self.graph_proto.output:
            raise FrontendError("the model's graph has no outputs (an empty or truncated "
                                "model?)")
        user_inputs, params = self._bind_graph_inputs()
        for node in self.graph_proto.node:
            self._convert_node(node)
        outputs = []
        for out in self.graph_proto.output:
            if out.name not in self.values:
                raise FrontendError(f"graph output {out.name!r} is not computed by any node")
            value = self.values[out.name]
            if isinstance(value, OptionalValue):
                if value.element is None:
                    raise FrontendError(f"graph output {out.name!r} is an empty optional; "
                                        "only optionals holding a value can be outputs")
                value = value.element
            outputs.append(value)
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        used = {n for n in post_order(body) if isinstance(n, Var)}
        param_vars = [v for v in params.values() if v in used]
        func = Function(user_inputs + param_vars, body)
        out_params = {v.name_hint: nd.array(self.param_values[v]) for v in param_vars}
        return IRModule.from_expr(func), out_params


def _model_proto(model) -> Any:
    """The ModelProto of a ModelProto, its serialized bytes or a model file path.

    Input that does not decode is a FrontendError naming its source (not protobuf's
    DecodeError); a missing file stays a FileNotFoundError.
    """
    import onnx
    from google.protobuf.message import DecodeError
    if isinstance(model, onnx.ModelProto):
        return model
    serialized = isinstance(model, (bytes, bytearray, memoryview))
    if serialized:
        source = f"the {len(model)} bytes given"
    elif isinstance(model, (str, os.PathLike)):
        source = os.fsdecode(model)
        if os.path.isdir(model):
            raise FrontendError(f"{source}: is a directory; expected an ONNX model file")
    else:
        raise FrontendError(f"from_onnx expects an onnx.ModelProto, its serialized bytes or "
                            f"a model file path, got {type(model).__name__}")
    try:
        return onnx.load_model_from_string(bytes(model)) if serialized else onnx.load(model)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{source}: no such file; expected an ONNX model file") from err
    except DecodeError as err:
        raise FrontendError(f"{source}: not an ONNX model (its contents do not decode as an "
                            f"ONNX ModelProto: truncated, or not ONNX?): {err}") from err


def from_onnx(model, shape: Mapping | None = None, dtype: Any = "float32",
              opset: int | None = None, freeze_params: bool = False) -> tuple[IRModule, dict]:
    """Convert an ONNX model (a ModelProto, its serialized bytes or a file path) to
    (IRModule, params); see the module docstring."""
    model = _model_proto(model)
    opsets = _model_opsets(model)
    if opset is not None:  # overrides the default domain's only
        opsets[DEFAULT_DOMAIN] = int(opset)
    missing = _missing_ops(model.graph, opsets)
    if missing:
        raise OpNotImplemented(f"The following operators are not supported for frontend ONNX "
                               f"({_opsets_label(opsets, missing)}): {', '.join(missing)}")
    return GraphConverter(model, shape, dtype, opsets[DEFAULT_DOMAIN], freeze_params,
                          opsets).convert()


__all__ = ["from_onnx"]
