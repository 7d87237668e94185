"""The runtime's own exceptions (bad input is ValueError/TypeError): TVMError is the base that
TVM scripts catch (`except tvm.TVMError`); the compiler's CompilerError derives from it too."""
from __future__ import annotations


class TVMError(RuntimeError):
    """Base of the errors relayjit raises for a failed compile or run (TVM's tvm.TVMError)."""


class KernelError(TVMError):
    """A compiled kernel returned a nonzero status."""


class VMError(TVMError):
    """The Relay VM could not run a program: a call-depth or call-count limit was reached, the
    program executed Fatal, or a kernel for a shape is neither compiled nor compilable here."""
