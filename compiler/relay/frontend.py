"""relay.frontend: model importers (`relay.frontend.from_onnx`), as in TVM."""
from compiler.frontend import from_onnx  # noqa: F401

__all__ = ["from_onnx"]
