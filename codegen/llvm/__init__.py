"""LLVM IR emission for PrimFuncs (llvmlite.ir), including a vectorisable math library."""
from __future__ import annotations

from .emit import emit_module

__all__ = ["emit_module"]
