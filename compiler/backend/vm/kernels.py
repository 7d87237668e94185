"""Primitive functions -> the executable's kernel entries.

A static-shaped primitive function goes through the same KernelTable as relay.build (same
structural sharing, same names, same PrimFunc), except that concatenations get a kernel: the
VM has no memory plan to lay their inputs out in. Reshape-only functions need no kernel (the
VM reshapes a view). A function whose types contain Any becomes a "specialised" entry: the
VM asks the executable's compile hook for a kernel at the shapes it meets
(compiler.backend.vm.specialise); a reshape-only one needs none (the VM reshapes a view to
the shape its shape program gives).
"""
from __future__ import annotations

from codegen.options import CodegenOptions
from compiler.backend.kernel_table import KernelTable, kernel_name_for
from compiler.ir.expr import Function
from compiler.ir.structural import structural_equal, structural_hash
from compiler.ir.types import TensorType
from runtime.vm.program import SPECIALISED, STATIC, KernelEntry

from .emitter import NOP
from .value_types import is_dynamic, tensor_types


class KernelResolver:
    """Kernel entries in order, the PrimFuncs to compile for the static ones, and the Relay
    functions behind the specialised ones."""

    def __init__(self, options: CodegenOptions, mod_name: str = "default") -> None:
        self.table = KernelTable(mod_name, options, byte_concat=False)
        self.mod_name = mod_name
        self.entries: list[KernelEntry] = []
        self.dynamic: dict[int, Function] = {}  # entry index -> its primitive function
        self._by_name: dict[str, int] = {}
        self._dynamic_by_hash: dict[int, list[tuple[Function, int]]] = {}

    @property
    def prim_funcs(self) -> list:
        """The PrimFuncs of the static kernels (what jit.build_library compiles)."""
        return self.table.prim_funcs

    def resolve(self, func: Function) -> int | str:
        """The entry index for a primitive function, or NOP for a reshape-only one."""
        if is_dynamic(func):
            return NOP if _reshapes_first_input(func) else self._dynamic(func)
        name = self.table.add(func)
        if name == NOP:
            return NOP
        if name not in self._by_name:
            self._by_name[name] = len(self.entries)
            self.entries.append(KernelEntry(name, STATIC, *_counts(func)))
        return self._by_name[name]

    def _dynamic(self, func: Function) -> int:
        key = structural_hash(func)
        for other, index in self._dynamic_by_hash.get(key, ()):
            if structural_equal(other, func):
                return index
        index = len(self.entries)
        base = kernel_name_for(func, self.mod_name)
        taken = {e.name for e in self.entries}
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        self.entries.append(KernelEntry(name, SPECIALISED, *_counts(func)))
        self.dynamic[index] = func
        self._dynamic_by_hash.setdefault(key, []).append((func, index))
        return index


def _reshapes_first_input(func: Function) -> bool:
    """A reshape-only function of dynamic shapes: its result is its first input's bytes under
    the shape its shape program computes (its other inputs, as dyn.reshape's new shape, are
    only read by that program)."""
    ret = func.ret_type or func.body.checked_type
    return int(func.get_attr("relay.reshape_only", 0) or 0) == 1 and \
        isinstance(ret, TensorType) and bool(func.params) and \
        isinstance(func.params[0].checked_type, TensorType)


def _counts(func: Function) -> tuple[int, int]:
    inputs = sum(len(tensor_types(p.checked_type, f"parameter %{p.name_hint}"))
                 for p in func.params)
    outputs = len(tensor_types(func.ret_type or func.body.checked_type, "the result"))
    return inputs, outputs
