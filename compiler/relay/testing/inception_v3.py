"""Inception v3 (tvm.relay.testing.inception_v3): the stem, then the 7A/7B/7C/7D/7E mixed
blocks whose towers run side by side and are concatenated on channels."""
from __future__ import annotations

from compiler.analysis import free_vars
from compiler.ir.expr import Function, var
from compiler.op import nn
from compiler.op.transform import concatenate

from . import layers
from .init import create_workload

__all__ = ["get_net", "get_workload"]

_BN_EPS = 2e-5 + 1e-12


class _Tower:
    """A chain of conv-BN-ReLU layers named prefix + suffix as TVM names them (suffixes
    "_conv", "_conv_1", ... unless given); `channels` follows the last one's output."""

    def __init__(self, data, channels, dtype, prefix=""):
        self.out, self.channels, self.dtype = data, channels, dtype
        self.prefix, self.count = prefix, 0

    def conv(self, num_filter, kernel=(1, 1), stride=(1, 1), pad=(0, 0), suffix=None):
        if suffix is None:
            suffix = "_conv" if self.count == 0 else f"_conv_{self.count}"
            self.count += 1
        name = self.prefix + suffix
        out = layers.conv2d(self.out, in_channels=self.channels, channels=num_filter,
                            kernel_size=kernel, strides=stride, padding=pad, dtype=self.dtype,
                            name=name + "_conv1")
        out = layers.batch_norm_infer(out, epsilon=_BN_EPS, num_features=num_filter,
                                      dtype=self.dtype, name=name + "_bn")
        self.out, self.channels = nn.relu(out), num_filter
        return self

    def pool(self, kind, kernel=(3, 3), stride=(1, 1), pad=(0, 0)):
        pool_op = nn.avg_pool2d if kind == "avg" else nn.max_pool2d
        self.out = pool_op(self.out, pool_size=kernel, strides=stride, padding=pad)
        return self

    def branch(self, prefix):
        """A new tower starting from this one's output."""
        return _Tower(self.out, self.channels, self.dtype, prefix)


def _concat(towers):
    out = concatenate([t.out for t in towers], axis=1)
    return out, sum(t.channels for t in towers)


def _inception_7a(data, channels, num_1x1, num_3x3_red, num_3x3_1, num_3x3_2, num_5x5_red,
                  num_5x5, pool, proj, name, dtype):
    start = _Tower(data, channels, dtype)
    return _concat([
        start.branch(name + "_conv").conv(num_1x1, suffix=""),
        start.branch(name + "_tower").conv(num_5x5_red).conv(num_5x5, (5, 5), pad=(2, 2)),
        start.branch(name + "_tower_1").conv(num_3x3_red)
             .conv(num_3x3_1, (3, 3), pad=(1, 1)).conv(num_3x3_2, (3, 3), pad=(1, 1)),
        start.branch(name + "_tower_2").pool(pool, pad=(1, 1)).conv(proj),
    ])


def _inception_7b(data, channels, num_3x3, num_d3x3_red, num_d3x3_1, num_d3x3_2, pool, name,
                  dtype):
    start = _Tower(data, channels, dtype)
    return _concat([
        start.branch(name + "_conv").conv(num_3x3, (3, 3), stride=(2, 2), suffix=""),
        start.branch(name + "_tower").conv(num_d3x3_red)
             .conv(num_d3x3_1, (3, 3), pad=(1, 1)).conv(num_d3x3_2, (3, 3), stride=(2, 2)),
        start.branch(name).pool(pool, stride=(2, 2)),
    ])


def _inception_7c(data, channels, num_1x1, num_d7_red, num_d7_1, num_d7_2, num_q7_red,
                  num_q7_1, num_q7_2, num_q7_3, num_q7_4, pool, proj, name, dtype):
    start = _Tower(data, channels, dtype)
    return _concat([
        start.branch(name + "_conv").conv(num_1x1, suffix=""),
        start.branch(name + "_tower").conv(num_d7_red)
             .conv(num_d7_1, (1, 7), pad=(0, 3)).conv(num_d7_2, (7, 1), pad=(3, 0)),
        start.branch(name + "_tower_1").conv(num_q7_red)
             .conv(num_q7_1, (7, 1), pad=(3, 0)).conv(num_q7_2, (1, 7), pad=(0, 3))
             .conv(num_q7_3, (7, 1), pad=(3, 0)).conv(num_q7_4, (1, 7), pad=(0, 3)),
        start.branch(name + "_tower_2").pool(pool, pad=(1, 1)).conv(proj),
    ])


