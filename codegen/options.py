"""CodegenOptions: what codegen builds for and how, decided once at the top and passed down.

The build driver resolves them from the target (relay.build's -mcpu/-mattr), the user's
overrides (RELAYJIT_VECTOR_WIDTH, RELAYJIT_KERNEL_FAMILIES, the PassContext config
"relayjit.schedule_config") and hands them to the passes, the lowering, the schedules and the
JIT as an argument: nothing below the driver reads the environment or a module flag. Every
field changes generated code, so `key()` (all of them) is part of the compile caches' keys.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from runtime.target import TargetInfo, host_info

from .parallel import ParallelPolicy

__all__ = ["CodegenOptions", "VECTOR_WIDTHS"]

VECTOR_WIDTHS = (8, 16)  # floats per micro-kernel vector: AVX2 (ymm) or AVX-512 (zmm)


@dataclass(frozen=True)
class CodegenOptions:
    """The target CPU, the micro-kernels' vector width, kernel families, the parallel policy
    and overrides of the schedules' default configurations (per implementation name, field
    -> value: tests, A/B measurements and, later, tuning records). vectorize False (TVM's
    PassContext config "tir.disable_vectorize"): no vector code at all, no schedule that
    vectorises (the strategy layer selects none), scalar loops and LLVM's vectorisers off.
    strategies False: the strategy layer selects no schedule, every op lowers by its generic
    compute rule (loop nests the same at every size: what a symbolic kernel falls back to
    where a schedule's structure follows a size)."""

    cpu: TargetInfo
    vector_width: int
    kernel_families: bool = True
    parallel: ParallelPolicy = field(default_factory=ParallelPolicy)
    schedule_config: str = "{}"  # canonical JSON {implementation: {field: value}}
    vectorize: bool = True
    strategies: bool = True  # False: no schedule; each op by its generic compute rule

    def __post_init__(self) -> None:
        if not isinstance(self.cpu, TargetInfo):
            raise TypeError(f"CodegenOptions.cpu must be a runtime.target.TargetInfo, got "
                            f"{type(self.cpu).__name__}")
        if self.vector_width not in VECTOR_WIDTHS:
            raise ValueError(f"CodegenOptions.vector_width must be one of {VECTOR_WIDTHS}, "
                             f"got {self.vector_width!r}")

    @classmethod
    def for_cpu(cls, cpu: TargetInfo, vector_width: int | None = None,
                kernel_families: bool = True,
                schedule_config: Mapping[str, Mapping[str, Any]] | None = None,
                parallel: ParallelPolicy | None = None,
                vectorize: bool = True) -> CodegenOptions:
        """Options for `cpu`: its natural vector width (16 floats with AVX-512, else 8)
        unless one is given; schedule_config {implementation: {field: value}}."""
        if vector_width is None:
            vector_width = 16 if "avx512f" in cpu.enabled_features() else 8
        return cls(cpu, vector_width, kernel_families,
                   parallel if parallel is not None else ParallelPolicy(),
                   freeze_schedule_config(schedule_config or {}), vectorize)

    @classmethod
    def host(cls, **kwargs: Any) -> CodegenOptions:
        """Options for this machine's CPU (for_cpu's keywords)."""
        return cls.for_cpu(host_info(), **kwargs)

    @property
    def avx512(self) -> bool:
        """Whether the CPU has AVX-512 (32 vector registers instead of 16)."""
        return "avx512f" in self.cpu.enabled_features()

    def overrides(self, implementation: str) -> dict[str, Any]:
        """The schedule_config field overrides given for an implementation ({} when none)."""
        return dict(json.loads(self.schedule_config).get(implementation, {}))

    def key(self) -> str:
        """Every field as canonical JSON: what the compile caches key generated code on."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, TargetInfo):
                value = list(value)
            elif isinstance(value, ParallelPolicy):
                value = dataclasses.astuple(value)
            out[f.name] = value
        return json.dumps(out, sort_keys=True, default=repr)


def freeze_schedule_config(config: Mapping[str, Mapping[str, Any]]) -> str:
    """{implementation: {field: value}} as canonical JSON (hashable; values must be JSON)."""
    if not isinstance(config, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in config.items()):
        raise TypeError(f"schedule_config must map implementation names to dicts of field "
                        f"overrides, got {config!r}")
    try:
        return json.dumps({k: dict(v) for k, v in config.items()}, sort_keys=True)
    except TypeError as err:
        raise TypeError(f"schedule_config values must be JSON values: {err}") from None
