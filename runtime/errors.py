"""The runtime's own exception: a kernel reported failure (bad input is ValueError/TypeError)."""
from __future__ import annotations


class KernelError(RuntimeError):
    """A compiled kernel returned a nonzero status."""


class VMError(RuntimeError):
    """The Relay VM could not run a program: a call-depth or call-count limit was reached, the
    program executed Fatal, or a kernel for a shape is neither compiled nor compilable here."""
