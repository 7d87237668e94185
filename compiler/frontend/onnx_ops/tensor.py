"""Shape and data-movement ONNX ops. Shape-valued inputs that fold to constants give the
static ops; those known only at run time go through dynamic_shapes (static ops where the
symbols allow, dyn.* ops otherwise)."""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import Any as AnyDim, is_static_shape
from compiler.ir.expr import Tuple, TupleGetItem

from . import dynamic_shapes
from .common import (NodeContext, as_ints, const, converter, norm_axis, num_elements, onnx_dtype,
                     op, static_ints)


@converter("Constant")
def _constant(ctx, inputs):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in ctx.attrs:
            value = np.asarray(ctx.attrs[key])
            if key.startswith("value_int"):
                value = value.astype(np.int64)
            elif key.startswith("value_float"):
                value = value.astype(np.float32)
            return const(value, value.dtype.name)
    raise ctx.error(f"unsupported Constant attribute(s) {sorted(ctx.attrs)}")


@converter("ConstantOfShape")
def _constant_of_shape(ctx, inputs):
    fill = ctx.attr("value")
    fill = np.zeros(1, np.float32) if fill is None else np.asarray(fill).reshape(-1)
    shape = static_ints(ctx.symbolic_value(inputs[0]))
    if shape is None:  # known at run time
        return dynamic_shapes.constant_of_shape(ctx, inputs[0], fill[:1])
    return const(np.full(shape, fill[0], dtype=fill.dtype), fill.dtype.name)


@converter("Shape")
def _shape(ctx, inputs):
    shape = ctx.shape(inputs[0])
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    if not is_static_shape(shape):
        return dynamic_shapes.shape_of(ctx, inputs[0], start, end)
    return const(np.array(shape[start:end] if end is not None else shape[start:], np.int64),
                 "int64")


@converter("Size")
def _size(ctx, inputs):
    if not is_static_shape(ctx.shape(inputs[0])):
        return dynamic_shapes.size_of(ctx, inputs[0])
    return const(np.int64(num_elements(ctx.shape(inputs[0]))), "int64")


def _resolve_reshape(ctx: NodeContext, in_shape: tuple, target: list, allowzero: bool) -> list:
    out = [in_shape[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    if out.count(-1) > 1:
        raise ctx.error(f"shape {target} has more than one -1")
    total = int(np.prod(in_shape, dtype=np.int64))
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise ctx.error(f"cannot reshape {in_shape} to {target}")
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=np.int64)) != total:
        raise ctx.error(f"cannot reshape {in_shape} ({total} elements) to {target}")
    return out


@converter("Reshape")
def _reshape_v1(ctx, inputs):
    return ctx.reshape(inputs[0], _resolve_reshape(ctx, ctx.shape(inputs[0]),
                                               list(ctx.attr("shape")), False))


@converter("Reshape", since=5)
def _reshape_v5(ctx, inputs):
    allowzero = bool(ctx.attr("allowzero", 0))
    target = static_ints(ctx.symbolic_value(inputs[1]))
    if target is None or not is_static_shape(ctx.shape(inputs[0])):
        return dynamic_shapes.reshape(ctx, inputs[0], inputs[1], allowzero)
    shape = _resolve_reshape(ctx, ctx.shape(inputs[0]), target, allowzero)
    return ctx.reshape(inputs[0], shape)


