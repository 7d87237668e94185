"""The dyn.* ops (TVM's relay.op.dyn): static ops whose shape-like attributes arrive as tensors.

dyn.reshape(data, newshape) is reshape with newshape read at run time, and so on for
broadcast_to, strided_slice, tile, zeros, ones, full, topk, one_hot, expand_dims, squeeze,
nn.pad, nn.upsampling and the reductions sum, mean, max, min and prod (their axes a tensor;
the reduced dims stay as 1s, which is what lets a kernel tell them from the shapes alone). Each is described once, as a DynOp beside the static op it stands
for: which inputs carry the shape-like values, and how those values become the static op's
attributes. From that one description come
- its type relation: output dims that depend on the values are Any (fresh symbols);
- its numpy reference (what the interpreter, create_executor("debug"), runs): the static op's
  reference under the attributes the values give;
- its shape function, OpDef.shape_func: a runtime.shape_functions entry reading the values;
- DynamicToStatic's rewrite once the values are constants: the static op's call.
They are OPAQUE: fusion keeps them alone, so their value inputs are always parameters of the
primitive function holding them (what shape_program needs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.dims import Any
from compiler.ir.expr import Call
from compiler.ir.types import TensorType, TupleType
from .registry import OpDef, OpPattern, ShapeFuncDef, get_def, register
from .type_relations import check_arity, fail, normalize_axis, require_int, tensor_arg

__all__ = ["DynOp", "DYN_OPS", "dyn_op_of", "static_call"]


@dataclass(frozen=True)
class DynOp:
    """A dyn.* op and the static op it becomes once its value inputs are known.

    values: the input positions holding shape-like values (all others are data, in order).
    to_attrs(values, attrs, data_types) -> the static op's attributes, from the values (numpy
        arrays) and the data inputs' types.
    out_type(data_types, value_types, attrs) -> the output type with Any where the values
        decide.
    """

    name: str
    static: str
    values: tuple
    to_attrs: Callable
    out_type: Callable
    attrs: dict
    reshape_only: bool = False

    def split(self, items: list) -> tuple[list, list]:
        """(data, values) of a call's inputs (or their types)."""
        data = [x for i, x in enumerate(items) if i not in self.values]
        return data, [items[i] for i in self.values]


DYN_OPS: dict[str, DynOp] = {}


def dyn_op_of(name: str) -> DynOp | None:
    return DYN_OPS.get(name)


def static_call(dyn: DynOp, call: Call, values: list) -> Call:
    """The static op's call equivalent to `call` when its value inputs are `values`."""
    data, _ = dyn.split(list(call.args))
    types = [a.checked_type if a._checked_type is not None else None for a in data]
    return get_def(dyn.static).make_call(data, **dyn.to_attrs(values, call.attrs, types))


def _ints(value) -> list:
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]


def _vector(op: str, ty: TensorType, what: str) -> int:
    """The static length of a 1-D integer value input."""
    require_int(op, ty, what)
    if ty.ndim != 1 or isinstance(ty.shape[0], Any):
        raise fail(op, f"{what} must be a 1-D integer tensor of static length, got {ty}")
    return int(ty.shape[0])


def _scalar(op: str, ty: TensorType, what: str, integer: bool = True) -> None:
    if integer:
        require_int(op, ty, what)
    if ty.ndim > 1 or (ty.ndim == 1 and ty.shape[0] != 1):
        raise fail(op, f"{what} must be a scalar, got {ty}")


def _unknown(n: int) -> tuple:
    return tuple(Any() for _ in range(n))


def _relation(dyn: DynOp):
    def rel(types, attrs):
        check_arity(dyn.name, types, len(types))
        for i in range(len(types)):
            tensor_arg(dyn.name, types, i)
        data, values = dyn.split(list(types))
        return dyn.out_type(data, values, attrs)
    return rel


def _reference(dyn: DynOp):
    static = get_def(dyn.static)

    def reference(inputs, attrs):
        data, values = dyn.split(list(inputs))
        types = [TensorType(d.shape, d.dtype.name) for d in data]
        fields = dict(dyn.to_attrs([np.asarray(v) for v in values], attrs, types))
        full = {k: fields.get(k, default) for k, default in static.attrs.items()}
        return static.reference(data, Attrs(full, static.attrs_type_key))
    return reference


