"""A multilayer perceptron (tvm.relay.testing.mlp): flatten, dense 128, 64, classes, softmax."""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Function, var
from compiler.analysis import free_vars
from compiler.op import nn

from . import layers
from .init import create_workload

__all__ = ["get_net", "get_workload"]


def get_net(batch_size, num_classes=10, image_shape=(1, 28, 28), dtype="float32"):
    """The MLP as a relay Function of `data` and its fc weights and biases."""
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    out = nn.batch_flatten(data)
    in_units = int(np.prod(image_shape))
    for name, units in (("fc1", 128), ("fc2", 64), ("fc3", num_classes)):
        out = layers.dense_add_bias(out, units=units, in_units=in_units, dtype=dtype, name=name)
        if name != "fc3":
            out = nn.relu(out)
        in_units = units
    out = nn.softmax(out)
    return Function(free_vars(out), out)


def get_workload(batch_size=1, num_classes=10, image_shape=(1, 28, 28), dtype="float32"):
    """(mod, params) of the MLP with Xavier-initialised weights."""
    return create_workload(get_net(batch_size, num_classes, image_shape, dtype))
