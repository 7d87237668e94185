"""Shape-changing (injective) ops: reshape, transpose, concatenate/stack/split, squeeze,
expand_dims, reverse.

Slicing/tiling/broadcast_to live in transform_slice.py, indexing/scan/sort ops in
transform_index.py, constant-producing ops (full, zeros, arange, shape_of, ...) in
transform_init.py and layout_transform in transform_layout.py; this module re-exports them
so `compiler.op.transform` (and relay) is the whole namespace.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import CompilerError
from compiler.ir.expr import Tuple, TupleWrapper
from compiler.ir.types import TensorType, TupleType
from .registry import OpDef, OpPattern, make_call, register, static_or_expr
from compiler.ir.dims import dim_max, dim_min
from .type_relations import (as_axis_list, check_arity, dims_agree, divides, fail, holds,
                             is_dyn, known, normalize_axis, shapes_agree, tensor_arg, tuple_arg)

__all__ = ["reshape", "reverse_reshape", "reshape_like", "transpose", "concatenate", "split",
           "squeeze", "expand_dims", "stack", "reverse", "layout_transform"]


def _injective(name: str, num_inputs: int, rel, ref, attrs=None, key: str = "Attrs",
               pattern: OpPattern = OpPattern.INJECTIVE, reshape_only: bool = False,
               exact_reference: str = "") -> None:
    register(OpDef(name=name, num_inputs=num_inputs, type_rel=rel, pattern=pattern,
                   reference=ref, attrs=attrs or {}, attrs_type_key=key,
                   reshape_only=reshape_only, exact_reference=exact_reference))


def _size(shape):
    """The element count of a shape (an expression when a dim is dynamic)."""
    total = 1
    for d in shape:
        total = total * d
    return total


# --- reshape -------------------------------------------------------------------------------


def infer_newshape(op: str, shape: tuple, newshape: tuple, allowzero: bool = False) -> tuple:
    """TVM's reshape special values: 0 copy, -1 infer, -2 copy rest, -3 merge two, -4 split."""
    out: list = []
    src, infer_at, i = 0, None, 0
    newshape = tuple(int(v) for v in newshape)
    while i < len(newshape):
        v = newshape[i]
        if v > 0 or (v == 0 and allowzero):
            out.append(v)
            src += 1
        elif v == 0:
            if src >= len(shape):
                raise fail(op, f"newshape {newshape}: 0 copies input dim {src}, but the input "
                               f"{shape} has rank {len(shape)}")
            out.append(shape[src])
            src += 1
        elif v == -1:
            if infer_at is not None:
                raise fail(op, f"newshape {newshape} has more than one -1")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif v == -2:
            out.extend(shape[src:])
            src = len(shape)
        elif v == -3:
            if src + 1 >= len(shape):
                raise fail(op, f"newshape {newshape}: -3 merges input dims {src} and {src + 1}, "
                               f"but the input {shape} has rank {len(shape)}")
            out.append(shape[src] * shape[src + 1])
            src += 2
        elif v == -4:
            if i + 2 >= len(newshape) or src >= len(shape):
                raise fail(op, f"newshape {newshape}: -4 needs two following values and an "
                               f"input dim to split")
            d0, d1, d2 = shape[src], newshape[i + 1], newshape[i + 2]
            rule = "-4 must split the input dim exactly"
            if d1 == -1 and d2 > 0 and divides(op, d0, d2, rule):
                d1 = d0 // d2
            elif d2 == -1 and d1 > 0 and divides(op, d0, d1, rule):
                d2 = d0 // d1
            if not is_dyn(d1) and d1 <= 0 or not is_dyn(d2) and d2 <= 0 or \
                    not dims_agree(op, d1 * d2, d0, rule):
                raise fail(op, f"newshape {newshape}: -4 cannot split input dim {d0} into "
                               f"({newshape[i + 1]}, {newshape[i + 2]})")
            out.extend((d1, d2))
            src += 1
            i += 2
        else:
            raise fail(op, f"newshape {newshape} has the invalid value {v}")
        i += 1
    total = _size(shape)
    rule = "the new shape must hold the input's elements"
    if infer_at is not None:
        rest = _size(out)
        if not holds(op, "ne", rest, 0, rule) or not divides(op, total, rest, rule):
            raise fail(op, f"cannot infer the -1 in newshape {newshape} for input {shape} "
                           f"({total} elements)")
        out[infer_at] = total // rest
    if not dims_agree(op, _size(out), total, rule):
        raise fail(op, f"newshape {newshape} gives {tuple(out)} ({_size(out)} elements), but "
                       f"the input {shape} has {total} elements")
    return tuple(out)


