"""BitCast (opset 26): the input's bits read as another element type of the same width."""
from __future__ import annotations

import numpy as np

from .common import converter, onnx_dtype, op


@converter("BitCast", since=26)
def _bitcast(ctx, inputs):
    (x,) = inputs
    src, dst = ctx.dtype(x), onnx_dtype(ctx.attr("to"), ctx.where)
    if np.dtype(src).itemsize != np.dtype(dst).itemsize:
        raise ctx.error(f"BitCast from {src} to {dst}: the element widths differ "
                        f"({np.dtype(src).itemsize} vs {np.dtype(dst).itemsize} bytes)")
    return op("reinterpret", x, dtype=dst)
