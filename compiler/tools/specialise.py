"""The compiler's half of running an ONNX model with dynamic axes: its symbolic signature,
and a module built for one concrete input-shape signature (runtime.specialised keeps them).

    inputs, outputs = onnx_signature(model, pins)   # TensorSpecs: dim_param -> its name
    build = OnnxSpecialiser(model, opt_level=3, target="llvm")
    module = build({"input_ids": (4, 128), "attention_mask": (4, 128)})

A specialisation imports the model with those shapes (from_onnx(shape=...): every Shape,
Gather and Concat over them folds at import, exactly as for a model exported with static
shapes) and builds it with relay.build: static kernels, blocked layouts, the graph executor's
native run loop, and the build cache, so the same shapes in a new process are a cache hit.
A program relay.build cannot run (a run-time If, global functions such as a Loop's body,
shapes known only from data) is compiled with relay.vm.compile instead.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compiler.analysis.feature import Feature, detect_feature
from compiler.driver.build import build
from compiler.driver.build_vm import SYMBOLIC_KERNELS, compile as vm_compile
from compiler.errors import CompilerError
from compiler.frontend.onnx import from_onnx
from compiler.frontend.onnx_ops.common import onnx_dtype
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime.specialised import TensorSpec

__all__ = ["onnx_signature", "OnnxSpecialiser", "needs_vm", "model_from_bytes", "POLICIES"]

# dynamic= of compiler.load: "specialize" builds static modules per input-shape signature
# (the VM only for programs that need it); "vm" compiles one VM program for every shape
POLICIES = ("specialize", "vm")
# the executables made here are run in this process with their compile hook, never saved: no
# symbolic kernels (relay.vm.compile's are for executables loaded without a compiler)
IN_PROCESS = {SYMBOLIC_KERNELS: False}


def onnx_signature(model, pins: Mapping[str, Sequence[int]] | None = None
                   ) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """(input specs, output specs) of an ONNX model's graph: dim_value -> int, dim_param ->
    its name, neither -> None; `pins` (compiler.load's shape=) fixes whole inputs, and the
    symbols they fix in every other input."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    pins = dict(pins or {})
    inputs = [v for v in graph.input if v.name not in initializers]
    names = [v.name for v in inputs]
    for name, dims in pins.items():
        if name not in names:
            raise CompilerError(f"shape= names {name!r}, which is not a graph input; the "
                                f"inputs are {names}")
    specs = [_spec(value, "graph input") for value in inputs]
    symbols: dict[str, tuple[int, str]] = {}  # what the pins make each symbol: (value, input)
    for i, spec in enumerate(specs):
        if spec.name not in pins:
            continue
        dims = tuple(int(d) for d in pins[spec.name])
        if spec.shape is not None and len(dims) != len(spec.shape):
            raise CompilerError(f"shape= gives input {spec.name!r} {len(dims)} dims, the "
                                f"model declares {spec.shape_text()}")
        for dim, size in zip(spec.shape or (), dims):
            value, source = symbols.setdefault(dim, (size, spec.name)) \
                if isinstance(dim, str) else (size, spec.name)
            if value != size:
                raise CompilerError(f"shape= gives {dim!r} as {value} (input {source!r}) and "
                                    f"as {size} (input {spec.name!r})")
        specs[i] = TensorSpec(spec.name, dims, spec.dtype)
    specs = [s if s.name in pins or s.shape is None else  # pinned symbols fix other inputs too
             TensorSpec(s.name, tuple(symbols[d][0] if d in symbols else d for d in s.shape),
                        s.dtype) for s in specs]
    return specs, [_spec(v, "graph output") for v in graph.output]


def _spec(value, what: str) -> TensorSpec:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise CompilerError(f"{what} {value.name!r} is a {kind or 'value of no type'}; "
                            "compiler.load runs models whose inputs and outputs are tensors "
                            "(relay.frontend.from_onnx with relay.vm.compile takes sequences)")
    ttype = value.type.tensor_type
    dtype = onnx_dtype(ttype.elem_type, f"{what} {value.name!r}")
    if not ttype.HasField("shape"):
        return TensorSpec(value.name, None, dtype)
    dims = tuple(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None)
                 for d in ttype.shape.dim)
    return TensorSpec(value.name, dims, dtype)


def needs_vm(mod: IRModule) -> bool:
    """Whether the graph executor cannot run `mod`: control flow (If, global functions)."""
    return Feature.fIf in detect_feature(mod) or len(mod.functions) > 1


class OnnxSpecialiser:
    """shapes -> the module for exactly those input shapes (see the module docstring)."""

    def __init__(self, model, opt_level: int = 3, target: Any = "llvm") -> None:
        self.model = model
        self.opt_level = opt_level
        self.target = target

    def __call__(self, shapes: Mapping[str, tuple[int, ...]]):
        mod, params = from_onnx(self.model, shape=dict(shapes))
        with PassContext(opt_level=self.opt_level, config=IN_PROCESS):
            if needs_vm(mod):
                return vm_compile(mod, target=self.target, params=params)
            return build(mod, target=self.target, params=params)

    def symbolic(self, pins: Mapping[str, Sequence[int]] | None = None):
        """One VM program for every shape (dynamic="vm"): the model imported with its
        symbolic dims, the VM's kernels specialising themselves per shape."""
        mod, params = from_onnx(self.model, shape=dict(pins) if pins else None)
        with PassContext(opt_level=self.opt_level, config=IN_PROCESS):
            return vm_compile(mod, target=self.target, params=params)


def model_from_bytes(data: bytes, where: str):
    """The ONNX model of a dynamic artefact's bytes; CompilerError naming `where` when they
    do not decode or a tensor points outside them (external data would make loading an
    artefact read other files)."""
    import onnx  # optional for the runtime; the frontend imports it the same way
    from google.protobuf.message import DecodeError
    try:
        model = onnx.load_model_from_string(bytes(data))
    except (DecodeError, ValueError, RuntimeError) as err:
        raise CompilerError(f"{where}: its model does not decode as ONNX: {err}") from None
    for tensor in _all_tensors(model.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.external_data:
            raise CompilerError(f"{where}: tensor {tensor.name!r} of its model is stored "
                                "outside the file (external data); an artefact must carry "
                                "its weights")
    return model


def _all_tensors(graph) -> list:
    """Every TensorProto of a graph and its subgraphs: initializers, sparse ones' parts and
    tensor attributes (iteratively)."""
    tensors, graphs = [], [graph]
    while graphs:
        g = graphs.pop()
        tensors.extend(g.initializer)
        for sparse in g.sparse_initializer:
            tensors.extend((sparse.values, sparse.indices))
        for node in g.node:
            for attr in node.attribute:
                tensors.extend([attr.t] if attr.HasField("t") else [])
                tensors.extend(attr.tensors)
                sparse = [attr.sparse_tensor] if attr.HasField("sparse_tensor") else []
                for s in [*sparse, *attr.sparse_tensors]:
                    tensors.extend((s.values, s.indices))
                graphs.extend([attr.g] if attr.HasField("g") else [])
                graphs.extend(attr.graphs)
    return tensors
