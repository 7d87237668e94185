"""Schedules written for speed for the anchor ops (dense, batch_matmul/matmul, conv2d,
conv2d_transpose, pooling, depthwise conv, softmax, layer norm).

Each takes the build's CodegenOptions (target CPU, vector width, parallel policy) and its
configuration (a ScheduleConfig subclass: codegen.schedules.config) as arguments, and returns a
`te.extern` tensor whose fcompute accepts an `epilogue` keyword: `epilogue(value, out_indices)
-> value`. codegen.lower fuses an elementwise consumer of such an extern into it (FuseOps
groups: anchor + bias/relu/residual/clip ...), so the consumer is applied while the output
tile is cache-hot instead of in a second pass over memory. Which schedule an op gets, and with
what configuration, is the strategy layer's choice (compiler.op.strategy).
"""
from __future__ import annotations

from .conv2d import conv2d_nchw, conv2d_nchw_packed
from .conv2d_config import Conv2dConfig, conv2d_pack_geometry
from .conv2d_transpose import conv2d_transpose_nchw
from .gemm import batch_matmul, batch_matmul_axes, dense, dense_gemv, dense_packed, matmul
from .gemm_config import GemmConfig, GemvConfig, dense_pack_geometry

__all__ = ["dense", "batch_matmul", "batch_matmul_axes", "matmul", "conv2d_nchw",
           "conv2d_nchw_packed", "conv2d_pack_geometry", "dense_packed", "dense_gemv",
           "dense_pack_geometry", "conv2d_transpose_nchw", "Conv2dConfig", "GemmConfig",
           "GemvConfig"]
