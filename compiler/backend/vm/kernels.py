"""Primitive functions -> the executable's kernel entries.

A static-shaped primitive function goes through the same KernelTable as relay.build (same
structural sharing, same names, same PrimFunc), except that concatenations get a kernel: the
VM's memory plan (storage_plan.py) lays their inputs out inside their output where it can
and drops the call, else the kernel copies. Reshape-only functions need no kernel (the
VM reshapes a view). A function whose types contain Any becomes a "symbolic" entry when its
schedule allows a kernel for every size (symbolic.py: compiled now, run by any VM, also one
loaded without a compiler), else a "specialised" one; either way the VM asks the
executable's compile hook, where there is one, for a static kernel at the shapes it meets
(compiler.backend.vm.specialise: the fast path). A reshape-only one needs no kernel (the VM
reshapes a view to the shape its shape program gives).
"""
from __future__ import annotations

from typing import NamedTuple

from codegen.options import CodegenOptions
from compiler.backend.graph_codegen import is_byte_concat
from compiler.backend.kernel_table import KernelTable, kernel_name_for
from compiler.ir.expr import Function
from compiler.ir.structural import structural_equal, structural_hash
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType
from runtime.vm.program import SPECIALISED, STATIC, SYMBOLIC, KernelEntry

from .emitter import NOP
from .symbolic import lower_symbolic
from .value_types import is_dynamic, tensor_types


class KernelArguments(NamedTuple):
    """Per kernel entry: its input count; for static ones, {output argument: the input
    argument it may overwrite} (runtime.library.InPlace); the entries that only concatenate
    their inputs' bytes (the memory plan may lay the inputs out inside the output instead)."""

    num_inputs: dict[int, int]
    in_place: dict[int, dict[int, int]]
    concats: frozenset[int]


class KernelResolver:
    """Kernel entries in order, the PrimFuncs to compile for the static ones, and the Relay
    functions behind the specialised ones."""

    def __init__(self, options: CodegenOptions, mod_name: str = "default",
                 symbolic: bool = True) -> None:
        self.table = KernelTable(mod_name, options, byte_concat=False)
        self.options = options
        self.symbolic = symbolic  # make symbolic kernels where the schedules allow
        self.symbolic_funcs: list = []  # their PrimFuncs
        self.mod_name = mod_name
        self.entries: list[KernelEntry] = []
        self.dynamic: dict[int, Function] = {}  # entry index -> its primitive function
        self.concats: set[int] = set()  # entries that only concatenate their inputs' bytes
        self._by_name: dict[str, int] = {}
        self._dynamic_by_hash: dict[int, list[tuple[Function, int]]] = {}

    @property
    def prim_funcs(self) -> list:
        """The PrimFuncs of the static and symbolic kernels (what jit.build_library
        compiles)."""
        return self.table.prim_funcs + self.symbolic_funcs

    def arguments(self) -> KernelArguments:
        """What the VM's memory plan needs to know of each kernel entry."""
        by_name = {f.name: f for f in self.table.prim_funcs}
        in_place = {}
        for i, e in enumerate(self.entries):
            pairs = by_name[e.name].attrs.get("in_place") if e.kind == STATIC else None
            if pairs:
                in_place[i] = dict(pairs)
        return KernelArguments({i: e.num_inputs for i, e in enumerate(self.entries)},
                               in_place, frozenset(self.concats))

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
            if is_byte_concat(func):
                self.concats.add(self._by_name[name])
        return self._by_name[name]

    def _dynamic(self, func: Function) -> int:
        key = structural_hash(func)
        for other, index in self._dynamic_by_hash.get(key, ()):
            if structural_equal(other, func):
                return index
        index = len(self.entries)
        name = self.table.unique_name(kernel_name_for(func, self.mod_name))
        symbolic = lower_symbolic(func, name, self.options) if self.symbolic else None
        if symbolic is not None:
            self.symbolic_funcs.append(symbolic)
        self.entries.append(KernelEntry(name, SPECIALISED if symbolic is None else SYMBOLIC,
                                        *_counts(func)))
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


def module_kernels(mod, options: CodegenOptions) -> tuple[dict[Function, str], list]:
    """({primitive function: its kernel's name}, the static kernels' PrimFuncs) of a fused
    module, resolved as relay.vm.compile resolves them (no symbolic kernels: what a picture
    or a dump of the program shows)."""
    resolver = KernelResolver(options, symbolic=False)
    names: dict[Function, str] = {}
    for func in mod.functions.values():
        for node in post_order(func.body):
            if isinstance(node, Function) and node.is_primitive and node not in names:
                index = resolver.resolve(node)
                names[node] = NOP if index == NOP else resolver.entries[index].name
    return names, resolver.prim_funcs