def _reshape_rel(types, attrs):
    check_arity("reshape", types, 1)
    data = tensor_arg("reshape", types, 0, "data")
    return TensorType(infer_newshape("reshape", data.shape, attrs.newshape, attrs.allowzero),
                      data.dtype)


def _reshape_ref(inputs, attrs):
    x = inputs[0]
    return x.reshape(infer_newshape("reshape", x.shape, attrs.newshape, attrs.allowzero))


_injective("reshape", 1, _reshape_rel, _reshape_ref, {"newshape": (), "allowzero": False},
           "relay.attrs.ReshapeAttrs", reshape_only=True)


def reshape(data, newshape, allowzero=False):
    """relay.reshape with TVM's special values (0, -1, -2, -3, -4) in newshape; a computed
    (non-constant) newshape tensor gives dyn.reshape."""
    newshape, dynamic = static_or_expr(newshape)
    if dynamic is not None:
        return make_call("dyn.reshape", [data, dynamic], allowzero=bool(allowzero))
    if isinstance(newshape, (int, np.integer)) or getattr(newshape, "ndim", 1) == 0:
        newshape = (int(newshape),)
    return make_call("reshape", [data], newshape=tuple(int(v) for v in newshape),
                     allowzero=bool(allowzero))


def _reverse_reshape_shape(shape: tuple, newshape) -> tuple:
    """reshape's special values read from the right (TVM's contrib_reverse_reshape)."""
    out = infer_newshape("contrib_reverse_reshape", tuple(reversed(shape)),
                         tuple(reversed(tuple(newshape))))
    return tuple(reversed(out))


def _reverse_reshape_rel(types, attrs):
    check_arity("contrib_reverse_reshape", types, 1)
    data = tensor_arg("contrib_reverse_reshape", types, 0, "data")
    return TensorType(_reverse_reshape_shape(data.shape, attrs.newshape), data.dtype)


_injective("contrib_reverse_reshape", 1, _reverse_reshape_rel,
           lambda ins, attrs: ins[0].reshape(_reverse_reshape_shape(ins[0].shape, attrs.newshape)),
           {"newshape": ()}, "relay.attrs.ReshapeAttrs", reshape_only=True)


def reverse_reshape(data, newshape):
    """relay.reverse_reshape: reshape whose special values (0, -1, ...) count from the right."""
    if isinstance(newshape, (int, np.integer)):
        newshape = (int(newshape),)
    return make_call("contrib_reverse_reshape", [data], newshape=tuple(int(v) for v in newshape))


def _reshape_like_shape(attrs, data: tuple, like: tuple) -> tuple:
    lhs_end = len(data) if attrs.lhs_end is None else attrs.lhs_end
    rhs_end = len(like) if attrs.rhs_end is None else attrs.rhs_end
    lb, le = attrs.lhs_begin % (len(data) + 1), lhs_end % (len(data) + 1)
    rb, re = attrs.rhs_begin % (len(like) + 1), rhs_end % (len(like) + 1)
    return data[:lb] + like[rb:re] + data[le:]


def _reshape_like_rel(types, attrs):
    check_arity("reshape_like", types, 2)
    data = tensor_arg("reshape_like", types, 0, "data")
    like = tensor_arg("reshape_like", types, 1, "shape_like")
    out = _reshape_like_shape(attrs, data.shape, like.shape)
    if not dims_agree("reshape_like", _size(out), _size(data.shape),
                      "the new shape must hold the data's elements"):
        raise fail("reshape_like", f"cannot reshape data {data.shape} ({_size(data.shape)} "
                                   f"elements) to {out} ({_size(out)} elements)")
    return TensorType(out, data.dtype)