@converter("Flatten")
def _flatten(ctx, inputs):
    shape = ctx.shape(inputs[0])
    axis = ctx.attr("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise ctx.error(f"axis {ctx.attr('axis')} is out of range for shape {shape}")
    return ctx.reshape(inputs[0], [num_elements(shape[:axis]), num_elements(shape[axis:])])


@converter("Transpose")
def _transpose(ctx, inputs):
    rank = ctx.rank(inputs[0])
    perm = ctx.attr("perm", list(reversed(range(rank))))
    return op("transpose", inputs[0], axes=[int(p) for p in perm])


@converter("Concat")
def _concat(ctx, inputs):
    args = [i for i in inputs if i is not None]
    axis = norm_axis(ctx, int(ctx.attr("axis", 0 if ctx.opset < 4 else None)),
                     ctx.rank(args[0]))
    return op("concatenate", Tuple(args), axis=axis)


def _axes_input(ctx: NodeContext, inputs, index: int, attr_until: int):
    """Axes from the attribute (opset < attr_until) or the optional input: ints, or the
    input's expression when its values arrive at run time."""
    if ctx.opset < attr_until:
        axes = ctx.attr("axes")
        return None if axes is None else list(axes)
    if len(inputs) > index and inputs[index] is not None:
        value = ctx.maybe_value(inputs[index])
        return inputs[index] if value is None else as_ints(value)
    return None


def _squeeze(attr_until: int):
    def convert(ctx, inputs):
        shape = ctx.shape(inputs[0])
        axes = _axes_input(ctx, inputs, 1, attr_until)
        if axes is None:
            if any(isinstance(d, AnyDim) for d in shape):  # found by tests/fuzz (a mismatch)
                raise ctx.error(f"Squeeze without axes of shape {shape} is not supported: "
                                "whether a dynamic dim goes depends on its size at run time")
            axes = [i for i, d in enumerate(shape) if d == 1]
        if not isinstance(axes, list):  # at run time: dyn.squeeze checks the dims are 1
            dynamic_shapes.static_length(ctx, axes, "axes")
            return op("dyn.squeeze", inputs[0], dynamic_shapes.checked_axes(ctx, axes,
                                                                           len(shape)))
        axes = sorted(norm_axis(ctx, a, len(shape)) for a in axes)
        for a in axes:  # a dynamic dim must be 1 at run time (the reshape checks it)
            if not isinstance(shape[a], AnyDim) and shape[a] != 1:
                raise ctx.error(f"cannot squeeze axis {a} of shape {shape} (size {shape[a]})")
        return ctx.reshape(inputs[0], [d for i, d in enumerate(shape) if i not in axes])
    return convert


def _unsqueeze(attr_until: int):
    def convert(ctx, inputs):
        shape = list(ctx.shape(inputs[0]))
        axes = _axes_input(ctx, inputs, 1, attr_until)
        if axes is None:
            raise ctx.error("axes are required")
        if not isinstance(axes, list):
            return dynamic_shapes.unsqueeze(ctx, inputs[0], axes)
        rank = len(shape) + len(axes)
        axes = sorted(norm_axis(ctx, a, rank) for a in axes)
        if len(set(axes)) != len(axes):
            raise ctx.error(f"axes {axes} contain duplicates")
        for a in axes:
            shape.insert(a, 1)
        return ctx.reshape(inputs[0], shape)
    return convert


converter("Squeeze")(_squeeze(13))
converter("Squeeze", since=13)(_squeeze(13))
converter("Unsqueeze")(_unsqueeze(13))
converter("Unsqueeze", since=13)(_unsqueeze(13))


def _strided_slice(x, begin, end, strides, axes):
    return op("strided_slice", x, begin=begin, end=end, strides=strides, axes=axes,
              slice_mode="end")


def _slice_axis(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX clamping of one slice, as (begin, end) for strided_slice's numpy semantics.

    The spec adds dim to negative starts/ends, then clamps start to [0, dim] and end to
    [0, dim] for positive steps; for negative steps start to [0, dim-1] and end to [-1, dim-1].
    This differs from numpy/Python slicing, where a negative-step start below -dim makes the
    slice empty (ONNX starts from element 0; onnxruntime does the same). The result holds no
    negative value that strided_slice would count from the end, except an end of -(dim+1),
    which is how numpy spells "past element 0" for a negative step.
    """
    def adjusted(v: int) -> int:
        return v + dim if v < 0 else v

    if step > 0:
        return min(max(adjusted(start), 0), dim), min(max(adjusted(end), 0), dim)
    begin = min(max(adjusted(start), 0), max(dim - 1, 0))
    stop = min(max(adjusted(end), -1), dim - 1)
    return begin, (-(dim + 1) if stop < 0 else stop)


def _do_slice(ctx, x, starts, ends, axes, steps, exprs=None):
    """strided_slice for static starts/ends (ints, or a symbol equal to the axis' dim); when
    a bound depends on data, dyn.strided_slice reads `exprs` (the starts/ends inputs)."""
    shape = ctx.shape(x)
    rank = len(shape)
    axes = [norm_axis(ctx, a, rank) for a in (range(len(starts)) if axes is None else axes)]
    steps = [1] * len(starts) if steps is None else steps
    if any(int(st) == 0 for st in steps):
        raise ctx.error("slice step cannot be 0")
    bounds = [(dynamic_shapes.slice_bound(s, shape[a]), dynamic_shapes.slice_bound(e, shape[a]))
              for s, e, a in zip(starts, ends, axes)]
    if any(None in b for b in bounds):
        return dynamic_shapes.dyn_slice(ctx, x, exprs[0], exprs[1], axes, [int(s) for s in steps])
    begin, end, strides, out_axes = [], [], [], []
    for (s, e), a, st in zip(bounds, axes, steps):
        if isinstance(shape[a], AnyDim):  # numpy's clamping at run time
            b, en = s, e
        else:
            b, en = _slice_axis(shape[a], s, e, int(st))
        begin.append(b)
        end.append(en)
        strides.append(int(st))
        out_axes.append(a)
    return _strided_slice(x, begin, end, strides, out_axes)


@converter("Slice")
def _slice_v1(ctx, inputs):
    return _do_slice(ctx, inputs[0], list(ctx.attr("starts")), list(ctx.attr("ends")),
                     ctx.attr("axes"), None)


@converter("Slice", since=10)
def _slice_v10(ctx, inputs):
    def opt(i, what):
        return as_ints(ctx.value(inputs[i], what)) if len(inputs) > i and inputs[i] is not None \
            else None

    def bound(i):  # ints, symbols, or None where the value depends on data
        value = ctx.symbolic_value(inputs[i])
        return list(np.asarray(value).reshape(-1)) if value is not None else None
    starts, ends = bound(1), bound(2)
    if any(len(inputs) > i and inputs[i] is not None and ctx.maybe_value(inputs[i]) is None
           for i in (3, 4)):  # axes or steps at run time
        return dynamic_shapes.slice_run_time_axes(
            ctx, inputs[0], inputs[1], inputs[2], *(inputs[i] if len(inputs) > i else None
                                                   for i in (3, 4)))
    axes, steps = opt(3, "axes"), opt(4, "steps")
    if starts is None or ends is None:  # data-dependent: the number of bounds is static
        n = [ctx.shape(inputs[i])[0] for i in (1, 2)]
        if any(isinstance(d, AnyDim) for d in n):
            raise ctx.error("starts and ends must have a static length")
        starts = starts or [AnyDim()] * n[0]
        ends = ends or [AnyDim()] * n[1]
    return _do_slice(ctx, inputs[0], starts, ends, axes, steps, (inputs[1], inputs[2]))


def _normalize_indices(ctx, indices, dim: int):
    """Static indices with negatives counted from the end and checked now; run-time ones
    go to the kernels as they are (take/gather in "fast" mode count negatives from the end
    and fail with an index error outside [-dim, dim))."""
    value = ctx.maybe_value(indices)
    if value is None:
        return indices
    fixed = np.where(value < 0, value + dim, value).astype(ctx.dtype(indices))
    if (fixed < 0).any() or (fixed >= dim).any():
        raise ctx.error(f"indices out of range for a dimension of size {dim}")
    return const(fixed, ctx.dtype(indices))


def _axis_and_indices(ctx, data, indices) -> tuple:
    """The attribute axis (normalised) and the indices (see _normalize_indices)."""
    shape = ctx.shape(data)
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), len(shape))
    return axis, _normalize_indices(ctx, indices, shape[axis])


@converter("Gather")
def _gather(ctx, inputs):
    data, indices = inputs
    axis, indices = _axis_and_indices(ctx, data, indices)
    return op("take", data, indices, axis=axis, batch_dims=0, mode="fast")


@converter("GatherElements")
def _gather_elements(ctx, inputs):
    data, indices = inputs
    axis, indices = _axis_and_indices(ctx, data, indices)
    return op("gather", data, indices, axis=axis)


@converter("GatherND")
def _gather_nd(ctx, inputs):
    data, indices = inputs
    irank = ctx.rank(indices)
    index_rank = ctx.shape(indices)[-1]
    moved = op("transpose", indices, axes=[irank - 1] + list(range(irank - 1)))
    return op("gather_nd", data, moved, batch_dims=int(ctx.attr("batch_dims", 0)),
              index_rank=int(index_rank))


@converter("Expand", since=8)
def _expand(ctx, inputs):
    x = inputs[0]
    target = static_ints(ctx.symbolic_value(inputs[1]))
    if target is None or not is_static_shape(ctx.shape(x)):
        return dynamic_shapes.expand(ctx, x, inputs[1])
    out = list(ctx.broadcast_shapes(("input shape", ctx.shape(x)), ("shape", target)))
    if out == list(ctx.shape(x)):
        return x
    return op("broadcast_to", x, shape=out)


@converter("Tile", since=6)
def _tile(ctx, inputs):
    reps = static_ints(ctx.symbolic_value(inputs[1]))
    if reps is None:
        return dynamic_shapes.tile(ctx, inputs[0], inputs[1])
    return op("tile", inputs[0], reps=reps)


@converter("Range", since=11)
def _range(ctx, inputs):
    values = [ctx.maybe_value(i) for i in inputs[:3]]
    if any(v is None for v in values):  # bounds known at run time
        return dynamic_shapes.arange(ctx, *inputs[:3])
    if any(np.size(v) != 1 for v in values):
        raise ctx.error(f"start, limit and delta must be scalars, got shapes "
                        f"{[np.shape(v) for v in values]}")
    start, limit, delta = (np.asarray(v).reshape(()) for v in values)  # [1] from a Slice too
    dtype = ctx.dtype(inputs[0])
    count = max(int(np.ceil((limit - start) / delta)), 0)
    return const(start + np.arange(count, dtype=dtype) * delta, dtype)


def _split_sizes(ctx, dim: int, split, num_outputs: int) -> list:
    if split is not None:
        if sum(split) != dim:
            raise ctx.error(f"split sizes {split} do not add up to the axis length {dim}")
        return list(split)
    if ctx.opset >= 18 and dim % num_outputs:  # uneven split: the last chunk is smaller
        chunk = -(-dim // num_outputs)
        return [chunk] * (num_outputs - 1) + [dim - chunk * (num_outputs - 1)]
    if dim % num_outputs:
        raise ctx.error(f"axis length {dim} does not split into {num_outputs} equal parts")
    return [dim // num_outputs] * num_outputs


def _split(ctx, inputs, split):
    x = inputs[0]
    shape = ctx.shape(x)
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), len(shape))
    count = int(ctx.attr("num_outputs", ctx.num_outputs()))
    sizes = _split_sizes(ctx, shape[axis], split, count)
    bounds = np.cumsum(sizes).tolist()[:-1]
    parts = op("split", x, indices_or_sections=bounds, axis=axis)
    return [TupleGetItem(parts, i) for i in range(len(sizes))]


@converter("Split")
def _split_v1(ctx, inputs):
    split = ctx.attr("split")
    if split is None and len(inputs) > 1 and inputs[1] is not None:
        split = as_ints(ctx.value(inputs[1], "split"))
    return _split(ctx, inputs, None if split is None else list(split))


@converter("Split", since=13)
def _split_v13(ctx, inputs):
    given = inputs[1] if len(inputs) > 1 else None
    split = ctx.maybe_value(given)
    if given is not None and split is None:  # sizes at run time
        x = inputs[0]
        axis = norm_axis(ctx, int(ctx.attr("axis", 0)), ctx.rank(x))
        return dynamic_shapes.split(ctx, x, given, axis, ctx.num_outputs())
    return _split(ctx, inputs, None if split is None else as_ints(split))


def _pad_common(ctx, x, pads: list, mode: str, value, axes=None):
    shape = ctx.shape(x)
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [norm_axis(ctx, a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads must have {2 * len(axes)} values, got {len(pads)}")
    width = [[0, 0] for _ in range(rank)]
    for i, a in enumerate(axes):
        width[a] = [int(pads[i]), int(pads[i + len(axes)])]
    # negative pads crop
    if any(b < 0 or e < 0 for b, e in width):
        begin = [max(-b, 0) for b, _ in width]
        end = [shape[i] - max(-e, 0) for i, (_, e) in enumerate(width)]
        x = _strided_slice(x, begin, end, [1] * rank, list(range(rank)))
        width = [[max(b, 0), max(e, 0)] for b, e in width]
    if all(b == 0 and e == 0 for b, e in width):
        return x
    if mode == "wrap":
        return _wrap_pad(ctx, x, width)
    if mode not in ("constant", "edge", "reflect"):
        raise ctx.error(f"pad mode {mode!r} is not supported")
    dtype = ctx.dtype(x)
    fill = value if value is not None else const(0, dtype)
    return op("nn.pad", x, fill, pad_width=[tuple(w) for w in width], pad_mode=mode)


def _wrap_pad(ctx, x, width):
    for axis, (before, after) in enumerate(width):
        if not before and not after:
            continue
        dim = ctx.shape(x)[axis]
        parts = []
        if before:
            parts.append(_strided_slice(x, [dim - before], [dim], [1], [axis]))
        parts.append(x)
        if after:
            parts.append(_strided_slice(x, [0], [after], [1], [axis]))
        x = op("concatenate", Tuple(parts), axis=axis)
    return x


@converter("Pad")
def _pad_v1(ctx, inputs):
    pads = list(ctx.attr("pads", ctx.attr("paddings", [])))
    x = inputs[0]
    return _pad_common(ctx, x, pads, ctx.attr("mode", "constant"),
                       const(ctx.attr("value", 0.0), ctx.dtype(x)))


@converter("Pad", since=11)
def _pad_v11(ctx, inputs):
    x = inputs[0]
    value = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    if value is not None and ctx.shape(value):
        value = ctx.reshape(value, [])
    axes = _axes_input(ctx, inputs, 3, 0)
    pads, mode = ctx.maybe_value(inputs[1]), ctx.attr("mode", "constant")
    run_time_axes = axes is not None and not isinstance(axes, list)
    if (pads is None or run_time_axes) and mode in dynamic_shapes.PAD_MODES:
        return dynamic_shapes.pad(ctx, x, inputs[1], mode, value, axes)
    # wrap: only for pads and axes known at import (StaticInputRequired otherwise)
    if run_time_axes:
        axes = as_ints(ctx.value(inputs[3], "axes"))
    if pads is None:
        pads = ctx.value(inputs[1], "pads")
    return _pad_common(ctx, x, as_ints(pads), mode, value, axes)


def _space_depth(to_depth: bool):
    def convert(ctx, inputs):
        x = inputs[0]
        n, c, h, w = ctx.shape(x)
        b = int(ctx.attr("blocksize"))
        if to_depth:
            y = ctx.reshape(x, [n, c, h // b, b, w // b, b])
            crd = ctx.attr("mode", "DCR") == "CRD"
            y = op("transpose", y, axes=[0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4])
            return ctx.reshape(y, [n, c * b * b, h // b, w // b])
        if ctx.attr("mode", "DCR") == "DCR":
            y = ctx.reshape(x, [n, b, b, c // (b * b), h, w])
            y = op("transpose", y, axes=[0, 3, 4, 1, 5, 2])
        else:
            y = ctx.reshape(x, [n, c // (b * b), b, b, h, w])
            y = op("transpose", y, axes=[0, 1, 4, 2, 5, 3])
        return ctx.reshape(y, [n, c // (b * b), h * b, w * b])
    return convert


converter("DepthToSpace")(_space_depth(False))
converter("SpaceToDepth")(_space_depth(True))


@converter("Trilu", since=14)
def _trilu(ctx, inputs):
    x = inputs[0]
    shape = ctx.shape(x)
    given = inputs[1] if len(inputs) > 1 else None
    rows, cols = shape[-2], shape[-1]
    if given is not None and ctx.maybe_value(given) is None and \
            not isinstance(rows, AnyDim) and not isinstance(cols, AnyDim):
        # k at run time: keep where col - row >= k (upper) or <= k (lower)
        offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
        keep = "greater_equal" if ctx.attr("upper", 1) else "less_equal"
        mask = op(keep, const(offset.astype(np.int64), "int64"),
                  dynamic_shapes.scalar(ctx, given))
        return op("where", mask, x, const(0, ctx.dtype(x)))
    k = int(ctx.value(given, "k")) if given is not None else 0
    ones = np.ones((rows, cols), bool)
    mask = np.triu(ones, k) if ctx.attr("upper", 1) else np.tril(ones, k)
    return op("where", const(mask, "bool"), x, const(0, ctx.dtype(x)))


@converter("EyeLike", since=9)
def _eye_like(ctx, inputs):
    shape = ctx.shape(inputs[0])
    dtype = ctx.dtype(inputs[0])
    if ctx.attr("dtype") is not None:
        dtype = onnx_dtype(ctx.attr("dtype"), ctx.where)
    return const(np.eye(shape[0], shape[1], k=int(ctx.attr("k", 0)), dtype=dtype), dtype)


@converter("OneHot", since=9)
def _one_hot(ctx, inputs):
    indices, depth, values = inputs
    if ctx.maybe_value(depth) is None:
        return _run_time_one_hot(ctx, indices, depth, values)
    depth = int(np.asarray(ctx.value(depth, "depth")).reshape(-1)[0])
    rank = ctx.rank(indices)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), rank + 1)
    idx_dtype = ctx.dtype(indices)
    if not idx_dtype.startswith("int"):
        indices = op("cast", indices, dtype="int64")
        idx_dtype = "int64"
    indices = op("where", op("less", indices, const(0, idx_dtype)),
                 op("add", indices, const(depth, idx_dtype)), indices)
    iota_shape = [1] * (rank + 1)
    iota_shape[axis] = depth
    iota = const(np.arange(depth, dtype=idx_dtype).reshape(iota_shape), idx_dtype)
    expanded = ctx.reshape(indices, [*ctx.shape(inputs[0])[:axis], 1,
                                 *ctx.shape(inputs[0])[axis:]])
    hit = op("equal", expanded, iota)
    off = op("take", values, const(0, "int64"), axis=0, batch_dims=0, mode="clip")
    on = op("take", values, const(1, "int64"), axis=0, batch_dims=0, mode="clip")
    return op("where", hit, on, off)


def _run_time_one_hot(ctx, indices, depth, values):
    """OneHot of a depth known at run time: dyn.one_hot, negative indices counted from the
    end of depth first (dyn.one_hot leaves them off)."""
    depth = dynamic_shapes.scalar(ctx, depth)
    if ctx.dtype(indices) != "int64":
        indices = op("cast", indices, dtype="int64")
    indices = op("where", op("less", indices, const(0, "int64")), op("add", indices, depth),
                 indices)
    rank = ctx.rank(indices)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), rank + 1)
    off, on = (op("take", values, const(i, "int64"), axis=0, batch_dims=0, mode="clip")
               for i in (0, 1))
    return op("dyn.one_hot", indices, on, off, depth, axis=axis, dtype=ctx.dtype(values))

