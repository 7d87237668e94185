"""DenseNet (tvm.relay.testing.densenet): dense blocks of concatenated features."""
from __future__ import annotations

from compiler.analysis import free_vars
from compiler.ir.expr import Function, var
from compiler.op import nn
from compiler.op.transform import concatenate

from . import layers
from .init import create_workload

__all__ = ["get_workload"]

# size -> (initial features, growth rate, layers per dense block)
_SPECS = {121: (64, 32, [6, 12, 24, 16]), 161: (96, 48, [6, 12, 36, 24]),
          169: (64, 32, [6, 12, 32, 32]), 201: (64, 32, [6, 12, 48, 32])}


def _bn_relu_conv(data, in_channels, channels, kernel, name, dtype):
    out = layers.batch_norm_infer(data, num_features=in_channels, dtype=dtype, name=name + "_bn")
    pad = kernel // 2
    return layers.conv2d(nn.relu(out), in_channels=in_channels, channels=channels,
                         kernel_size=(kernel, kernel), padding=(pad, pad), dtype=dtype,
                         name=name + "_conv")


def _dense_block(data, in_channels, num_layers, bn_size, growth_rate, name, dtype):
    """Each layer appends growth_rate channels computed from everything before it."""
    features, channels = data, in_channels
    for i in range(num_layers):
        prefix = f"{name}_layer{i + 1}"
        out = _bn_relu_conv(features, channels, bn_size * growth_rate, 1, prefix + "_1", dtype)
        out = _bn_relu_conv(out, bn_size * growth_rate, growth_rate, 3, prefix + "_2", dtype)
        features = concatenate((features, out), axis=1)
        channels += growth_rate
    return features, channels


def _transition(data, in_channels, channels, name, dtype):
    out = _bn_relu_conv(data, in_channels, channels, 1, name, dtype)
    return nn.avg_pool2d(out, pool_size=(2, 2), strides=(2, 2))


def _make_dense_net(num_init_features, growth_rate, block_config, data_shape, data_dtype,
                    bn_size=4, classes=1000):
    """Stem, dense blocks with halving transitions, BN-ReLU, global pool, classifier."""
    data = var("data", shape=data_shape, dtype=data_dtype)
    out = layers.conv2d(data, in_channels=data_shape[1], channels=num_init_features,
                        kernel_size=(7, 7), strides=(2, 2), padding=(3, 3), dtype=data_dtype,
                        name="conv1")
    out = layers.batch_norm_infer(out, num_features=num_init_features, dtype=data_dtype,
                                  name="bn1")
    out = nn.max_pool2d(nn.relu(out), pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    channels = num_init_features
    for i, num_layers in enumerate(block_config):
        out, channels = _dense_block(out, channels, num_layers, bn_size, growth_rate,
                                     f"block{i + 1}", data_dtype)
        if i != len(block_config) - 1:
            out = _transition(out, channels, channels // 2, f"transition{i + 1}", data_dtype)
            channels //= 2
    out = layers.batch_norm_infer(out, num_features=channels, dtype=data_dtype, name="bn_final")
    out = nn.batch_flatten(nn.global_avg_pool2d(nn.relu(out)))
    out = layers.dense_add_bias(out, units=classes, in_units=channels, dtype=data_dtype,
                                name="classifier")
    return Function(free_vars(out), out)


def get_workload(densenet_size=121, classes=1000, batch_size=4, dtype="float32",
                 image_shape=(3, 224, 224)):
    """(mod, params) of DenseNet-densenet_size (121, 161, 169 or 201)."""
    if densenet_size not in _SPECS:
        raise ValueError(f"densenet: densenet_size must be one of {sorted(_SPECS)}, got "
                         f"{densenet_size}")
    num_init_features, growth_rate, block_config = _SPECS[densenet_size]
    net = _make_dense_net(num_init_features, growth_rate, block_config,
                          (batch_size, *image_shape), dtype, classes=classes)
    return create_workload(net)
