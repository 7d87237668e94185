"""The strategy registry: implementations, workloads, the choice of one for a call.

An op's strategy function (registered on the op as FTVMStrategy) looks at a call (CallInfo:
attrs, argument types, which arguments are constants) and the build's CodegenOptions, and
returns an OpStrategy: the implementations that can compute it, each with the workload it is
configured for, the compute glue and a priority. `select` takes the highest priority and
configures it (`configure`: the implementation's default configuration for the workload and
target, with the options' schedule_config overrides as given fields).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from codegen import te
from codegen.options import CodegenOptions
from codegen.schedules.config import ScheduleConfig
from compiler.errors import CompilerError
from compiler.ir.types import TensorType, is_dynamic_type
from ..registry import get_def

__all__ = ["Implementation", "Workload", "CallInfo", "OpStrategy", "Choice", "STRATEGY",
           "register_strategy", "select", "configure", "compute_with_strategy",
           "implementations"]

STRATEGY = "FTVMStrategy"  # the op attribute holding a strategy function (TVM's name)

# compute(inputs, attrs, out_type, options, config) -> te.Tensor
Compute = Callable[..., te.Tensor]


@dataclass(frozen=True)
class Workload:
    """What an implementation is chosen and configured for: a kind ("conv2d_nchw", "dense",
    ...) and the fields that decide its code (shapes, dtypes, attributes, the weight's form).
    Hashable; key() is its canonical JSON (what tuning records will name)."""

    kind: str
    fields: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, kind: str, **fields: Any) -> Workload:
        return cls(kind, tuple(sorted((k, _frozen(v)) for k, v in fields.items())))

    def __getitem__(self, name: str) -> Any:
        for key, value in self.fields:
            if key == name:
                return value
        raise KeyError(f"workload {self.kind} has no field {name!r}")

    def key(self) -> str:
        return json.dumps([self.kind, dict(self.fields)], sort_keys=True)


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


@dataclass(frozen=True)
class Implementation:
    """A way to compute a workload kind: its name (records and overrides name it), its
    configuration type and default configuration (resolve(workload, options, given) -> a
    resolved config keeping `given`'s fields), and the weight layout a configuration implies
    (weight_layout(workload, config) -> a layout the passes pack constants into, or None)."""

    name: str
    config_type: type
    resolve: Callable[[Workload, CodegenOptions, ScheduleConfig], ScheduleConfig]
    weight_layout: Callable[[Workload, ScheduleConfig], Any] | None = None


_IMPLEMENTATIONS: dict[str, Implementation] = {}


def implementation(name: str, config_type: type, resolve, weight_layout=None
                   ) -> Implementation:
    """Declare an implementation (once per name)."""
    if name in _IMPLEMENTATIONS:
        raise CompilerError(f"implementation {name!r} is declared twice")
    impl = Implementation(name, config_type, resolve, weight_layout)
    _IMPLEMENTATIONS[name] = impl
    return impl


def implementations() -> dict[str, Implementation]:
    """Every declared implementation by name."""
    return dict(_IMPLEMENTATIONS)


@dataclass(frozen=True)
class CallInfo:
    """A call as a strategy sees it: attrs, argument and result types, and the indices of
    the arguments that are constants (AlterOpLayout asks with its constant weights; the
    lowering with none: a kernel's arguments are its parameters)."""

    op: str
    attrs: Any
    arg_types: tuple
    out_type: Any
    constants: frozenset = frozenset()

    def tensor(self, i: int) -> TensorType | None:
        ty = self.arg_types[i] if i < len(self.arg_types) else None
        return ty if isinstance(ty, TensorType) else None


@dataclass
class _Candidate:
    implementation: Implementation
    workload: Workload
    compute: Compute | None
    plevel: int
    facts: dict


@dataclass
class OpStrategy:
    """The implementations that can compute one call (TVM's OpStrategy): add() each with its
    workload, compute glue (None: it needs the call rewritten first, as Winograd needs its
    weight transformed), priority (plevel; the default configuration's heuristics may lower
    it where another implementation is expected to win) and facts: configuration fields the
    call's arguments fix (a packed weight's block), which no override or record can change."""

    candidates: list = field(default_factory=list)

    def add(self, impl: Implementation, workload: Workload, compute: Compute | None,
            plevel: int = 10, facts: dict | None = None) -> None:
        self.candidates.append(_Candidate(impl, workload, compute, plevel, dict(facts or {})))


@dataclass(frozen=True)
class Choice:
    """The implementation selected for a call, its workload and configuration."""

    implementation: Implementation
    workload: Workload
    config: ScheduleConfig
    compute: Compute | None

    def weight_layout(self) -> Any:
        """The layout the configuration reads its weight in (None: the op's own)."""
        layout = self.implementation.weight_layout
        return None if layout is None else layout(self.workload, self.config)

    def key(self) -> str:
        """Implementation, workload and configuration as canonical JSON."""
        return json.dumps([self.implementation.name, json.loads(self.workload.key()),
                           self.config.to_json()], sort_keys=True)


def register_strategy(*ops: str):
    """Decorator: fn(call: CallInfo, options) -> OpStrategy | None is the strategy of ops."""
    def decorate(fn):
        for op in ops:
            get_def(op).set_attr(STRATEGY, fn)
        return fn
    return decorate


def configure(impl: Implementation, workload: Workload, options: CodegenOptions,
              facts: dict | None = None) -> ScheduleConfig:
    """The implementation's configuration for the workload on the options' target: its
    default, with the options' schedule_config overrides for it and then the facts as given
    fields."""
    given = impl.config_type().with_fields(options.overrides(impl.name),
                                           f"schedule_config[{impl.name!r}]")
    if facts:
        given = given.with_fields(facts, impl.name)
    return impl.resolve(workload, options, given)


def select(call: CallInfo, options: CodegenOptions) -> Choice | None:
    """The implementation (and its configuration) for a call, or None when the op has no
    strategy or none of its implementations applies (the op's generic compute rule runs).
    Every implementation is a vectorised schedule: without vectors (options.vectorize
    False) none applies. A call with dynamic (Any) dims has no workload either (the VM
    specialises the kernel at concrete shapes, where a strategy applies again)."""
    if not options.vectorize or not options.strategies or is_dynamic_type(call.out_type) or \
            any(is_dynamic_type(t) for t in call.arg_types):
        return None
    fn = get_def(call.op).get_attr(STRATEGY)
    strategy = fn(call, options) if fn is not None else None
    if strategy is None or not strategy.candidates:
        return None
    best = max(strategy.candidates, key=lambda c: c.plevel)  # the first of equals
    config = configure(best.implementation, best.workload, options, best.facts)
    return Choice(best.implementation, best.workload, config, best.compute)


def compute_with_strategy(call: CallInfo, inputs: list, options: CodegenOptions):
    """The te tensor(s) of the call through its selected implementation, or None (no
    strategy, or none applies: lower with the op's compute rule)."""
    choice = select(call, options)
    if choice is None:
        return None
    if choice.compute is None:
        raise CompilerError(f"{call.op}: implementation {choice.implementation.name} needs "
                            f"the call rewritten first (AlterOpLayout)")
    return choice.compute(inputs, call.attrs, call.out_type, options, choice.config)
