"""compiler.backend: from fused Relay to runnable artifacts (lowering bridge, graph codegen)."""
