"""from_onnx: an ONNX ModelProto becomes a Relay IRModule and its params, as TVM's frontend does.

The conversion walks the graph's nodes in order (ONNX requires topological order), keeping
for every ONNX value name the Relay expression computing it. Nodes whose inputs are all
constants are evaluated at once with the debug interpreter, so shape arithmetic
(Shape -> Gather -> Concat -> Reshape) ends up as constants and every shape in the final
graph is static.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from compiler.errors import CompilerError, OpNotImplemented
from compiler.ir.expr import Constant, Function, RelayExpr, Tuple, Var
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType
from compiler.op.interpreter import Interpreter
from runtime import ndarray as nd

from .onnx_ops import find_converter
from .onnx_ops.common import (DEFAULT_DOMAIN, FrontendError, NodeContext, canonical_domain,
                              const, infer_type, onnx_dtype)


# What a converter's unchecked corner raises (numpy shape errors, int("last"), a short list...):
# reported as a FrontendError naming the node instead of escaping raw.
_CONVERTER_FAILURES = (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError,
                       OverflowError)


def _model_opsets(model) -> dict[str, int]:
    """domain -> opset version from the model's opset_import ("ai.onnx" is the default "")."""
    opsets = {canonical_domain(entry.domain): int(entry.version)
              for entry in model.opset_import}
    opsets.setdefault(DEFAULT_DOMAIN, 1)
    return opsets


def _op_label(node) -> str:
    domain = canonical_domain(node.domain)
    return node.op_type if domain == DEFAULT_DOMAIN else f"{domain}.{node.op_type}"


def _missing_ops(graph, opsets: Mapping[str, int]) -> list:
    """Every node kind without a converter at its domain's opset (qualified unless default).

    A node whose domain the model does not import has no opset, so no converter either.
    """
    missing = []
    for node in graph.node:
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
    """Converts one ONNX graph; holds the value table, inferred types and static values."""

    def __init__(self, model, shape: Mapping | None, dtype: Any, opset: int,
                 freeze_params: bool, opsets: Mapping[str, int] | None = None):
        self.model = model
        self.graph_proto = model.graph
        self.shape = dict(shape or {})
        self.dtype = dtype
        self.opset = opset  # the default domain's
        self.opsets = {**(opsets or {}), DEFAULT_DOMAIN: opset}
        self.freeze_params = freeze_params
        self.values: dict[str, RelayExpr] = {}
        self.types: dict = {}
        self.param_values: dict = {}  # param Var -> numpy value (for static_value)
        self._static: dict = {}

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

    def fold(self, expr: RelayExpr, where: str) -> RelayExpr:
        """Replace an expression over constants only by its value."""
        try:
            ty = infer_type(expr, self.types)
        except FrontendError as err:  # infer_type does not know which node it types for
            raise FrontendError(f"{where}: {err}") from err
        value = Interpreter().eval(expr)
        if isinstance(ty, TensorType):
            return self._as_constant(value, ty, where)
        return Tuple([self._as_constant(v, t, where) for v, t in zip(value, ty.fields)])

    def _as_constant(self, value: np.ndarray, ty: TensorType, where: str) -> Constant:
        value = np.asarray(value)
        if value.dtype.name != ty.dtype or tuple(value.shape) != ty.shape:
            raise FrontendError(f"{where}: folding gave {value.shape} {value.dtype}, but the type "
                                f"relation says {ty.shape} {ty.dtype} (an op reference/type "
                                "relation disagree)")
        folded = const(value, ty.dtype)
        self.types[folded] = ty
        return folded

    # -- inputs ----------------------------------------------------------------------------
    def _input_type(self, value_info, name: str) -> TensorType:
        ttype = value_info.type.tensor_type if value_info.type.HasField("tensor_type") else None
        if ttype is None:
            kind = value_info.type.WhichOneof("value")
            raise FrontendError(f"graph input {name!r} has type {kind}; only tensors are "
                                "supported")
        if isinstance(self.dtype, Mapping) and name in self.dtype:
            dtype = str(self.dtype[name])
        elif ttype.elem_type:
            dtype = onnx_dtype(ttype.elem_type, f"graph input {name!r}")
        else:
            dtype = self.dtype if isinstance(self.dtype, str) else "float32"
        if name in self.shape:
            return TensorType(tuple(int(d) for d in self.shape[name]), dtype)
        dims = []
        for i, dim in enumerate(ttype.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value >= 0:
                dims.append(int(dim.dim_value))
            else:
                label = dim.dim_param or "?"
                raise FrontendError(f"graph input {name!r} has an unknown dimension {i} "
                                    f"({label!r}); give its static shape with "
                                    f"shape={{{name!r}: (...)}}")
        if not ttype.HasField("shape"):
            raise FrontendError(f"graph input {name!r} has no shape; give it with "
                                f"shape={{{name!r}: (...)}}")
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
            var = Var(info.name, self._input_type(info, info.name))
            self.values[info.name] = var
            user_inputs.append(var)
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
        try:
            result = fn(ctx, inputs)
        except CompilerError:
            raise
        except _CONVERTER_FAILURES as err:  # a converter's unchecked case: still name the node
            raise ctx.error(f"cannot convert: {type(err).__name__}: {err}") from err
        outputs = list(result) if isinstance(result, (list, tuple)) else [result]
        foldable = all(i is None or isinstance(i, Constant) for i in inputs)
        for index, name in enumerate(node.output):
            if name == "":
                continue
            if index >= len(outputs) or outputs[index] is None:
                raise FrontendError(f"{ctx.where}: output {index} ({name!r}) is not supported")
            expr = outputs[index]
            if isinstance(expr, (Var, Constant)):
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
            outputs.append(self.values[out.name])
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
