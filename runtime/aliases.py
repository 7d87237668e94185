"""Import paths under TVM's names: `from tvm.runtime.vm import VirtualMachine` becomes
`from compiler.runtime.vm import ...`, so compiler.runtime.vm must be importable as a module.
Registering the real module under the second name in sys.modules makes it so without a copy
(one module object, one class identity)."""
from __future__ import annotations

import sys
from types import ModuleType


def alias_submodules(package: str, modules: dict[str, ModuleType]) -> None:
    """Make `package.<name>` import as modules[name] (the module itself, not a copy)."""
    for name, module in modules.items():
        sys.modules.setdefault(f"{package}.{name}", module)
