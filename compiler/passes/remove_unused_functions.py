"""RemoveUnusedFunctions: drop the global functions no entry function reaches (TVM's pass of
the same name; default entry "main")."""
from __future__ import annotations

from compiler.ir.expr import GlobalVar
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order
from compiler.transform import module_pass, register_pass


def reachable_functions(mod: IRModule, entries: list[str]) -> set[GlobalVar]:
    """The GlobalVars the named entry functions call or mention, transitively."""
    by_name = {gv.name_hint: gv for gv in mod.get_global_vars()}
    work = [by_name[name] for name in entries if name in by_name]
    seen: set[GlobalVar] = set(work)
    while work:
        func = mod[work.pop()]
        for node in post_order(func):
            if isinstance(node, GlobalVar) and node not in seen and node in mod:
                seen.add(node)
                work.append(node)
    return seen


@register_pass
def RemoveUnusedFunctions(entry_functions: list[str] | None = None):
    """Keep the entry functions (["main"] by default) and what they reach."""
    entries = list(entry_functions) if entry_functions is not None else ["main"]
    if not all(isinstance(name, str) for name in entries):
        raise TypeError(f"RemoveUnusedFunctions: entry_functions must be names, got {entries!r}")

    @module_pass(opt_level=1, name="RemoveUnusedFunctions")
    def remove_unused_functions(mod: IRModule, ctx) -> IRModule:
        keep = reachable_functions(mod, entries)
        if len(keep) == len(mod.get_global_vars()):
            return mod
        out = IRModule(attrs=mod.attrs)
        for gv, func in mod.functions.items():
            if gv in keep:
                out[gv] = func
        return out
    return remove_unused_functions
