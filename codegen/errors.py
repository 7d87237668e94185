"""Errors raised by the codegen layer: they name the kernel/op and say expected versus got."""
from __future__ import annotations


class CodegenError(Exception):
    """Any failure while building, lowering or compiling loop-nest code."""


class LoweringError(CodegenError):
    """A tensor expression or PrimFunc that cannot be lowered (unsupported op, dtype, shape)."""
