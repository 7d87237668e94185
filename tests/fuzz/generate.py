"""generate(seed): one seeded random, valid-by-construction ONNX case.

A case is a model of 3-15 nodes, its input feeds, and per value the error bound the oracle
uses as tolerance (stored in the model's metadata_props as "fuzz.err", so a saved repro
carries it). `validate` runs onnx.checker (full check) and strict shape inference with
every tracked intermediate declared, so a shape the generator got wrong is caught here
rather than blamed on an engine.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from . import ops_control, ops_math, ops_nn, ops_quant, ops_reduce, ops_shape
from .graph import GraphBuilder, tensor_type

MIN_OPSET = 11
MAX_OPSET = onnx.defs.onnx_opset_version()
TEMPLATES = {**ops_math.TEMPLATES, **ops_reduce.TEMPLATES, **ops_shape.TEMPLATES,
             **ops_nn.TEMPLATES, **ops_control.TEMPLATES, **ops_quant.TEMPLATES}
ERR_KEY = "fuzz.err"


@dataclass
class Case:
    """A generated (or loaded) test case."""

    seed: int
    model: onnx.ModelProto
    feeds: dict
    ops: list = field(default_factory=list)
    profile: str = "small"
    full_model: onnx.ModelProto | None = None  # every intermediate declared, for validate

    @property
    def opset(self) -> int:
        return next(o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx"))

    def errors(self) -> dict:
        return errors_of(self.model)


def errors_of(model: onnx.ModelProto) -> dict:
    """value name -> estimated absolute error (see graph.py), from the model's metadata."""
    for prop in model.metadata_props:
        if prop.key == ERR_KEY:
            return json.loads(prop.value)
    return {}


def generate(seed: int, large: float = 0.12) -> Case:
    """The case for seed; `large` is the chance of the big-conv profile."""
    rng = np.random.default_rng(seed)
    opset = int(rng.integers(MIN_OPSET, MAX_OPSET + 1))
    b = GraphBuilder(rng, opset)
    profile = "large" if rng.random() < large else "small"
    target = int(rng.integers(3, 16))
    if profile == "large":
        ops_nn.large_start(b)
    templates = list(TEMPLATES)
    weights = np.array([TEMPLATES[t] for t in templates], dtype=float)
    weights /= weights.sum()
    attempts = 0
    while len(b.nodes) < target and attempts < 400:
        attempts += 1
        template = templates[int(rng.choice(len(templates), p=weights))]
        if not b.room(1):
            break
        template(b)
    _prune_inputs(b)
    outputs = b.outputs()
    model = b.model(outputs)
    errs = {v.name: v.err for v in b.values if not v.const}
    helper.set_model_props(model, {ERR_KEY: json.dumps(errs)})
    full = onnx.ModelProto()
    full.CopyFrom(model)
    _declare_intermediates(full, b)
    # intermediate value_info half the time: real exporters write it, and from_onnx must not
    # be confused by it
    if rng.random() < 0.5:
        model = full
    return Case(seed, model, dict(b.feeds), list(b.ops), profile, full)


def _prune_inputs(b: GraphBuilder) -> None:
    """Graph inputs a failed template created but no node uses are dropped."""
    unused = [v for v in b.inputs if v.uses == 0]
    for v in unused:
        b.inputs.remove(v)
        b.values.remove(v)
        b.feeds.pop(v.name)


def _declare_intermediates(model: onnx.ModelProto, b: GraphBuilder) -> None:
    declared = {v.name for v in model.graph.output} | {v.name for v in model.graph.input}
    for v in b.values:
        if not v.const and v.name not in declared:
            model.graph.value_info.append(
                helper.make_tensor_value_info(v.name, tensor_type(v.dtype), v.shape))


def validate(case: Case) -> None:
    """Raise when the model is not valid ONNX or its declared shapes disagree with inference."""
    model = case.full_model or case.model
    onnx.checker.check_model(model, full_check=True)
    # strict mode raises where an inferred shape or type differs from a declared one
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                                 data_prop=True)
    declared = {v.name: v for v in list(model.graph.output) + list(model.graph.value_info)}
    for info in list(inferred.graph.output) + list(inferred.graph.value_info):
        if info.name not in declared:
            continue
        got = _shape_of(info)
        want = _shape_of(declared[info.name])
        if got is not None and want is not None and got != want:
            raise AssertionError(f"output {info.name}: declared {want}, inferred {got}")


def _shape_of(info) -> tuple | None:
    t = info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return tuple(dims)


def describe(model: onnx.ModelProto) -> str:
    """A compact one-line-per-node listing: op(input shapes) attrs -> output shapes."""
    types = {}
    for info in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        t = info.type.tensor_type
        dt = helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "?"
        types[info.name] = f"{list(_shape_of(info) or ())}:{dt}"
    for init in model.graph.initializer:
        arr = onnx.numpy_helper.to_array(init)
        types[init.name] = (f"const{list(arr.shape)}:{arr.dtype.name}" if arr.size > 8 else
                            f"const{arr.tolist()}:{arr.dtype.name}")
    lines = []
    for node in model.graph.node:
        attrs = ", ".join(f"{a.name}={helper.get_attribute_value(a)!r}" for a in node.attribute)
        attrs = attrs.replace("b'", "'")
        ins = ", ".join(f"{n}{'=' + types[n] if n in types else ''}" if n else "''"
                        for n in node.input)
        outs = ", ".join(f"{n}{'=' + types[n] if n in types else ''}" for n in node.output)
        lines.append(f"{node.op_type}({ins}){' {' + attrs + '}' if attrs else ''} -> {outs}")
    return "\n".join(lines)
