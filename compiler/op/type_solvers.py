"""Types of unannotated arguments, deduced as TVM's type relations deduce them.

In TVM, `relay.nn.conv2d(data, relay.var("weight"), channels=8, kernel_size=(3, 3))`
type-checks: the relation assigns the weight the type the data and the attributes imply.
Each solver here takes the argument types with None for the unknown ones and returns
{index: Type} for those it can deduce (a missing attribute, such as conv2d's channels,
leaves them unknown). InferType calls them through OpDef.solve_missing.
"""
from __future__ import annotations

from compiler.ir.types import TensorType
from .registry import register_type_solver
from .type_relations import normalize_axis


def _known_data(types) -> TensorType | None:
    data = types[0] if types else None
    return data if isinstance(data, TensorType) else None


def _kernel_shape(kernel_layout: str, dims: dict, kernel_size) -> tuple | None:
    """The weight shape in `kernel_layout` from its O/I extents and the spatial kernel_size
    (given in D, H, W order); None for a layout with packed (lower-case) dimensions."""
    spatial = [c for c in "DHW" if c in kernel_layout]
    if not kernel_layout.isupper() or len(spatial) != len(kernel_size) or \
            len(kernel_layout) != len(spatial) + 2:
        return None
    dims = {**dims, **dict(zip(spatial, kernel_size))}
    return tuple(int(dims[c]) for c in kernel_layout)


def _conv_weight(transposed: bool):
    """conv weight: O = channels, I = data channels / groups (transposed: I = data channels,
    O = channels / groups), spatial = kernel_size; the data's dtype."""
    def solve(types, attrs):
        data = _known_data(types)
        if data is None or attrs.channels is None or attrs.kernel_size is None:
            return {}
        in_channels = data.shape[attrs.data_layout.index("C")]
        groups = int(attrs.groups)
        if transposed:
            dims = {"I": in_channels, "O": int(attrs.channels) // groups}
        else:
            dims = {"O": int(attrs.channels), "I": in_channels // groups}
        shape = _kernel_shape(attrs.kernel_layout, dims, tuple(attrs.kernel_size))
        return {} if shape is None else {1: TensorType(shape, data.dtype)}
    return solve


register_type_solver("nn.conv1d", "nn.conv2d", "nn.conv3d")(_conv_weight(transposed=False))
register_type_solver("nn.conv1d_transpose", "nn.conv2d_transpose",
                     "nn.conv3d_transpose")(_conv_weight(transposed=True))


@register_type_solver("nn.dense")
def _dense_weight(types, attrs):
    """dense weight: [units, data.shape[-1]] of the data's dtype."""
    data = _known_data(types)
    if data is None or attrs.units is None or data.ndim < 1:
        return {}
    return {1: TensorType((int(attrs.units), data.shape[-1]), data.dtype)}


@register_type_solver("nn.bias_add", "nn.prelu", "nn.batch_norm", "nn.layer_norm",
                      "nn.instance_norm", "nn.group_norm")
def _channel_vectors(types, attrs):
    """bias, alpha, gamma, beta, moving mean/var: [data.shape[axis]] of the data's dtype."""
    data = _known_data(types)
    if data is None or data.ndim == 0:
        return {}
    axis = normalize_axis("solve", attrs.axis, data.ndim)
    vector = TensorType((data.shape[axis],), data.dtype)
    return {i: vector for i in range(1, len(types))}
