"""compiler.passes: one module per Relay pass, each exposing a CapWords factory (InferType()).

Modules are imported on demand (compiler.transform.get_pass, compiler.relay.transform), so a
pass is only loaded when it is used.
"""
