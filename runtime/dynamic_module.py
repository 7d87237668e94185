"""A model with dynamic axes exported for specialisation at load (`relayjit compile` of one).

Static kernels are only as good as the shapes they were built for, and the shapes of a
dynamic model are known only when it runs; so its artefact carries the model itself (the ONNX
bytes, weights inside) with the options to build it: opt_level, the target string and the
CPU it names (checked against this host at load, as for any module), and the input shapes
the compile pinned. compiler.load, `relayjit run` and `relayjit serve` build a static module
per input-shape signature from it (runtime.specialised), each through the build cache.

The file is the module container of runtime.export with "executor": "dynamic" in its
metadata: section 0 holds the model bytes, the params and object-file sections are empty.
Every field is checked on load (runtime.load_module); the model bytes are the compiler's to
parse, which refuses tensors stored outside the file (an artefact must not read other
files).
"""
from __future__ import annotations

import os

from .export import ModuleContents, write_sections
from .target import TargetInfo

__all__ = ["DynamicModule", "SOURCE_KINDS"]

SOURCE_KINDS = ("onnx",)
_MAX_TARGET_CHARS = 1000


class DynamicModule:
    """The model bytes and how to build them (see the module docstring)."""

    def __init__(self, source: bytes, source_kind: str, opt_level: int, target: str,
                 target_info: TargetInfo, shape: dict[str, tuple[int, ...]] | None = None
                 ) -> None:
        self.source = bytes(source)
        self.source_kind = source_kind
        self.opt_level = opt_level
        self.target = target
        self.target_info = target_info
        self.shape = dict(shape or {})
        _check_fields(self.source_kind, self.opt_level, self.target,
                      {k: list(v) for k, v in self.shape.items()})

    @classmethod
    def from_contents(cls, contents: ModuleContents) -> DynamicModule:
        """The module of a checked container whose metadata says "executor": "dynamic";
        ValueError naming the field that is wrong."""
        meta = contents.meta
        if contents.objects or len(contents.params_blob):
            raise ValueError("a dynamic module holds no object code and no params")
        if not contents.code:
            raise ValueError("a dynamic module's model section is empty")
        for key in ("source", "opt_level", "target", "shape"):
            if key not in meta:
                raise ValueError(f"metadata field {key!r} is missing")
        shape = meta["shape"]
        _check_fields(meta["source"], meta["opt_level"], meta["target"], shape)
        return cls(contents.code, meta["source"], meta["opt_level"], meta["target"],
                   contents.target, {k: tuple(v) for k, v in shape.items()})

    def export_library(self, path: str | os.PathLike) -> None:
        """Write the artefact; runtime.load_module(path) reads it back."""
        meta = {**self.target_info._asdict(),  # the CPU the specialisations are built for
                "executor": "dynamic", "source": self.source_kind, "opt_level": self.opt_level,
                "target": self.target, "shape": {k: list(v) for k, v in self.shape.items()}}
        write_sections(path, self.source, b"", None, "default", meta)

    def __repr__(self) -> str:
        return (f"DynamicModule({self.source_kind}, {len(self.source)} bytes, opt_level="
                f"{self.opt_level}, target={self.target!r})")


def _check_fields(source: object, opt_level: object, target: object, shape: object) -> None:
    if source not in SOURCE_KINDS:
        raise ValueError(f"metadata field 'source' is {source!r:.60}, expected one of "
                         f"{list(SOURCE_KINDS)}")
    if type(opt_level) is not int or not 0 <= opt_level <= 3:
        raise ValueError(f"metadata field 'opt_level' is {opt_level!r:.60}, expected 0 to 3")
    if not isinstance(target, str) or not target or len(target) > _MAX_TARGET_CHARS:
        raise ValueError(f"metadata field 'target' is {target!r:.60}, expected a target "
                         f"string of at most {_MAX_TARGET_CHARS} characters")
    if not isinstance(shape, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and
            all(type(d) is int and d >= 0 for d in v) for k, v in shape.items()):
        raise ValueError(f"metadata field 'shape' is {shape!r:.80}, expected "
                         "{input name: [dims >= 0]}")
