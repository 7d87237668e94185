"""User tools on top of the relay facade: the onnxruntime-style session (compiler.load), the
`relayjit` command line, the fused-graph picture and the light-model zoo."""