def _define(dyn: DynOp, num_data: int) -> None:
    DYN_OPS[dyn.name] = dyn
    n = len(dyn.values) + num_data
    register(OpDef(name=dyn.name, num_inputs=n, type_rel=_relation(dyn),
                   pattern=OpPattern.OPAQUE, reference=_reference(dyn), attrs=dict(dyn.attrs),
                   attrs_type_key=get_def(dyn.static).attrs_type_key,
                   reshape_only=dyn.reshape_only,
                   exact_reference=get_def(dyn.static).exact_reference,
                   shape_func=ShapeFuncDef(dyn.name, tuple(i in dyn.values for i in range(n))),
                   description=f"{dyn.static} with its shape-like attributes as tensors"))


# --- the ops ----------------------------------------------------------------------------------

def _reshape_type(data, values, attrs):
    return TensorType(_unknown(_vector("dyn.reshape", values[0], "newshape")), data[0].dtype)


def _reshape_attrs(values, attrs, types):
    return {"newshape": tuple(_ints(values[0])), "allowzero": bool(attrs.allowzero)}


def _broadcast_to_type(data, values, attrs):
    rank = _vector("dyn.broadcast_to", values[0], "shape")
    if rank < data[0].ndim:
        raise fail("dyn.broadcast_to", f"shape has {rank} values, fewer than the rank of data "
                                       f"{data[0].shape}")
    return TensorType(_unknown(rank), attrs.dtype or data[0].dtype)


def _broadcast_to_attrs(values, attrs, types):
    return {"shape": tuple(_ints(values[0]))}


def _strided_slice_type(data, values, attrs):
    op, x = "dyn.strided_slice", data[0]
    lengths = {_vector(op, v, what) for v, what in zip(values, ("begin", "end", "strides"))}
    if len(lengths) != 1 or max(lengths) > x.ndim:
        raise fail(op, f"begin, end and strides must have one length, at most the rank of data "
                       f"{x.shape}, got {[str(v) for v in values]}")
    if attrs.slice_mode not in ("end", "size"):
        raise fail(op, f"slice_mode must be 'end' or 'size', got {attrs.slice_mode!r}")
    k = lengths.pop()
    return TensorType(_unknown(k) + tuple(x.shape[k:]), x.dtype)


def _strided_slice_attrs(values, attrs, types):
    begin, end, strides = (_ints(v) for v in values)
    return {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides),
            "slice_mode": attrs.slice_mode, "axes": None}


def _tile_type(data, values, attrs):
    return TensorType(_unknown(max(data[0].ndim, _vector("dyn.tile", values[0], "reps"))),
                      data[0].dtype)


def _tile_attrs(values, attrs, types):
    return {"reps": tuple(_ints(values[0]))}


def _init_type(op: str):
    def out_type(data, values, attrs):
        rank = _vector(op, values[0], "shape")
        dtype = attrs.dtype or (data[0].dtype if data else "float32")
        if data:
            _scalar(op, data[0], "fill_value", integer=False)
        return TensorType(_unknown(rank), dtype)
    return out_type


def _init_attrs(values, attrs, types):
    return {"shape": tuple(_ints(values[0])), "dtype": attrs.dtype}


def _topk_type(data, values, attrs):
    op, x = "dyn.topk", data[0]
    _scalar(op, values[0], "k")
    axis = normalize_axis(op, attrs.axis, x.ndim)
    if attrs.ret_type not in ("both", "values", "indices"):
        raise fail(op, f"ret_type must be 'both', 'values' or 'indices', got "
                       f"{attrs.ret_type!r}")
    shape = x.shape[:axis] + (Any(),) + x.shape[axis + 1:]
    values_t, indices_t = TensorType(shape, x.dtype), TensorType(shape, attrs.dtype)
    return {"both": TupleType([values_t, indices_t]), "values": values_t,
            "indices": indices_t}[attrs.ret_type]


def _topk_attrs(values, attrs, types):
    return {"k": _ints(values[0])[0], "axis": attrs.axis, "ret_type": attrs.ret_type,
            "is_ascend": attrs.is_ascend, "dtype": attrs.dtype}


def _one_hot_type(data, values, attrs):
    op, (indices, on, off) = "dyn.one_hot", data
    require_int(op, indices)
    _scalar(op, values[0], "depth")
    if on.shape or off.shape:
        raise fail(op, f"on_value and off_value must be scalars, got {on.shape} and {off.shape}")
    axis = attrs.axis % (indices.ndim + 1) if attrs.axis < 0 else attrs.axis
    if axis > indices.ndim:
        raise fail(op, f"axis={attrs.axis} is out of range for indices {indices.shape}")
    return TensorType(indices.shape[:axis] + (Any(),) + indices.shape[axis:], attrs.dtype)


