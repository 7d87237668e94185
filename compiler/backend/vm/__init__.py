"""The VM compiler's backend half: Relay (fused, typed, A-normal form) -> VM bytecode.

relay.vm.compile (compiler/driver/build_vm.py) runs relay.build's pass pipeline, puts every function
in A-normal form, and hands the module to ModuleCompiler, which emits one VMFunction per
global function and per lifted closure (emitter.py says how each expression becomes
instructions) and asks a KernelResolver (kernels.py) for the kernel of each primitive
function: static ones are lowered through the same KernelTable as relay.build, dynamic ones
(Any dims) are compiled per concrete shape at run time by specialise.py's compile hook.
"""
from __future__ import annotations

from .emitter import FunctionEmitter
from .kernels import KernelResolver
from .module_compiler import ModuleCompiler
from .value_types import is_dynamic, param_type

__all__ = ["FunctionEmitter", "KernelResolver", "ModuleCompiler", "is_dynamic", "param_type"]
