"""AnnotateSpans (TVM's pass): every node gets a span, its position in the module's printed
text, by printing the module and parsing it back (as TVM does, under the source name
"GeneratedSource"); error messages and tools can then point into that text."""
from __future__ import annotations

from compiler.ir.module import IRModule
from compiler.ir.printer import meta_table
from compiler.ir.parser import parse
from compiler.transform import module_pass, register_pass

SOURCE_NAME = "GeneratedSource"


@register_pass
def AnnotateSpans():  # noqa: N802  (TVM's pass name)
    """Print the module, parse it back: a structurally equal module whose nodes carry spans."""

    @module_pass(opt_level=0, name="AnnotateSpans")
    def annotate_spans(mod: IRModule, ctx) -> IRModule:
        # mod.astext(), header included, is the text the spans point into (as TVM's)
        return parse(mod.astext(), SOURCE_NAME, init_meta_table=meta_table(mod))

    return annotate_spans
