"""Resize and Upsample as static gathers with per-axis interpolation weights.

Shapes are static, so for every resized axis the source indices and weights of each output
position are computed here in numpy (the way ONNX's reference does, one axis at a time:
interpolation is separable). The graph then holds `take` along the axis per kernel tap, times
a weight vector, summed: exact for every mode and coordinate transform, and injective.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.dims import is_static_shape

from . import dynamic_shapes
from .common import NodeContext, as_ints, const, converter, op


def _coeff_fn(ctx: NodeContext, mode: str, antialias: bool):
    from onnx.reference.ops import op_resize as ref
    if mode == "nearest":
        nearest_mode = ctx.attr("nearest_mode", "round_prefer_floor")
        return lambda ratio, scale: ref._nearest_coeffs(ratio, mode=nearest_mode)
    if mode == "linear":
        return ref._linear_coeffs_antialias if antialias else ref._linear_coeffs
    if mode == "cubic":
        a = float(ctx.attr("cubic_coeff_a", -0.75))
        fn = ref._cubic_coeffs_antialias if antialias else ref._cubic_coeffs
        return lambda ratio, scale: fn(ratio, scale, A=a)
    raise ctx.error(f"mode must be nearest, linear or cubic, got {mode!r}")


def axis_taps(ctx: NodeContext, in_len: int, out_len: int, scale: float, coeffs, roi,
              transform: str, exclude_outside: bool):
    """(indices [out, n], weights [out, n], extrapolated mask [out] or None) for one axis."""
    from onnx.reference.ops.op_resize import _compute_x_ori
    y = np.arange(out_len, dtype=np.float64)
    x_ori, extrapolated = _compute_x_ori(transform, y, scale, in_len, scale * in_len, out_len,
                                         roi)
    x_int = np.floor(x_ori).astype(np.int64)
    ratios = np.where(x_ori == x_int, 1.0, x_ori - x_int)
    weights = np.stack([np.asarray(coeffs(float(r), scale), np.float64) for r in ratios])
    n = weights.shape[1]
    pad = int(np.ceil(n / 2))
    x_padded = x_ori + pad
    p = np.floor(x_padded).astype(np.int64)
    frac = x_padded - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        offset = np.where(frac <= 0.5, base, base + 1)
    idx = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        weights = np.where((idx < 0) | (idx >= in_len), 0.0, weights)
        total = weights.sum(axis=-1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, in_len - 1), weights, extrapolated


def _one_hot_rows(idx: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """The source index of each output position when every position copies one input
    (nearest, or linear on aligned positions); None when some position mixes inputs."""
    ones = weights == 1.0
    if not np.all(ones.sum(axis=1) == 1) or np.any(weights[~ones] != 0.0):
        return None
    return idx[ones]


def _resize_axis(ctx, x, axis: int, taps, extrapolation_value: float):
    """Interpolation along one axis: sum over taps of take(x, tap index) * tap weight.

    A tap with weight 0 at a position contributes nothing there, not 0 * x (NaN for an
    infinite x): positions that copy one input are one gather, and a tap whose weights are
    zero at some positions is masked there (onnxruntime's nearest and antialiased modes agree;
    its plain linear mode still adds 0 * x at a clamped edge).
    """
    idx, weights, extrapolated = taps
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    bshape = [1] * len(shape)
    bshape[axis] = idx.shape[0]
    copied = _one_hot_rows(idx, weights)
    if copied is not None:
        idx, weights = copied[:, None], np.ones((len(copied), 1))
    out = None
    for k in range(idx.shape[1]):
        w = weights[:, k]
        if not w.any():
            continue
        picked = op("take", x, const(idx[:, k].astype(np.int64), "int64"), axis=axis,
                    batch_dims=0, mode="clip")
        if not np.all(w == 1.0):
            compute = dtype if dtype.startswith("float") else "float64"
            picked = op("multiply", picked if compute == dtype else op("cast", picked,
                                                                       dtype=compute),
                        const(w.reshape(bshape), compute))
            if not w.all():
                picked = op("where", const((w != 0).reshape(bshape), "bool"), picked,
                            const(0, compute))
        out = picked if out is None else op("add", out, picked)
    if out is None:
        out = const(np.zeros([idx.shape[0] if i == axis else d for i, d in enumerate(shape)],
                             dtype), dtype)
    if extrapolated is not None and extrapolated.any():
        out_dtype = ctx.dtype(out) if not isinstance(out, type(None)) else dtype
        out = op("where", const(extrapolated.reshape(bshape), "bool"),
                 const(extrapolation_value, out_dtype), out)
    return out


def resize(ctx: NodeContext, x, out_shape: list, scales: list, roi, mode: str, transform: str,
           antialias: bool = False):
    """x resized to out_shape, one axis at a time (skipping the unchanged ones)."""
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    coeffs = _coeff_fn(ctx, mode, antialias)
    exclude = bool(ctx.attr("exclude_outside", 0))
    extrapolation = float(ctx.attr("extrapolation_value", 0.0))
    rank = len(shape)

    def resized(axis: int) -> bool:
        axis_roi = None if roi is None else [roi[axis], roi[axis + rank]]
        return not (out_shape[axis] == shape[axis] and np.isclose(scales[axis], 1.0) and (
            axis_roi is None or (np.isclose(axis_roi[0], 0) and np.isclose(axis_roi[1], 1))))

    axes = [a for a in range(rank) if resized(a)]
    # float32: the last axis first, as its own kernel, then the others. Its taps are gathers
    # (the others pick whole rows); fused into one kernel, each output recomputed the gathers
    # of every row tap (4 per value for a bilinear 2x upsample instead of 1).
    gather_first = dtype == "float32" and len(axes) > 1 and axes[-1] == rank - 1
    if gather_first:
        axes = axes[-1:] + axes[:-1]
    out = x
    for n, axis in enumerate(axes):
        axis_roi = None if roi is None else [roi[axis], roi[axis + rank]]
        taps = axis_taps(ctx, shape[axis], out_shape[axis], float(scales[axis]), coeffs,
                         axis_roi, transform, exclude)
        out = _resize_axis(ctx, out, axis, taps, extrapolation)
        if gather_first and n == 0:
            out = op("annotation.stop_fusion", out)
    if ctx.dtype(out) != dtype:  # integer data interpolated in float64: round like the reference
        out = op("cast", op("round", out) if mode != "nearest" else out, dtype=dtype)
    return out


def _sizes_and_scales(ctx, shape, scales, sizes, axes):
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    full_scales = [1.0] * rank
    full_sizes = list(shape)
    if sizes is not None and len(sizes):
        for a, s in zip(axes, sizes):
            full_sizes[a] = int(s)
        full_scales = [full_sizes[i] / shape[i] if shape[i] else 1.0 for i in range(rank)]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            scale = pick(full_scales[a] for a in axes)
            full_scales = [scale if i in axes else 1.0 for i in range(rank)]
            full_sizes = [int(scale * shape[i] + 0.5) if i in axes else shape[i]
                          for i in range(rank)]
    elif scales is not None and len(scales):
        for a, s in zip(axes, scales):
            full_scales[a] = float(s)
        full_sizes = [int(np.floor(full_scales[i] * shape[i])) for i in range(rank)]
    else:
        raise ctx.error("one of scales or sizes must be given")
    return full_sizes, full_scales, axes


def _full_roi(roi, axes, rank):
    if roi is None or not len(roi):
        return None
    roi = [float(v) for v in np.asarray(roi).reshape(-1)]
    if axes is None or len(axes) == rank:
        return roi
    full = [0.0] * rank + [1.0] * rank
    for i, a in enumerate(axes):
        full[a], full[a + rank] = roi[i], roi[i + len(axes)]
    return full


# (coordinate transform, nearest_mode) pairs under which nearest with a whole scale k picks
# source i // k, as nn.upsampling's nearest does
_NEAREST_AS_REPEAT = {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
                      ("half_pixel", "round_prefer_ceil"), ("pytorch_half_pixel",
                                                            "round_prefer_floor"),
                      ("pytorch_half_pixel", "round_prefer_ceil")}


def _dynamic_resize(ctx, x, scales_expr, mode: str, transform: str):
    """Resize of a tensor with dynamic dims, or with scales known at run time: nn.upsampling
    (dyn.nn.upsampling) where its interpolation is ONNX's: a 4-D NCHW tensor, whole scales on
    H and W only, nearest picking i // scale or linear asymmetric / align_corners. Otherwise
    an error for dynamic dims, None for a static tensor (its scales must then be static)."""
    nearest = ctx.attr("nearest_mode", "round_prefer_floor")
    method = "nearest_neighbor" if mode == "nearest" and (transform, nearest) in \
        _NEAREST_AS_REPEAT else "bilinear" if mode == "linear" and transform in \
        ("asymmetric", "align_corners") else None
    scales = None if scales_expr is None else ctx.maybe_value(scales_expr)
    whole = scales is not None and len(scales) == 4 and \
        all(float(s) == int(s) >= 1 for s in scales) and list(scales[:2]) == [1, 1]
    if method is None or ctx.rank(x) != 4 or scales_expr is None or \
            (scales is not None and not whole) or ctx.attr("axes") is not None:
        if is_static_shape(ctx.shape(x)):
            return None  # only the scales are dynamic: the caller asks for them static
        raise ctx.error(f"Resize with dynamic shapes takes a 4-D NCHW input, scales (whole "
                        f"numbers, 1 on N and C) and nearest mode picking i // scale or linear "
                        f"asymmetric/align_corners; got mode={mode!r}, "
                        f"coordinate_transformation_mode={transform!r}, nearest_mode="
                        f"{nearest!r}, scales={None if scales is None else list(scales)}")
    align = transform == "align_corners"
    if scales is not None:
        return op("nn.upsampling", x, scale_h=float(scales[2]), scale_w=float(scales[3]),
                  layout="NCHW", method=method, align_corners=align)
    # what this covers is checked at run time: 1 on N and C, whole numbers >= 1 on H and W
    scales = op("cast", scales_expr, dtype="float32")
    one = const(np.float32(1), "float32")
    bad = op("logical_or", op("not_equal", scales, op("floor", scales)), op("less", scales, one))
    bad = op("logical_or", bad, op("logical_and", const(np.array([1, 1, 0, 0], bool), "bool"),
                                   op("not_equal", scales, one)))
    guard = op("cast", dynamic_shapes.must_be_zero(ctx, op("sum", op("cast", bad, dtype="int64"),
                                                         axis=None, keepdims=False,
                                                         exclude=False)), dtype="float32")
    picks = [op("add", op("take", scales, const(np.int64(i), "int64"), axis=0, batch_dims=0,
                          mode="fast"), guard) for i in (2, 3)]
    return op("dyn.nn.upsampling", x, *picks, layout="NCHW", method=method, align_corners=align)


@converter("Resize", since=10)
def _resize(ctx, inputs):
    x = inputs[0]
    shape = ctx.shape(x)
    scales_at = 1 if ctx.opset < 11 else 2
    scale_input = inputs[scales_at] if len(inputs) > scales_at else None
    if not is_static_shape(shape) or (scale_input is not None and
                                      ctx.maybe_value(scale_input) is None):
        transform = ctx.attr("coordinate_transformation_mode",
                             "half_pixel" if ctx.opset >= 11 else "asymmetric")
        if ctx.opset < 11:
            ctx.attrs.setdefault("nearest_mode", "floor")
        out = _dynamic_resize(ctx, x, scale_input, ctx.attr("mode", "nearest"), transform)
        if out is not None:
            return out
    if ctx.opset < 11:
        scales, sizes, roi = ctx.value(inputs[1], "scales"), None, None
    else:
        def opt(i, what):
            return ctx.value(inputs[i], what) if len(inputs) > i and inputs[i] is not None \
                else None
        roi, scales, sizes = opt(1, "roi"), opt(2, "scales"), opt(3, "sizes")
    axes = ctx.attr("axes")
    out_sizes, full_scales, axes_n = _sizes_and_scales(
        ctx, shape, None if scales is None else [float(s) for s in np.asarray(scales)],
        None if sizes is None else as_ints(sizes), axes)
    transform = ctx.attr("coordinate_transformation_mode",
                         "half_pixel" if ctx.opset >= 11 else "asymmetric")
    mode = ctx.attr("mode", "nearest")
    if ctx.opset < 11 and mode == "nearest":
        ctx.attrs.setdefault("nearest_mode", "floor")  # Resize-10 nearest is floor(x / scale)
    return resize(ctx, x, out_sizes, full_scales, _full_roi(roi, axes, len(shape)), mode,
                  transform, bool(ctx.attr("antialias", 0)))


def _upsample(ctx, x, scales):
    shape = ctx.shape(x)
    scales = [float(s) for s in scales]
    out_sizes = [int(np.floor(s * d)) for s, d in zip(scales, shape)]
    mode = ctx.attr("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    ctx.attrs.setdefault("nearest_mode", "floor")
    return resize(ctx, x, out_sizes, scales, None, mode, "asymmetric")


@converter("Upsample", since=7)
def _upsample_v7(ctx, inputs):
    return _upsample(ctx, inputs[0], ctx.attr("scales"))


@converter("Upsample", since=9)
def _upsample_v9(ctx, inputs):
    if ctx.maybe_value(inputs[1]) is None:  # scales at run time
        mode = ctx.attr("mode", "nearest")
        ctx.attrs.setdefault("nearest_mode", "floor")
        out = _dynamic_resize(ctx, inputs[0], inputs[1],
                              "linear" if mode == "bilinear" else mode, "asymmetric")
        if out is not None:
            return out
    return _upsample(ctx, inputs[0], np.asarray(ctx.value(inputs[1], "scales")).reshape(-1))
