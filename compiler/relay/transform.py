"""relay.transform: the pass infrastructure plus the Relay passes, as tvm.relay.transform.

The pass factories other than InferType live in compiler.passes.<module>; they are imported
on first access (module __getattr__), so importing relay does not load every pass.
"""
from __future__ import annotations

import importlib

from compiler.transform import (FunctionPass, ModulePass, Pass, PassContext, PassInfo,  # noqa: F401
                                PassInstrument, PassTimingInstrument, PrintIR, Sequential,
                                function_pass, module_pass, pass_instrument, register_pass,
                                register_pass_config)
from compiler.transform.pass_infra import BUILTIN_PASS_MODULES
from compiler.passes.infer_type import InferType, InferTypeLocal, infer_type_local  # noqa: F401

_LAZY = {name: module for name, module in BUILTIN_PASS_MODULES.items()
         if module.startswith("compiler.passes.")}
_LAZY["ToANormalFormExpr"] = "compiler.passes.to_anf"
_LAZY["ForwardFoldScaleAxis"] = "compiler.passes.forward_fold_scale_axis"
_LAZY["BackwardFoldScaleAxis"] = "compiler.passes.backward_fold_scale_axis"
_LAZY["AnnotateSpans"] = "compiler.passes.annotate_spans"


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'relay.transform' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