def _inception_7d(data, channels, num_3x3_red, num_3x3, num_d7_3x3_red, num_d7_1, num_d7_2,
                  num_d7_3x3, pool, name, dtype):
    start = _Tower(data, channels, dtype)
    return _concat([
        start.branch(name + "_tower").conv(num_3x3_red).conv(num_3x3, (3, 3), stride=(2, 2)),
        start.branch(name + "_tower_1").conv(num_d7_3x3_red)
             .conv(num_d7_1, (1, 7), pad=(0, 3)).conv(num_d7_2, (7, 1), pad=(3, 0))
             .conv(num_d7_3x3, (3, 3), stride=(2, 2)),
        start.branch(name).pool(pool, stride=(2, 2)),
    ])


def _inception_7e(data, channels, num_1x1, num_d3_red, num_d3_1, num_d3_2, num_3x3_d3_red,
                  num_3x3, num_3x3_d3_1, num_3x3_d3_2, pool, proj, name, dtype):
    start = _Tower(data, channels, dtype)
    d3 = start.branch(name + "_tower").conv(num_d3_red)
    d3x3 = start.branch(name + "_tower_1").conv(num_3x3_d3_red).conv(num_3x3, (3, 3),
                                                                       pad=(1, 1))
    return _concat([
        start.branch(name + "_conv").conv(num_1x1, suffix=""),
        d3.branch(name + "_tower").conv(num_d3_1, (1, 3), pad=(0, 1), suffix="_mixed_conv"),
        d3.branch(name + "_tower").conv(num_d3_2, (3, 1), pad=(1, 0), suffix="_mixed_conv_1"),
        d3x3.branch(name + "_tower_1").conv(num_3x3_d3_1, (1, 3), pad=(0, 1),
                                            suffix="_mixed_conv"),
        d3x3.branch(name + "_tower_1").conv(num_3x3_d3_2, (3, 1), pad=(1, 0),
                                            suffix="_mixed_conv_1"),
        start.branch(name + "_tower_2").pool(pool, pad=(1, 1)).conv(proj),
    ])


def get_net(batch_size, num_classes, image_shape, dtype):
    """The network over `data` (at least 75x75; 299x299 is the published size)."""
    if min(image_shape[1:]) < 75:
        raise ValueError(f"inception_v3: images must be at least 75x75, got {image_shape}")
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    stem = (_Tower(data, image_shape[0], dtype)
            .conv(32, (3, 3), stride=(2, 2), suffix="conv")
            .conv(32, (3, 3), suffix="conv_1")
            .conv(64, (3, 3), pad=(1, 1), suffix="conv_2")
            .pool("max", stride=(2, 2))
            .conv(80, (1, 1), suffix="conv_3")
            .conv(192, (3, 3), suffix="conv_4")
            .pool("max", stride=(2, 2)))
    out, ch = stem.out, stem.channels
    out, ch = _inception_7a(out, ch, 64, 64, 96, 96, 48, 64, "avg", 32, "mixed", dtype)
    out, ch = _inception_7a(out, ch, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_1", dtype)
    out, ch = _inception_7a(out, ch, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_2", dtype)
    out, ch = _inception_7b(out, ch, 384, 64, 96, 96, "max", "mixed_3", dtype)
    out, ch = _inception_7c(out, ch, 192, 128, 128, 192, 128, 128, 128, 128, 192, "avg", 192,
                            "mixed_4", dtype)
    for name in ("mixed_5", "mixed_6"):
        out, ch = _inception_7c(out, ch, 192, 160, 160, 192, 160, 160, 160, 160, 192, "avg",
                                192, name, dtype)
    out, ch = _inception_7c(out, ch, 192, 192, 192, 192, 192, 192, 192, 192, 192, "avg", 192,
                            "mixed_7", dtype)
    out, ch = _inception_7d(out, ch, 192, 320, 192, 192, 192, 192, "max", "mixed_8", dtype)
    out, ch = _inception_7e(out, ch, 320, 384, 384, 384, 448, 384, 384, 384, "avg", 192,
                            "mixed_9", dtype)
    out, ch = _inception_7e(out, ch, 320, 384, 384, 384, 448, 384, 384, 384, "max", 192,
                            "mixed_10", dtype)
    out = nn.batch_flatten(nn.global_avg_pool2d(out))
    out = layers.dense_add_bias(out, units=num_classes, in_units=ch, dtype=dtype, name="fc1")
    out = nn.softmax(out)
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_classes=1000, image_shape=(3, 299, 299), dtype="float32"):
    """(mod, params) of Inception v3 with Xavier-initialised weights."""
    return create_workload(get_net(batch_size, num_classes, image_shape, dtype))
