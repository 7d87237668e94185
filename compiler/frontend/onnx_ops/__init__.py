"""ONNX converters by category; importing this package fills the converter table."""
from . import elementwise, nn, reduce, resize, tensor  # noqa: F401
from .common import CONVERTERS, converter, find_converter  # noqa: F401