def _one_hot_attrs(values, attrs, types):
    return {"depth": _ints(values[0])[0], "axis": attrs.axis, "dtype": attrs.dtype}


def _expand_dims_type(data, values, attrs):
    _scalar("dyn.expand_dims", values[0], "axis")
    if attrs.num_newaxis < 0:
        raise fail("dyn.expand_dims", f"num_newaxis must be >= 0, got {attrs.num_newaxis}")
    return TensorType(_unknown(data[0].ndim + attrs.num_newaxis), data[0].dtype)


def _expand_dims_attrs(values, attrs, types):
    return {"axis": _ints(values[0])[0], "num_newaxis": attrs.num_newaxis}


def _squeeze_type(data, values, attrs):
    k = _vector("dyn.squeeze", values[0], "axis")
    if k > data[0].ndim:
        raise fail("dyn.squeeze", f"axis names {k} axes of data {data[0].shape}")
    return TensorType(_unknown(data[0].ndim - k), data[0].dtype)


def _squeeze_attrs(values, attrs, types):
    return {"axis": tuple(_ints(values[0]))}


def _pad_type(data, values, attrs):
    op, (x, value) = "dyn.nn.pad", data
    width = values[0]
    require_int(op, width, "pad_width")
    if width.ndim != 2 or width.shape[0] != x.ndim or width.shape[1] != 2:
        raise fail(op, f"pad_width must be [{x.ndim}, 2] (before, after per axis), got {width}")
    _scalar(op, value, "pad_value", integer=False)
    if attrs.pad_mode not in ("constant", "edge", "reflect"):
        raise fail(op, f"pad_mode must be constant, edge or reflect, got {attrs.pad_mode!r}")
    return TensorType(_unknown(x.ndim), x.dtype)


def _pad_attrs(values, attrs, types):
    widths = np.asarray(values[0]).reshape(-1, 2).tolist()
    return {"pad_width": tuple((int(b), int(a)) for b, a in widths),
            "pad_mode": attrs.pad_mode}


def _upsampling_type(data, values, attrs):
    op, x = "dyn.nn.upsampling", data[0]
    for v, what in zip(values, ("scale_h", "scale_w")):
        _scalar(op, v, what, integer=False)
    if attrs.layout not in ("NCHW", "NHWC") or x.ndim != 4:
        raise fail(op, f"expected 4-D NCHW or NHWC data, got layout={attrs.layout!r} {x}")
    shape = list(x.shape)
    for axis in (attrs.layout.index("H"), attrs.layout.index("W")):
        shape[axis] = Any()
    return TensorType(shape, x.dtype)


def _upsampling_attrs(values, attrs, types):
    scale_h, scale_w = (float(np.asarray(v).reshape(-1)[0]) for v in values)
    return {"scale_h": scale_h, "scale_w": scale_w, "layout": attrs.layout,
            "method": attrs.method, "align_corners": attrs.align_corners}


def _reduce_type(op: str):
    def out_type(data, values, attrs):
        _vector(op, values[0], "axis")
        return TensorType(tuple(d if d == 1 else Any() for d in data[0].shape), data[0].dtype)
    return out_type


def _reduce_attrs(values, attrs, types):
    return {"axis": tuple(_ints(values[0])), "keepdims": True, "exclude": False}


