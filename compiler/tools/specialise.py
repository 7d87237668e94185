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
from compiler.driver.build_vm import compile as vm_compile
from compiler.errors import CompilerError
from compiler.frontend.onnx import from_onnx
from compiler.frontend.onnx_ops.common import onnx_dtype
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime.specialised import TensorSpec

__all__ = ["onnx_signature", "OnnxSpecialiser", "needs_vm", "POLICIES"]

# dynamic= of compiler.load: "specialize" builds static modules per input-shape signature
# (the VM only for programs that need it); "vm" compiles one VM program for every shape
POLICIES = ("specialize", "vm")


def onnx_signature(model, pins: Mapping[str, Sequence[int]] | None = None
                   ) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """(input specs, output specs) of an ONNX model's graph: dim_value -> int, dim_param ->
    its name, neither -> None; `pins` (compiler.load's shape=) fixes whole inputs."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    pins = dict(pins or {})
    inputs = [v for v in graph.input if v.name not in initializers]
    names = [v.name for v in inputs]
    for name, dims in pins.items():
        if name not in names:
            raise CompilerError(f"shape= names {name!r}, which is not a graph input; the "
                                f"inputs are {names}")
    specs = []
    for value in inputs:
        spec = _spec(value, "graph input")
        if value.name in pins:
            dims = tuple(int(d) for d in pins[value.name])
            if spec.shape is not None and len(dims) != len(spec.shape):
                raise CompilerError(f"shape= gives input {value.name!r} {len(dims)} dims, the "
                                    f"model declares {spec.shape_text()}")
            spec = TensorSpec(spec.name, dims, spec.dtype)
        specs.append(spec)
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
        with PassContext(opt_level=self.opt_level):
            if needs_vm(mod):
                return vm_compile(mod, target=self.target, params=params)
            return build(mod, target=self.target, params=params)

    def symbolic(self, pins: Mapping[str, Sequence[int]] | None = None):
        """One VM program for every shape (dynamic="vm"): the model imported with its
        symbolic dims, the VM's kernels specialising themselves per shape."""
        mod, params = from_onnx(self.model, shape=dict(pins) if pins else None)
        with PassContext(opt_level=self.opt_level):
            return vm_compile(mod, target=self.target, params=params)
