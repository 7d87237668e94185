"""The DCGAN generator (tvm.relay.testing.dcgan): a dense projection of the random code,
then four stride-2 transposed convolutions up to a 64x64 image."""
from __future__ import annotations

from compiler.analysis import free_vars
from compiler.ir.expr import Function, var
from compiler.op import nn
from compiler.op.tensor import tanh
from compiler.op.transform import reshape

from . import layers
from .init import create_workload

__all__ = ["deconv2d", "deconv2d_bn_relu", "get_net", "get_workload"]

_BN_EPS = 1e-5 + 1e-12


def deconv2d(data, in_channels, oshape, kshape, name, stride=(2, 2), dtype="float32"):
    """A transposed conv reaching the spatial size of oshape (channels, height, width)."""
    pad = ((kshape[0] - 1) // 2, (kshape[1] - 1) // 2)
    adj = ((oshape[-2] + 2 * pad[0] - kshape[0]) % stride[0],
           (oshape[-1] + 2 * pad[1] - kshape[1]) % stride[1])
    return layers.conv2d_transpose(data, in_channels=in_channels, channels=oshape[0],
                                   kernel_size=kshape, strides=stride, padding=pad,
                                   output_padding=adj, dtype=dtype, name=name)


def deconv2d_bn_relu(data, in_channels, oshape, kshape, prefix, dtype="float32"):
    """deconv2d, batch norm, relu."""
    out = deconv2d(data, in_channels, oshape, kshape, prefix + "_deconv", dtype=dtype)
    out = layers.batch_norm_infer(out, epsilon=_BN_EPS, num_features=oshape[0], dtype=dtype,
                                  name=prefix + "_batch_norm")
    return nn.relu(out)


def get_net(batch_size, random_len=100, oshape=(3, 64, 64), ngf=128, code=None,
            dtype="float32"):
    """The generator from a (batch_size, random_len) code to images of oshape."""
    if tuple(oshape[-2:]) != (64, 64):
        raise ValueError(f"dcgan: only 64x64 images are supported, got oshape {oshape}")
    code = code if code is not None else var("data", shape=(batch_size, random_len),
                                              dtype=dtype)
    weight = var("dense_weight", shape=(4 * 4 * ngf * 8, random_len), dtype=dtype)
    out = nn.relu(nn.dense(code, weight, units=4 * 4 * ngf * 8))
    out = reshape(out, newshape=(-1, ngf * 8, 4, 4))
    channels = ngf * 8
    for size, prefix in ((8, "g2"), (16, "g3"), (32, "g4")):
        out = deconv2d_bn_relu(out, channels, (channels // 2, size, size), (4, 4), prefix,
                               dtype)
        channels //= 2
    out = tanh(deconv2d(out, channels, oshape, (4, 4), "g5_deconv", dtype=dtype))
    return Function(free_vars(out), out)


def get_workload(batch_size, oshape=(3, 64, 64), ngf=128, random_len=100, layout="NCHW",
                 dtype="float32"):
    """(mod, params) of the DCGAN generator with Xavier-initialised weights."""
    if layout != "NCHW":
        raise ValueError(f"dcgan: only layout 'NCHW' is supported, got {layout!r}")
    return create_workload(get_net(batch_size, random_len, oshape, ngf, dtype=dtype))
