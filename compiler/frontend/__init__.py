"""Model importers: from_onnx turns an ONNX model into a Relay IRModule and params."""
from .onnx import from_onnx  # noqa: F401
