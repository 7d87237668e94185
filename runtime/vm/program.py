"""What an executable is made of: functions of bytecode and the kernel entries they call."""
from __future__ import annotations

from typing import NamedTuple

STATIC = "static"
SPECIALISED = "specialised"
SYMBOLIC = "symbolic"
KERNEL_KINDS = (STATIC, SPECIALISED, SYMBOLIC)

# A parameter's type, for checking what invoke is given: ("tensor", dims, dtype) with None for
# an Any dim, ("tuple", (field types...)), or ("any",) for values not checked (closures).
TENSOR, TUPLE, ANY = "tensor", "tuple", "any"


class VMFunction(NamedTuple):
    """One function's bytecode: its parameters are registers 0..len(params)-1."""

    name: str
    params: tuple[str, ...]
    param_types: tuple  # per parameter: TENSOR, TUPLE or ANY, as described above
    num_registers: int
    code: tuple[tuple, ...]


class KernelEntry(NamedTuple):
    """A kernel InvokePacked calls: its name (in `lib` when static), kind and arguments."""

    name: str
    kind: str
    num_inputs: int
    num_outputs: int

    @property
    def arity(self) -> int:
        return self.num_inputs + self.num_outputs


