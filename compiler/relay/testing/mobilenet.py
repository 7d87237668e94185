"""MobileNet v1 (tvm.relay.testing.mobilenet): depthwise-separable conv blocks."""
from __future__ import annotations

from compiler.analysis import free_vars
from compiler.ir.expr import Function, var
from compiler.op import nn

from . import layers
from .init import create_workload

__all__ = ["conv_block", "separable_conv_block", "mobile_net", "get_workload"]

_BN_EPS = 1e-5


def conv_block(data, name, in_channels, channels, kernel_size=(3, 3), strides=(1, 1),
               padding=(1, 1), epsilon=_BN_EPS, dtype="float32"):
    """conv, batch norm, relu."""
    out = layers.conv2d(data, in_channels=in_channels, channels=channels,
                        kernel_size=kernel_size, strides=strides, padding=padding,
                        dtype=dtype, name=name + "_conv")
    out = layers.batch_norm_infer(out, epsilon=epsilon, num_features=channels, dtype=dtype,
                                  name=name + "_bn")
    return nn.relu(out)


def separable_conv_block(data, name, depthwise_channels, pointwise_channels,
                         kernel_size=(3, 3), downsample=False, padding=(1, 1),
                         epsilon=_BN_EPS, dtype="float32"):
    """Depthwise conv (groups = channels), BN, relu, then a pointwise conv block."""
    strides = (2, 2) if downsample else (1, 1)
    out = layers.conv2d(data, in_channels=depthwise_channels, channels=depthwise_channels,
                        groups=depthwise_channels, kernel_size=kernel_size, strides=strides,
                        padding=padding, dtype=dtype, name=name + "_depthwise_conv1")
    out = layers.batch_norm_infer(out, epsilon=epsilon, num_features=depthwise_channels,
                                  dtype=dtype, name=name + "_bn1")
    out = nn.relu(out)
    return conv_block(out, name + "_pointwise", depthwise_channels, pointwise_channels,
                      kernel_size=(1, 1), padding=(0, 0), epsilon=epsilon, dtype=dtype)


def mobile_net(num_classes=1000, data_shape=(1, 3, 224, 224), dtype="float32", alpha=1.0,
               is_shallow=False, layout="NCHW"):
    """The network: a strided conv, 13 separable blocks (8 when shallow), pool, classifier;
    `alpha` scales every width."""
    if layout != "NCHW":
        raise ValueError(f"mobilenet: only layout 'NCHW' is supported, got {layout!r}")
    width = [int(c * alpha) for c in (32, 64, 128, 256, 512, 1024)]
    blocks = [(width[0], width[1], False), (width[1], width[2], True),
              (width[2], width[2], False), (width[2], width[3], True),
              (width[3], width[3], False), (width[3], width[4], True)]
    if not is_shallow:
        blocks += [(width[4], width[4], False)] * 5
    blocks += [(width[4], width[5], True), (width[5], width[5], False)]
    data = var("data", shape=data_shape, dtype=dtype)
    out = conv_block(data, "conv_block_1", data_shape[1], width[0], strides=(2, 2),
                     dtype=dtype)
    for i, (depthwise, pointwise, downsample) in enumerate(blocks, 1):
        out = separable_conv_block(out, f"separable_conv_block_{i}", depthwise, pointwise,
                                   downsample=downsample, dtype=dtype)
    out = nn.batch_flatten(nn.global_avg_pool2d(out))
    out = layers.dense_add_bias(out, units=num_classes, in_units=width[5], dtype=dtype,
                                name="fc")
    out = nn.softmax(out)
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_classes=1000, image_shape=(3, 224, 224), dtype="float32",
                 layout="NCHW", alpha=1.0, is_shallow=False):
    """(mod, params) of MobileNet with Xavier-initialised weights."""
    net = mobile_net(num_classes, (batch_size, *image_shape), dtype, alpha, is_shallow, layout)
    return create_workload(net)