_REDUCTIONS = ("sum", "mean", "max", "min", "prod")
_TOPK_ATTRS = {"axis": -1, "ret_type": "both", "is_ascend": False, "dtype": "int32"}
_UPSAMPLING_ATTRS = {"layout": "NCHW", "method": "nearest_neighbor", "align_corners": False}
# name, static op, data inputs, value positions, out_type, to_attrs, attrs, reshape_only
for _args in [
    ("dyn.reshape", "reshape", 1, (1,), _reshape_type, _reshape_attrs, {"allowzero": False}, True),
    ("dyn.broadcast_to", "broadcast_to", 1, (1,), _broadcast_to_type, _broadcast_to_attrs,
     {"dtype": ""}, False),
    ("dyn.strided_slice", "strided_slice", 1, (1, 2, 3), _strided_slice_type,
     _strided_slice_attrs, {"slice_mode": "end"}, False),
    ("dyn.tile", "tile", 1, (1,), _tile_type, _tile_attrs, {}, False),
    ("dyn.zeros", "zeros", 0, (0,), _init_type("dyn.zeros"), _init_attrs,
     {"dtype": "float32"}, False),
    ("dyn.ones", "ones", 0, (0,), _init_type("dyn.ones"), _init_attrs, {"dtype": "float32"},
     False),
    ("dyn.full", "full", 1, (1,), _init_type("dyn.full"), _init_attrs, {"dtype": ""}, False),
    ("dyn.topk", "topk", 1, (1,), _topk_type, _topk_attrs, _TOPK_ATTRS, False),
    ("dyn.one_hot", "one_hot", 3, (3,), _one_hot_type, _one_hot_attrs,
     {"axis": -1, "dtype": "float32"}, False),
    ("dyn.expand_dims", "expand_dims", 1, (1,), _expand_dims_type, _expand_dims_attrs,
     {"num_newaxis": 1}, True),
    ("dyn.squeeze", "squeeze", 1, (1,), _squeeze_type, _squeeze_attrs, {}, True),
    ("dyn.nn.pad", "nn.pad", 2, (1,), _pad_type, _pad_attrs, {"pad_mode": "constant"}, False),
    ("dyn.nn.upsampling", "nn.upsampling", 1, (1, 2), _upsampling_type, _upsampling_attrs,
     _UPSAMPLING_ATTRS, False),
    *((f"dyn.{r}", r, 1, (1,), _reduce_type(f"dyn.{r}"), _reduce_attrs, {}, False)
      for r in _REDUCTIONS),
]:
    _name, _static, _data, _values, _out, _to, _attrs, _reshape = _args
    _define(DynOp(_name, _static, _values, _to, _out, _attrs, _reshape), _data)


# --- constructors (relay.op.dyn.*; relay.reshape & co. call them for tensor arguments) -------

def _call(name: str, args: list, **attrs) -> Call:
    return get_def(name).make_call(args, **attrs)


def reshape(data, newshape, allowzero=False):
    """dyn.reshape: newshape a 1-D integer tensor (0 copies a dim, -1 is inferred)."""
    return _call("dyn.reshape", [data, newshape], allowzero=bool(allowzero))


def broadcast_to(data, shape):
    return _call("dyn.broadcast_to", [data, shape])


def strided_slice(data, begin, end, strides, slice_mode="end"):
    return _call("dyn.strided_slice", [data, begin, end, strides], slice_mode=slice_mode)


def tile(data, reps):
    return _call("dyn.tile", [data, reps])


def zeros(shape, dtype):
    return _call("dyn.zeros", [shape], dtype=str(dtype))


def ones(shape, dtype):
    return _call("dyn.ones", [shape], dtype=str(dtype))


def full(fill_value, shape, dtype=""):
    return _call("dyn.full", [fill_value, shape], dtype=str(dtype or ""))


def topk(data, k, axis=-1, ret_type="both", is_ascend=False, dtype="int32"):
    return _call("dyn.topk", [data, k], axis=int(axis), ret_type=ret_type,
                 is_ascend=bool(is_ascend), dtype=dtype)


def one_hot(indices, on_value, off_value, depth, axis, dtype):
    return _call("dyn.one_hot", [indices, on_value, off_value, depth], axis=int(axis),
                 dtype=str(dtype))


def expand_dims(data, axis, num_newaxis=1):
    return _call("dyn.expand_dims", [data, axis], num_newaxis=int(num_newaxis))


def squeeze(data, axis):
    return _call("dyn.squeeze", [data, axis])


def pad(data, pad_width, pad_value=0.0, pad_mode="constant"):
    return _call("dyn.nn.pad", [data, pad_width, pad_value], pad_mode=pad_mode)


def reduce(kind: str, data, axis):
    """dyn.<kind> (sum, mean, max, min, prod) over the axes in the 1-D integer tensor `axis`;
    the reduced dims stay as 1s (dyn.squeeze removes them)."""
    if kind not in _REDUCTIONS:
        raise ValueError(f"dyn reductions are {_REDUCTIONS}, got {kind!r}")
    return _call(f"dyn.{kind}", [data, axis])


def upsampling(data, scale_h, scale_w, layout="NCHW", method="nearest_neighbor",
               align_corners=False):
    return _call("dyn.nn.upsampling", [data, scale_h, scale_w], layout=layout, method=method,
                 align_corners=bool(align_corners))
