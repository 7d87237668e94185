"""SqueezeNet 1.0 and 1.1 (tvm.relay.testing.squeezenet): fire modules."""
from __future__ import annotations

from compiler.analysis import free_vars
from compiler.ir.expr import Function, var
from compiler.op import nn
from compiler.op.transform import concatenate

from . import layers
from .init import create_workload

__all__ = ["get_net", "get_workload"]


def _conv_relu(data, in_channels, channels, kernel, name, dtype, strides=(1, 1), padding=(0, 0)):
    out = layers.conv2d(data, in_channels=in_channels, channels=channels,
                        kernel_size=(kernel, kernel), strides=strides, padding=padding,
                        dtype=dtype, name=name)
    out = nn.bias_add(out, var(name + "_bias", shape=(channels,), dtype=dtype))
    return nn.relu(out)


def _fire(data, in_channels, squeeze, expand, prefix, dtype):
    """Squeeze with a 1x1 conv, then expand with 1x1 and 3x3 convs side by side."""
    out = _conv_relu(data, in_channels, squeeze, 1, prefix + "_input", dtype)
    left = _conv_relu(out, squeeze, expand, 1, prefix + "_left", dtype)
    right = _conv_relu(out, squeeze, expand, 3, prefix + "_right", dtype, padding=(1, 1))
    return concatenate((left, right), axis=1)


def _max_pool(data):
    return nn.max_pool2d(data, pool_size=(3, 3), strides=(2, 2))


def get_net(batch_size, image_shape, num_classes, version, dtype):
    """The network; version "1.0" or "1.1" (1.1 has a smaller stem and pools earlier)."""
    if version not in ("1.0", "1.1"):
        raise ValueError(f"squeezenet: version must be '1.0' or '1.1', got {version!r}")
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    stem, kernel = (96, 7) if version == "1.0" else (64, 3)
    out = _conv_relu(data, image_shape[0], stem, kernel, "conv1", dtype, strides=(2, 2))
    out = _max_pool(out)
    # (squeeze, expand) per fire module; "pool" marks a max pool
    if version == "1.0":
        plan = [(16, 64), (16, 64), (32, 128), "pool", (32, 128), (48, 192), (48, 192),
                (64, 256), "pool", (64, 256)]
    else:
        plan = [(16, 64), (16, 64), "pool", (32, 128), (32, 128), "pool", (48, 192),
                (48, 192), (64, 256), (64, 256)]
    channels, index = stem, 2
    for step in plan:
        if step == "pool":
            out = _max_pool(out)
            continue
        squeeze, expand = step
        out = _fire(out, channels, squeeze, expand, f"fire{index}", dtype)
        channels, index = 2 * expand, index + 1
    out = nn.dropout(out, rate=0.5)
    out = _conv_relu(out, channels, num_classes, 1, "conv_final", dtype)
    out = nn.batch_flatten(nn.global_avg_pool2d(out))
    out = nn.softmax(out)
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_classes=1000, version="1.0", image_shape=(3, 224, 224),
                 dtype="float32"):
    """(mod, params) of SqueezeNet `version` with Xavier-initialised weights."""
    return create_workload(get_net(batch_size, image_shape, num_classes, version, dtype))
