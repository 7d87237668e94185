"""ONNX converters by category; importing this package fills the converter table."""
from . import elementwise, nn, norm, reduce, resize, tensor  # noqa: F401
from . import attention, loss, misc  # noqa: F401
from . import quantize, qlinear, qlinear_ms, rnn, scatter, signal  # noqa: F401
from . import vision  # noqa: F401
from . import bitcast  # noqa: F401
from . import deform  # noqa: F401
from . import flex_attention, ml  # noqa: F401  (non-default domains)
from . import control_flow, optional, sequence  # noqa: F401
from . import training  # noqa: F401  (ai.onnx.preview.training)
from . import loop, select  # noqa: F401
from .common import CONVERTERS, converter, find_converter  # noqa: F401
