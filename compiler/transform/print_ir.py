"""PrintIR: a pass that dumps the module to stderr, for looking inside a pipeline."""
from __future__ import annotations

import sys

from .pass_infra import ModulePass, register_pass
from .context import PassInfo


def PrintIR(header: str = "", show_meta_data: bool = False) -> ModulePass:
    """A module pass (opt_level 0) writing `PrintIR(<header>):\\n<module text>` to stderr."""
    def print_ir(mod, ctx):
        sys.stderr.write(f"PrintIR({header}):\n{mod.astext(show_meta_data=show_meta_data)}\n")
        return mod
    return ModulePass(print_ir, PassInfo(0, "PrintIR"))


register_pass(PrintIR)
