"""A model with dynamic dims run at static speed: one compiled module per input-shape signature.

A model's inputs are TensorSpecs whose dims are fixed (an int), named symbols ("batch": every
dim of that name, in any input, takes the same value) or free (None). Each call binds the
given arrays to a signature (their concrete shapes, in input order), checked against the
specs before anything is compiled: a wrong rank, a fixed dim that differs, a symbol bound to
two values or a wrong dtype is a ValueError naming the input, the symbolic shape expected
and the shape given. A signature seen before runs its executor straight away (a graph
module's native run loop, or a VM); a new one is handed to `build`, the compiler's side,
which returns a runtime.GraphExecutorFactoryModule (static kernels for exactly those shapes)
or a runtime.vm.Executable (programs with control flow or data-dependent shapes). At most
`max_specializations` executors are kept, least recently used dropped first.

Executors read their params in place (GraphExecutorFactoryModule.create(share_params=True)),
and params equal byte for byte across specialisations are one array (SharedParams): eight
shapes of a BERT encoder hold one copy of its weights, and a new specialisation does not
fault in a fresh copy of them (for BERT-base-sized weights that first touch alone took half
a second). This module needs no compiler: the runtime's serving wrapper runs a
SpecialisedModel built by compiler.load as it runs a static module.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .device import Device, cpu
from .digest import content_digest
from .dynamic_module import DynamicModule
from .factory import GraphExecutorFactoryModule, load_module
from .graph_json import parse_graph
from .memory import ALIGNMENT, aligned_bytes, view_as
from .ndarray import NDArray
from .target import TargetInfo
from .vm.executable import Executable
from .vm.machine import VirtualMachine
from .vm.objects import ADT
from .vm.program import TENSOR

__all__ = ["TensorSpec", "SpecialisedModel", "SharedParams", "bind_signature", "make_runner",
           "module_specs", "load_model", "model_of", "DEFAULT_MAX_SPECIALIZATIONS"]

DEFAULT_MAX_SPECIALIZATIONS = 8  # TorchInductor's recompile limit per frame is 8 too

Dim = Union[int, str, None]
Signature = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class TensorSpec:
    """An input's or output's name, shape and dtype (onnxruntime's NodeArg): each dim an int,
    a symbol's name, or None (any size); shape None when even the rank is unknown."""

    name: str
    shape: tuple[Dim, ...] | None
    dtype: str

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def shape_text(self) -> str:
        """(batch, sequence, 768): ? for a free dim."""
        if self.shape is None:
            return "(unknown rank)"
        inner = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"({inner}{',' if len(self.shape) == 1 else ''})"


def bind_signature(specs: Sequence[TensorSpec], feeds: Mapping[str, Any]
                   ) -> tuple[Signature, list[np.ndarray]]:
    """(the feeds' shapes in spec order, the arrays in spec order), after checking names,
    dtypes and every dim against the specs (see the module docstring)."""
    if not isinstance(feeds, Mapping):
        raise TypeError(f"run: expected the inputs as a dict of name -> array, got "
                        f"{type(feeds).__name__}")
    names = [s.name for s in specs]
    unknown = sorted(set(feeds) - set(names))
    if unknown:
        raise KeyError(f"unknown input(s) {unknown}; the model's inputs are {names}")
    missing = [n for n in names if n not in feeds]
    if missing:
        raise ValueError(f"missing input(s) {missing}; the model takes "
                         + ", ".join(f"{s.name} {s.shape_text()} {s.dtype}" for s in specs))
    bound: dict[str, tuple[int, str]] = {}  # symbol -> (value, the input that set it)
    arrays = []
    for spec in specs:
        value = feeds[spec.name]
        array = value._view() if isinstance(value, NDArray) else np.asarray(value)
        _check_dims(spec, array, bound)
        arrays.append(array)
    return tuple(a.shape for a in arrays), arrays


def _check_dims(spec: TensorSpec, array: np.ndarray, bound: dict[str, tuple[int, str]]) -> None:
    def refuse(why: str) -> ValueError:
        return ValueError(f"input {spec.name!r}: expected shape {spec.shape_text()} dtype "
                          f"{spec.dtype}, got shape {array.shape} dtype {array.dtype.name}: "
                          f"{why}")
    if array.dtype.name != spec.dtype:
        raise refuse(f"the dtype must be {spec.dtype}")
    if spec.shape is None:
        return
    if array.ndim != len(spec.shape):
        raise refuse(f"rank {array.ndim}, the model takes rank {len(spec.shape)}")
    for axis, (dim, size) in enumerate(zip(spec.shape, array.shape)):
        if isinstance(dim, int) and dim != size:
            raise refuse(f"dimension {axis} must be {dim}")
        if isinstance(dim, str):
            value, source = bound.setdefault(dim, (size, spec.name))
            if value != size:
                raise refuse(f"dimension {axis} is {dim!r}, which input {source!r} gives as "
                             f"{value}")


class SharedParams:
    """One array per distinct param content (shape, dtype and bytes) across factories: adopt()
    points a factory's params at the arrays already held for equal ones, and copies the new
    ones into storage on huge pages, as a graph module's own storage is (weights read in
    place from 4 KB pages made a BERT encoder at 8 tokens 11% slower). Weak: an array no
    kept executor reads is freed."""

    def __init__(self) -> None:
        self._arrays: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def adopt(self, factory: GraphExecutorFactoryModule) -> None:
        keys = {name: _content_key(value._view()) for name, value in factory.params.items()}
        arrays = {key: self._arrays.get(key) for key in keys.values()}  # held from here on
        new = {key: factory.params[name]._view() for name, key in keys.items()
               if arrays[key] is None}
        arrays.update(self._on_huge_pages(new))
        for name, key in keys.items():
            factory.params[name] = NDArray(arrays[key])

    def _on_huge_pages(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Copies of `arrays` in one arena (huge pages from 1 MB), kept under their keys."""
        slots = [-(-a.nbytes // ALIGNMENT) * ALIGNMENT for a in arrays.values()]
        arena = aligned_bytes(max(sum(slots), 1), huge_pages=True)
        copies, at = {}, 0
        for (key, array), size in zip(arrays.items(), slots):
            copies[key] = view_as(arena[at:], array.shape, array.dtype)
            np.copyto(copies[key], array)
            self._arrays[key] = copies[key]
            at += size
        return copies


def _content_key(array: np.ndarray) -> str:
    return content_digest([array.reshape(-1).view(np.uint8)],
                          f"{array.dtype.name}{array.shape}".encode())


class _GraphRunner:
    """A static graph module: inputs copied into its storage, outputs copied out."""

    def __init__(self, factory: GraphExecutorFactoryModule, device: Device) -> None:
        self.factory = factory
        self.executor = factory.create(device, share_params=True)

    def run(self, names: Sequence[str], arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        ex = self.executor
        for name, array in zip(names, arrays):
            if name in ex.input_index:  # an input the graph never reads may be compiled away
                ex.set_input(name, array)
        ex.run()
        return [ex.output_array(i).copy() for i in range(len(ex.plan.outputs))]


class _VMRunner:
    """A Relay VM program: main's results, a tuple's fields as separate outputs."""

    def __init__(self, exe: Executable, device: Device) -> None:
        self.exe = exe
        self.vm = VirtualMachine(exe, device)

    def run(self, names: Sequence[str], arrays: Sequence[np.ndarray]) -> list[Any]:
        params = self.exe.function("main").params
        result = self.vm.invoke("main", **{n: a for n, a in zip(names, arrays) if n in params})
        fields = list(result) if isinstance(result, ADT) else [result]
        return [_unwrap(f) for f in fields]


def _unwrap(value: Any) -> Any:
    """NDArray -> numpy array; an ADT (a sequence output) -> a list of them, iteratively."""
    if not isinstance(value, ADT):
        return value.numpy()
    root: list = []
    stack = [(value, root)]
    while stack:
        adt, out = stack.pop()
        for field in adt:
            if isinstance(field, ADT):
                inner: list = []
                out.append(inner)
                stack.append((field, inner))
            else:
                out.append(field.numpy())
    return root


Built = Union[GraphExecutorFactoryModule, Executable]


def make_runner(module: Built, device: Device | None = None):
    """An executor of `module` with run(names, arrays) -> outputs (numpy arrays; a sequence
    output of the VM as a list of them)."""
    if isinstance(module, GraphExecutorFactoryModule):
        return _GraphRunner(module, device or cpu())
    if isinstance(module, Executable):
        return _VMRunner(module, device or cpu())
    raise TypeError(f"expected a GraphExecutorFactoryModule or a VM Executable, got "
                    f"{type(module).__name__}")


def module_specs(module: Built) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """(inputs, outputs) of a built module: a graph module's inputs that are not params, and
    its outputs (output_0, ...), all static; a VM program's tensor parameters (an Any dim is
    None) and no outputs (their shapes are known when it runs)."""
    if isinstance(module, GraphExecutorFactoryModule):
        plan = parse_graph(module.graph_json)
        inputs = [TensorSpec(n, tuple(plan.shapes[e]), plan.dtypes[e])
                  for n, e in zip(plan.input_names, plan.input_entries)
                  if n not in module.params]
        outputs = [TensorSpec(f"output_{i}", tuple(plan.shapes[e]), plan.dtypes[e])
                   for i, e in enumerate(plan.outputs)]
        return inputs, outputs
    main = module.function("main")
    inputs = [TensorSpec(n, tuple(t[1]), t[2]) for n, t in zip(main.params, main.param_types)
              if t[0] == TENSOR]
    if len(inputs) != len(main.params):
        raise ValueError("the VM program's main takes tuples or closures; run it with "
                         "runtime.vm.VirtualMachine")
    return inputs, []


def load_model(path, max_specializations: int = DEFAULT_MAX_SPECIALIZATIONS
               ) -> SpecialisedModel:
    """The SpecialisedModel of a module file, without the compiler (model_of)."""
    return model_of(load_module(path), max_specializations, path)


def model_of(module: Built | DynamicModule,
             max_specializations: int = DEFAULT_MAX_SPECIALIZATIONS, path: Any = "the module"
             ) -> SpecialisedModel:
    """The SpecialisedModel of a loaded module: a graph module (its one static signature)
    or a VM executable (any shape its main accepts). A dynamic artefact needs the compiler
    (compiler.tools.session.load_model) and is refused with that advice."""
    if isinstance(module, DynamicModule):
        raise ValueError(f"{path}: a model with dynamic axes, compiled per input shape when "
                         "run: load it with compiler.load(path) (relayjit serve does)")
    inputs, outputs = module_specs(module)
    lib = module.get_lib() if isinstance(module, GraphExecutorFactoryModule) else module.lib
    build = (lambda shapes: module) if isinstance(module, Executable) else None
    model = SpecialisedModel(inputs, outputs, build, max_specializations,
                             per_shape=build is None,
                             target=lib.target if lib is not None else None)
    model.add(tuple(s.shape for s in inputs), module)
    return model


class SpecialisedModel:
    """Inputs, outputs and one executor per shape signature (see the module docstring).

    build(shapes: {input name: concrete shape}) -> the module for exactly those shapes; with
    per_shape=False every signature runs the one module build returns first (a VM program
    whose kernels specialise themselves). Not thread-safe: one caller at a time, as a graph
    module."""

    def __init__(self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                 build: Callable[[dict[str, tuple[int, ...]]], Built] | None,
                 max_specializations: int = DEFAULT_MAX_SPECIALIZATIONS,
                 per_shape: bool = True, device: Device | None = None,
                 target: TargetInfo | None = None) -> None:
        if isinstance(max_specializations, bool) or not isinstance(max_specializations, int) \
                or max_specializations < 1:
            raise ValueError(f"max_specializations must be an int >= 1, got "
                             f"{max_specializations!r}")
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.names = [s.name for s in self.inputs]
        self.build = build
        self.max_specializations = max_specializations
        self.per_shape = per_shape
        self.device = device or cpu()
        self.target = target  # the CPU its code is built for (None: this host's)
        self.shared_params = SharedParams()
        self._runners: OrderedDict[Signature, Any] = OrderedDict()
        self.builds = self.hits = self.evictions = 0

    def add(self, signature: Signature, module: Built) -> None:
        """Keep `module` as the executor of `signature` (a module built ahead, or loaded)."""
        self._remember(self._key(signature), self._runner(module))

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        """The outputs, in order, for these named inputs."""
        signature, arrays = bind_signature(self.inputs, feeds)
        return self.runner(signature).run(self.names, arrays)

    def runner(self, signature: Signature):
        """The executor of a checked signature: kept, or built now."""
        key = self._key(signature)
        runner = self._runners.get(key)
        if runner is not None:
            self._runners.move_to_end(key)
            self.hits += 1
            return runner
        if self.build is None:
            raise ValueError(f"this model was loaded without a compiler and has no module "
                             f"for the input shapes {self._describe(signature)}; load it "
                             "with compiler.load(path), which compiles new shapes")
        runner = self._runner(self.build(dict(zip(self.names, signature))))
        self.builds += 1
        self._remember(key, runner)
        return runner

    def specializations(self) -> list[dict[str, tuple[int, ...]]]:
        """The signatures kept, least recently used first."""
        return [dict(zip(self.names, key)) for key in self._runners if key is not None]

    def modules(self) -> list[Built]:
        """The modules kept, least recently used first."""
        return [r.factory if isinstance(r, _GraphRunner) else r.exe
                for r in self._runners.values()]

    def _key(self, signature: Signature) -> Signature | None:
        return signature if self.per_shape else None

    def _runner(self, module: Built):
        if isinstance(module, GraphExecutorFactoryModule):
            self.shared_params.adopt(module)
        return make_runner(module, self.device)

    def _remember(self, key, runner) -> None:
        self._runners[key] = runner
        self._runners.move_to_end(key)
        while len(self._runners) > self.max_specializations:
            self._runners.popitem(last=False)
            self.evictions += 1

    def _describe(self, signature: Signature) -> str:
        return ", ".join(f"{n} {s}" for n, s in zip(self.names, signature))
