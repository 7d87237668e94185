"""Generic code generation: TIR loop nests, tensor expressions, lowering, LLVM emission, JIT."""
from __future__ import annotations

from . import te, tir
from .errors import CodegenError, LoweringError

__all__ = ["te", "tir", "CodegenError", "LoweringError"]
