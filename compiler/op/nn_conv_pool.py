"""nn.contrib_conv2d_max_pool: a packed-weight conv2d and the max pool that reads its output,
as one op (produced by the FuseConvMaxPool pass), so that the conv's output is pooled strip by
strip while it is still in the core's cache instead of being written whole and read back.

    contrib_conv2d_max_pool(data NCHW, Wp; conv2d attrs, channels = K,
                            pool_size, pool_strides, pool_padding)
      = max_pool2d(contrib_conv2d_packed(data, Wp), pool_size, pool_strides, pool_padding)

Only pools whose every window holds at least one conv output (padding smaller than the
window), without dilation or ceil mode, NCHW.

The ops a max may move through (max(f(a), f(b)) = f(max(a, b)) over a window) are marked here
with the op attribute MAX_COMMUTES (TVM's register_op_attr), read by the pass:
- "monotone": an elementwise, non-decreasing function of its one input (nn.relu);
- "shift": data + c, where c must be the same over the pooled axes (the pass checks c's shape):
  add, nn.bias_add (over the channel axis).
"""
from __future__ import annotations

from types import SimpleNamespace

from compiler.ir.types import TensorType
from .nn_packed import _conv_packed_ref, _conv_packed_rel
from .nn_pool import _pool_ref
from .registry import OpDef, OpPattern, get_def, make_call, register
from .type_relations import fail, int_tuple
from .window import pad_tuple2d, pair, window_out_dim

__all__ = ["contrib_conv2d_max_pool", "MAX_COMMUTES", "pool_attrs"]

OP = "nn.contrib_conv2d_max_pool"
MAX_COMMUTES = "TMaxCommutes"

get_def("nn.relu").set_attr(MAX_COMMUTES, "monotone")
get_def("add").set_attr(MAX_COMMUTES, "shift")
get_def("nn.bias_add").set_attr(MAX_COMMUTES, "shift")


def pool_attrs(attrs) -> SimpleNamespace:
    """The max_pool2d attributes of a fused call (for nn_pool's reference)."""
    return SimpleNamespace(pool_size=tuple(attrs.pool_size), strides=tuple(attrs.pool_strides),
                           dilation=(1, 1), padding=tuple(attrs.pool_padding), layout="NCHW",
                           out_layout="", ceil_mode=False, count_include_pad=False)


def _rel(types, attrs):
    conv = _conv_packed_rel(types, attrs)
    kh, kw = int_tuple(OP, attrs.pool_size, "pool_size", 2)
    sh, sw = int_tuple(OP, attrs.pool_strides, "pool_strides", 2)
    pt, pl, pb, pr = int_tuple(OP, attrs.pool_padding, "pool_padding", 4)
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        raise fail(OP, f"pool_padding {attrs.pool_padding} must be smaller than the window "
                       f"{attrs.pool_size} (every window must hold a conv output)")
    n, k, h, w = conv.shape
    oh = window_out_dim(OP, h, kh, sh, 1, pt + pb)
    ow = window_out_dim(OP, w, kw, sw, 1, pl + pr)
    return TensorType((n, k, oh, ow), conv.dtype)


def _ref(inputs, attrs):
    return _pool_ref("max")([_conv_packed_ref(inputs, attrs)], pool_attrs(attrs))


_CONV_ATTRS = dict(get_def("nn.contrib_conv2d_packed").attrs)
register(OpDef(name=OP, num_inputs=2, type_rel=_rel, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               reference=_ref, attrs={**_CONV_ATTRS, "pool_size": (1, 1),
                                      "pool_strides": (1, 1), "pool_padding": (0, 0, 0, 0)},
               attrs_type_key="relay.attrs.Conv2DMaxPoolAttrs"))


def contrib_conv2d_max_pool(data, packed_weight, conv_attrs, pool_size, pool_strides,
                            pool_padding):
    """max_pool2d(contrib_conv2d_packed(data, packed_weight, **conv_attrs)) as one call."""
    return make_call(OP, [data, packed_weight], **dict(conv_attrs), pool_size=pair(pool_size),
                     pool_strides=pair(pool_strides), pool_padding=pad_tuple2d(pool_padding))

