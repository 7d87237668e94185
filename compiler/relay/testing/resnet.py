"""ResNet v2 (pre-activation; tvm.relay.testing.resnet), ImageNet and CIFAR variants.

Images taller than 28 get the ImageNet network (4 stages; num_layers 18/34 basic blocks,
50/101/152/200/269 bottlenecks), smaller ones the CIFAR network (3 stages; num_layers
6n+2 basic or 9n+2 >= 164 bottleneck).
"""
from __future__ import annotations

from compiler.analysis import free_vars
from compiler.ir.expr import Function, var
from compiler.op import nn

from . import layers
from .init import create_workload

__all__ = ["residual_unit", "resnet", "get_net", "get_workload"]

_IMAGENET_UNITS = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3],
                   152: [3, 8, 36, 3], 200: [3, 24, 36, 3], 269: [3, 30, 48, 8]}
_BN_EPS = 2e-5


def _bn_relu(data, channels, name, dtype):
    out = layers.batch_norm_infer(data, epsilon=_BN_EPS, num_features=channels, dtype=dtype,
                                  name=name)
    return nn.relu(out)


def _conv(data, in_channels, channels, kernel, stride, name, dtype):
    pad = kernel // 2
    return layers.conv2d(data, in_channels=in_channels, channels=channels,
                         kernel_size=(kernel, kernel), strides=(stride, stride),
                         padding=(pad, pad), dtype=dtype, name=name)


def residual_unit(data, in_channels, num_filter, stride, dim_match, name, bottle_neck=True,
                  dtype="float32"):
    """One pre-activation residual unit: BN-ReLU-conv twice (thrice as a bottleneck) plus
    the shortcut (the input, or a 1x1 conv of the activation when the shape changes)."""
    act1 = _bn_relu(data, in_channels, name + "_bn1", dtype)
    if bottle_neck:
        mid = num_filter // 4
        out = _conv(act1, in_channels, mid, 1, 1, name + "_conv1", dtype)
        out = _conv(_bn_relu(out, mid, name + "_bn2", dtype), mid, mid, 3, stride,
                    name + "_conv2", dtype)
        out = _conv(_bn_relu(out, mid, name + "_bn3", dtype), mid, num_filter, 1, 1,
                    name + "_conv3", dtype)
    else:
        out = _conv(act1, in_channels, num_filter, 3, stride, name + "_conv1", dtype)
        out = _conv(_bn_relu(out, num_filter, name + "_bn2", dtype), num_filter, num_filter, 3,
                    1, name + "_conv2", dtype)
    shortcut = data if dim_match else _conv(act1, in_channels, num_filter, 1, stride,
                                            name + "_sc", dtype)
    return out + shortcut


def resnet(units, num_stages, filter_list, num_classes, data_shape, bottle_neck=True,
           layout="NCHW", dtype="float32"):
    """The network over `data` of data_shape: stem, stages of residual units, classifier."""
    if layout != "NCHW":
        raise ValueError(f"resnet: only layout 'NCHW' is supported, got {layout!r}")
    if len(units) != num_stages:
        raise ValueError(f"resnet: {num_stages} stages need {num_stages} unit counts, got "
                         f"{units}")
    data = var("data", shape=data_shape, dtype=dtype)
    in_channels, height = data_shape[1], data_shape[2]
    out = layers.batch_norm_infer(data, epsilon=_BN_EPS, scale=False,
                                  num_features=in_channels, dtype=dtype, name="bn_data")
    if height <= 32:  # a small image: one 3x3 conv, no pooling
        out = _conv(out, in_channels, filter_list[0], 3, 1, "conv0", dtype)
    else:
        out = layers.conv2d(out, in_channels=in_channels, channels=filter_list[0],
                            kernel_size=(7, 7), strides=(2, 2), padding=(3, 3), dtype=dtype,
                            name="conv0")
        out = _bn_relu(out, filter_list[0], "bn0", dtype)
        out = nn.max_pool2d(out, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    channels = filter_list[0]
    for i in range(num_stages):
        stride = 1 if i == 0 else 2
        out = residual_unit(out, channels, filter_list[i + 1], stride, False,
                            f"stage{i + 1}_unit1", bottle_neck, dtype)
        channels = filter_list[i + 1]
        for j in range(units[i] - 1):
            out = residual_unit(out, channels, channels, 1, True, f"stage{i + 1}_unit{j + 2}",
                                bottle_neck, dtype)
    out = _bn_relu(out, channels, "bn1", dtype)
    out = nn.batch_flatten(nn.global_avg_pool2d(out))
    out = layers.dense_add_bias(out, units=num_classes, in_units=channels, dtype=dtype,
                                name="fc1")
    out = nn.softmax(out)
    return Function(free_vars(out), out)


def get_net(batch_size, num_classes, num_layers=50, image_shape=(3, 224, 224), layout="NCHW",
            dtype="float32", **kwargs):
    """Pick units and filters for num_layers and the image size, then build the network."""
    height = image_shape[1]
    data_shape = (batch_size, *image_shape)
    if height <= 28:
        num_stages = 3
        if (num_layers - 2) % 9 == 0 and num_layers >= 164:
            per_unit, filter_list, bottle_neck = (num_layers - 2) // 9, [16, 64, 128, 256], True
        elif (num_layers - 2) % 6 == 0 and num_layers < 164:
            per_unit, filter_list, bottle_neck = (num_layers - 2) // 6, [16, 16, 32, 64], False
        else:
            raise ValueError(f"resnet: no CIFAR network with num_layers={num_layers} (use "
                             "6n+2, or 9n+2 >= 164)")
        units = [per_unit] * num_stages
    else:
        if num_layers not in _IMAGENET_UNITS:
            raise ValueError(f"resnet: num_layers must be one of {sorted(_IMAGENET_UNITS)} for "
                             f"images taller than 28, got {num_layers}")
        num_stages, units = 4, _IMAGENET_UNITS[num_layers]
        bottle_neck = num_layers >= 50
        filter_list = ([64, 256, 512, 1024, 2048] if bottle_neck
                       else [64, 64, 128, 256, 512])
    return resnet(units, num_stages, filter_list, num_classes, data_shape, bottle_neck, layout,
                  dtype)


def get_workload(batch_size=1, num_classes=1000, num_layers=18, image_shape=(3, 224, 224),
                 layout="NCHW", dtype="float32", **kwargs):
    """(mod, params) of ResNet-num_layers with Xavier-initialised weights."""
    net = get_net(batch_size, num_classes, num_layers, image_shape, layout, dtype, **kwargs)
    return create_workload(net)