_injective("reshape_like", 2, _reshape_like_rel,
           lambda ins, attrs: ins[0].reshape(_reshape_like_shape(attrs, ins[0].shape,
                                                                 ins[1].shape)),
           {"lhs_begin": 0, "lhs_end": None, "rhs_begin": 0, "rhs_end": None},
           "relay.attrs.ReshapeLikeAttrs", reshape_only=True)


def reshape_like(data, shape_like, lhs_begin=0, lhs_end=None, rhs_begin=0, rhs_end=None):
    """relay.reshape_like: data reshaped to (part of) shape_like's shape."""
    return make_call("reshape_like", [data, shape_like], lhs_begin=lhs_begin, lhs_end=lhs_end,
                     rhs_begin=rhs_begin, rhs_end=rhs_end)


# --- transpose -------------------------------------------------------------------------------


def _perm(op: str, ndim: int, axes) -> list:
    if axes is None or len(axes) == 0:
        return list(range(ndim))[::-1]
    if len(axes) != ndim:
        raise fail(op, f"axes {tuple(axes)} must have one entry per dimension ({ndim})")
    perm = [normalize_axis(op, a, ndim, "axes") for a in axes]
    if sorted(perm) != list(range(ndim)):
        raise fail(op, f"axes {tuple(axes)} is not a permutation of {ndim} dimensions")
    return perm


def _transpose_rel(types, attrs):
    check_arity("transpose", types, 1)
    data = tensor_arg("transpose", types, 0, "data")
    perm = _perm("transpose", data.ndim, attrs.axes)
    return TensorType(tuple(data.shape[p] for p in perm), data.dtype)


_injective("transpose", 1, _transpose_rel,
           lambda ins, attrs: ins[0].transpose(_perm("transpose", ins[0].ndim, attrs.axes)),
           {"axes": None}, "relay.attrs.TransposeAttrs", exact_reference="values")


def transpose(data, axes=None):
    """relay.transpose: axes=None reverses the dimensions."""
    return make_call("transpose", [data], axes=None if axes is None else as_axis_list(axes))


# --- concatenate / stack / split -------------------------------------------------------------


def _as_tuple(data):
    if isinstance(data, TupleWrapper):
        return data.astuple()
    if isinstance(data, Tuple):
        return data
    data = list(data)
    if not data:
        raise CompilerError("concatenate/stack: expected at least one tensor, got none")
    return Tuple(data)


def _concat_rel(types, attrs):
    op = "concatenate"
    check_arity(op, types, 1)
    fields = tuple_arg(op, types, 0)
    first = fields[0]
    axis = normalize_axis(op, attrs.axis, first.ndim)
    total = 0
    shape = list(first.shape)
    for i, f in enumerate(fields):
        if f.dtype != first.dtype:
            raise fail(op, f"data[{i}] has dtype {f.dtype}, expected {first.dtype} like data[0]")
        if f.ndim != first.ndim:
            raise fail(op, f"data[{i}] has rank {f.ndim}, expected {first.ndim} like data[0]")
        for d in range(first.ndim):
            if d != axis and not dims_agree(op, f.shape[d], first.shape[d],
                                            f"data[{i}] must match data[0] on axis {d}"):
                raise fail(op, f"data[{i}] shape {f.shape} differs from data[0] {first.shape} "
                               f"on axis {d} (only axis {attrs.axis} may differ)")
            shape[d] = known(shape[d], f.shape[d])
        total += f.shape[axis]
    shape[axis] = total
    return TensorType(shape, first.dtype)


_injective("concatenate", 1, _concat_rel,
           lambda ins, attrs: np.concatenate(ins[0], axis=attrs.axis),
           {"axis": 0}, "relay.attrs.ConcatenateAttrs", exact_reference="values")


def concatenate(data, axis):
    """relay.concatenate: data is a list/tuple of tensors (passed as one Tuple argument)."""
    return make_call("concatenate", [_as_tuple(data)], axis=int(axis))


