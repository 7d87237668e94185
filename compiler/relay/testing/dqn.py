"""The Nature DQN network (tvm.relay.testing.dqn): three convs and two dense layers."""
from __future__ import annotations

from compiler.analysis import free_vars
from compiler.ir.expr import Function, var
from compiler.op import nn

from . import layers
from .init import create_workload

__all__ = ["get_net", "get_workload"]


def get_net(batch_size, num_actions=18, image_shape=(4, 84, 84), dtype="float32",
            layout="NCHW"):
    """The DQN as a relay Function: conv 8x8/4, 4x4/2, 3x3/1 (relu each), dense 512, actions."""
    if layout != "NCHW":
        raise ValueError(f"dqn: only layout 'NCHW' is supported, got {layout!r}")
    channels = image_shape[0]
    out = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    for i, (filters, kernel, stride) in enumerate(((32, 8, 4), (64, 4, 2), (64, 3, 1)), 1):
        out = layers.conv2d(out, in_channels=channels, channels=filters,
                            kernel_size=(kernel, kernel), strides=(stride, stride),
                            dtype=dtype, name=f"conv{i}")
        out = nn.relu(nn.bias_add(out, var(f"conv{i}_bias", shape=(filters,), dtype=dtype)))
        channels = filters
    out = nn.batch_flatten(out)
    flat_units = layers.infer_shape(out)[1]
    out = nn.relu(layers.dense_add_bias(out, units=512, in_units=flat_units,
                                        dtype=dtype, name="dense1"))
    out = layers.dense_add_bias(out, units=num_actions, in_units=512, dtype=dtype, name="dense2")
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_actions=18, image_shape=(4, 84, 84), dtype="float32",
                 layout="NCHW"):
    """(mod, params) of the DQN with Xavier-initialised weights."""
    return create_workload(get_net(batch_size, num_actions, image_shape, dtype, layout))
