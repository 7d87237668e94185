"""The build driver: relay.build's pipeline (passes, lowering, compiling, graph codegen), the
build cache and the compile-time breakdown."""