def _stack_rel(types, attrs):
    op = "stack"
    check_arity(op, types, 1)
    fields = tuple_arg(op, types, 0)
    first = fields[0]
    axis = normalize_axis(op, attrs.axis, first.ndim + 1)
    shape = list(first.shape)
    for i, f in enumerate(fields):
        if f.dtype != first.dtype or not shapes_agree(op, f.shape, first.shape,
                                                      f"data[{i}] must match data[0]"):
            raise fail(op, f"data[{i}] is {f}, expected {first} like data[0]")
        shape = [known(a, b) for a, b in zip(shape, f.shape)]
    return TensorType(shape[:axis] + [len(fields)] + shape[axis:], first.dtype)


_injective("stack", 1, _stack_rel, lambda ins, attrs: np.stack(ins[0], axis=attrs.axis),
           {"axis": 0}, "relay.attrs.StackAttrs", exact_reference="values")


def stack(data, axis):
    """relay.stack: join equal-shaped tensors along a new axis."""
    return make_call("stack", [_as_tuple(data)], axis=int(axis))


def _split_bounds(op: str, dim: int, spec) -> list:
    """[(begin, end)] per output, as numpy.split computes them."""
    if isinstance(spec, (int, np.integer)):
        if spec <= 0 or not divides(op, dim, spec, "the sections must divide the axis"):
            raise fail(op, f"indices_or_sections={spec} must evenly divide the axis size {dim}")
        step = dim // spec
        return [(i * step, (i + 1) * step) for i in range(spec)]
    cuts = [int(c) for c in spec]
    if any(b < a for a, b in zip(cuts, cuts[1:])) or any(c < 0 for c in cuts):
        raise fail(op, f"split indices {tuple(cuts)} must be non-negative and increasing")
    edges = [0] + [dim_min(c, dim) for c in cuts] + [dim]
    return [(edges[i], dim_max(edges[i], edges[i + 1])) for i in range(len(edges) - 1)]


def _split_rel(types, attrs):
    check_arity("split", types, 1)
    data = tensor_arg("split", types, 0, "data")
    axis = normalize_axis("split", attrs.axis, data.ndim)
    bounds = _split_bounds("split", data.shape[axis], attrs.indices_or_sections)
    return TupleType([TensorType(data.shape[:axis] + (e - b,) + data.shape[axis + 1:], data.dtype)
                      for b, e in bounds])


def _split_ref(inputs, attrs):
    x = inputs[0]
    axis = attrs.axis % x.ndim
    bounds = _split_bounds("split", x.shape[axis], attrs.indices_or_sections)
    return tuple(np.take(x, np.arange(b, e), axis=axis) for b, e in bounds)


_injective("split", 1, _split_rel, _split_ref, {"indices_or_sections": 1, "axis": 0},
           "relay.attrs.SplitAttrs", exact_reference="values")


def split(data, indices_or_sections, axis=0):
    """relay.split: a TupleWrapper of the pieces (sections count or split indices)."""
    if isinstance(indices_or_sections, (int, np.integer)):
        spec, size = int(indices_or_sections), int(indices_or_sections)
    else:
        spec = tuple(int(i) for i in indices_or_sections)
        size = len(spec) + 1
    return TupleWrapper(make_call("split", [data], indices_or_sections=spec, axis=int(axis)),
                        size)


# --- squeeze / expand_dims / reverse ---------------------------------------------------------


def _squeeze_axes(op: str, shape: tuple, axis) -> list:
    if axis is None:  # a dynamic dim stays (as TVM's), so it must not turn out to be 1
        for i, d in enumerate(shape):
            if is_dyn(d):
                holds(op, "ne", d, 1, f"squeeze without axes keeps dynamic dim {i}, which "
                                      "must not be 1")
        return [i for i, d in enumerate(shape) if d == 1]
    axes = [normalize_axis(op, a, len(shape)) for a in axis]
    for a in axes:
        if not dims_agree(op, shape[a], 1, f"the squeezed axis {a} must have size 1"):
            raise fail(op, f"axis {a} of shape {shape} has size {shape[a]}, expected 1")
    return axes


