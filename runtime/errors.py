"""The runtime's own exception: a kernel reported failure (bad input is ValueError/TypeError)."""
from __future__ import annotations


class KernelError(RuntimeError):
    """A compiled kernel returned a nonzero status."""
