"""relay.op.dyn.nn: pad and upsampling with tensor widths and scales."""
from compiler.op.dyn import pad, upsampling  # noqa: F401

__all__ = ["pad", "upsampling"]