def _squeeze_rel(types, attrs):
    check_arity("squeeze", types, 1)
    data = tensor_arg("squeeze", types, 0, "data")
    drop = _squeeze_axes("squeeze", data.shape, attrs.axis)
    return TensorType(tuple(d for i, d in enumerate(data.shape) if i not in drop), data.dtype)


_injective("squeeze", 1, _squeeze_rel,
           lambda ins, attrs: np.squeeze(ins[0], tuple(_squeeze_axes("squeeze", ins[0].shape,
                                                                     attrs.axis))),
           {"axis": None}, "relay.attrs.SqueezeAttrs", reshape_only=True)


def squeeze(data, axis=None):
    """relay.squeeze: drop the given size-1 axes (all size-1 axes when axis is None); a
    computed axis tensor gives dyn.squeeze."""
    axis, dynamic = static_or_expr(axis)
    if dynamic is not None:
        return make_call("dyn.squeeze", [data, dynamic])
    return make_call("squeeze", [data], axis=as_axis_list(
        axis.reshape(-1).tolist() if isinstance(axis, np.ndarray) else axis))


def _expand_dims_shape(op: str, shape: tuple, axis: int, num: int) -> tuple:
    ndim = len(shape)
    if not -ndim - 1 <= axis <= ndim:
        raise fail(op, f"axis={axis} is out of range for rank {ndim} "
                       f"(expected {-ndim - 1} <= axis <= {ndim})")
    if num < 0:
        raise fail(op, f"num_newaxis must be >= 0, got {num}")
    axis = axis % (ndim + 1)
    return shape[:axis] + (1,) * num + shape[axis:]


def _expand_dims_rel(types, attrs):
    check_arity("expand_dims", types, 1)
    data = tensor_arg("expand_dims", types, 0, "data")
    return TensorType(_expand_dims_shape("expand_dims", data.shape, attrs.axis,
                                         attrs.num_newaxis), data.dtype)


_injective("expand_dims", 1, _expand_dims_rel,
           lambda ins, attrs: ins[0].reshape(_expand_dims_shape(
               "expand_dims", ins[0].shape, attrs.axis, attrs.num_newaxis)),
           {"axis": 0, "num_newaxis": 1}, "relay.attrs.ExpandDimsAttrs", reshape_only=True)


def expand_dims(data, axis, num_newaxis=1):
    """relay.expand_dims: insert num_newaxis size-1 axes at axis (dyn.expand_dims for a
    computed axis)."""
    axis, dynamic = static_or_expr(axis)
    if dynamic is not None:
        return make_call("dyn.expand_dims", [data, dynamic], num_newaxis=int(num_newaxis))
    return make_call("expand_dims", [data], axis=int(np.asarray(axis).reshape(-1)[0]),
                     num_newaxis=int(num_newaxis))


def _reverse_rel(types, attrs):
    check_arity("reverse", types, 1)
    data = tensor_arg("reverse", types, 0, "data")
    normalize_axis("reverse", attrs.axis, data.ndim)
    return data


_injective("reverse", 1, _reverse_rel, lambda ins, attrs: np.flip(ins[0], attrs.axis).copy(),
           {"axis": 0}, "relay.attrs.ReverseAttrs")


def reverse(data, axis):
    """relay.reverse along one axis."""
    return make_call("reverse", [data], axis=int(axis))


from .transform_layout import layout_transform  # noqa: E402,F401
from .transform_slice import *  # noqa: E402,F401,F403
from .transform_slice import __all__ as _slice_all  # noqa: E402
from .transform_slice import slices_of  # noqa: E402,F401  (public before the split)
from .transform_index import *  # noqa: E402,F401,F403
from .transform_index import __all__ as _index_all  # noqa: E402
from .transform_init import *  # noqa: E402,F401,F403
from .transform_init import __all__ as _init_all  # noqa: E402
from .transform_select import *  # noqa: E402,F401,F403
from .transform_select import __all__ as _select_all  # noqa: E402

__all__ += _slice_all + _index_all + _init_all + _select_all
