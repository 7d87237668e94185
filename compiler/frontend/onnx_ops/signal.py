"""Signal-processing ONNX ops: DFT and STFT as matmuls with constant DFT matrices; window
functions and MelWeightMatrix fold to constants (their sizes must be static)."""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Tuple

from . import dynamic_shapes
from .common import FrontendError, NodeContext, as_ints, const, converter, norm_axis, onnx_dtype, op


def _dense_const(x, matrix: np.ndarray, dtype: str):
    """x[..., L] @ matrix[L, K] -> [..., K] as one dense over the flattened leading dims."""
    return op("nn.dense", x, const(matrix.T.copy(), dtype), units=None, out_dtype="")


def _fit_length(ctx: NodeContext, x, length: int):
    """Zero-pad or truncate the last axis to `length` (as numpy's fft n=)."""
    shape = ctx.shape(x)
    n = shape[-1]
    if n > length:
        return op("strided_slice", x, begin=[0], end=[length], strides=[1],
                  axes=[len(shape) - 1], slice_mode="end")
    if n < length:
        pad = [[0, 0]] * (len(shape) - 1) + [[0, length - n]]
        return op("nn.pad", x, const(0.0, ctx.dtype(x)), pad_width=pad, pad_mode="constant")
    return x


def dft(ctx: NodeContext, x, axis: int, length: int | None, inverse: bool, onesided: bool):
    """ONNX DFT of x [..., N, ..., 1 or 2] along `axis`; the last axis holds (re[, im])."""
    shape = ctx.shape(x)
    rank = len(shape)
    dtype = ctx.dtype(x)
    if shape[-1] not in (1, 2):
        raise ctx.error(f"the last axis must be 1 (real) or 2 (complex), got shape {shape}")
    axis = norm_axis(ctx, axis, rank - 1)
    if length is None:
        length = 2 * (shape[axis] - 1) if inverse and onesided else shape[axis]
    if length <= 0:
        raise ctx.error(f"dft_length must be positive, got {length}")
    perm = [d for d in range(rank - 1) if d != axis] + [axis]
    back = list(np.argsort(perm))

    def part(i: int):
        p = op("strided_slice", x, begin=[i], end=[i + 1], strides=[1], axes=[rank - 1],
               slice_mode="end")
        return op("transpose", ctx.reshape(p, list(shape[:-1])), axes=perm)

    re = part(0)
    im = part(1) if shape[-1] == 2 else None
    lead = [shape[d] for d in perm[:-1]]
    rows = int(np.prod(lead)) if lead else 1
    if inverse and onesided:  # irfft: Hermitian input, real output of `length` samples
        bins = length // 2 + 1
        k = np.arange(bins)[:, None]
        n = np.arange(length)[None, :]
        weight = np.where((k == 0) | ((length % 2 == 0) & (k == length // 2)), 1.0, 2.0)
        angle = 2 * np.pi * k * n / length
        re_m, im_m = weight * np.cos(angle) / length, -weight * np.sin(angle) / length
        out = _dense_const(ctx.reshape(_fit_length(ctx, re, bins), [rows, bins]), re_m, dtype)
        if im is not None:
            out = op("add", out, _dense_const(ctx.reshape(_fit_length(ctx, im, bins),
                                                      [rows, bins]), im_m, dtype))
        parts = [out]
    else:
        bins = length // 2 + 1 if onesided else length
        n = np.arange(length)[:, None]
        k = np.arange(bins)[None, :]
        angle = 2 * np.pi * n * k / length
        scale = 1.0 / length if inverse else 1.0
        cos_m = np.cos(angle) * scale
        sin_m = (np.sin(angle) if inverse else -np.sin(angle)) * scale
        re2 = ctx.reshape(_fit_length(ctx, re, length), [rows, length])
        out_re, out_im = _dense_const(re2, cos_m, dtype), _dense_const(re2, sin_m, dtype)
        if im is not None:
            im2 = ctx.reshape(_fit_length(ctx, im, length), [rows, length])
            out_re = op("subtract", out_re, _dense_const(im2, sin_m, dtype))
            out_im = op("add", out_im, _dense_const(im2, cos_m, dtype))
        parts = [out_re, out_im]
    width = ctx.shape(parts[0])[-1]
    restored = [op("transpose", ctx.reshape(p, lead + [width]), axes=back) for p in parts]
    return op("stack", Tuple(restored), axis=rank - 1)


@converter("DFT", since=17)
def _dft(ctx, inputs):
    x = inputs[0]
    length = inputs[1] if len(inputs) > 1 else None
    length = None if length is None else int(as_ints(ctx.value(length, "dft_length"))[0])
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    if ctx.opset >= 20:
        axis_input = inputs[2] if len(inputs) > 2 else None
        if axis_input is not None and ctx.maybe_value(axis_input) is None:
            out = _dft_along_run_time_axis(ctx, x, axis_input, length, inverse, onesided)
            if out is not None:
                return out
        axis = -2 if axis_input is None else int(as_ints(ctx.value(axis_input, "axis"))[0])
        if axis < 0:  # counted on x including its trailing (re, im) axis
            axis += ctx.rank(x)
    else:
        axis = int(ctx.attr("axis", 1))
    return dft(ctx, x, axis, length, inverse, onesided)


def _dft_along_run_time_axis(ctx: NodeContext, x, axis, length, inverse, onesided):
    """DFT along an axis known at run time: a where over the DFT along each axis x allows
    ([0, rank - 1), negatives counted on x with its (re, im) axis), when all give one shape;
    None otherwise (the axis must then be static)."""
    rank = ctx.rank(x)
    try:
        outs = [dft(ctx, x, a, length, inverse, onesided) for a in range(rank - 1)]
    except FrontendError:  # an axis the DFT cannot take
        return None
    if len({ctx.shape(o) for o in outs}) != 1:
        return None
    axis = dynamic_shapes.scalar(ctx, axis)
    n = op("where", op("less", axis, const(np.int64(0), "int64")),
           op("add", axis, const(np.int64(rank), "int64")), axis)
    n = op("add", dynamic_shapes.checked_axes(ctx, n, rank - 1),  # in [0, rank - 1)
           dynamic_shapes.must_be_zero(ctx, op("cast", op("less", n, const(np.int64(0),
                                                                       "int64")),
                                                dtype="int64")))
    return dynamic_shapes.select_axis(ctx, n, rank - 1, lambda a: outs[a])


@converter("STFT", since=17)
def _stft(ctx, inputs):
    inputs = list(inputs) + [None] * (4 - len(inputs))
    signal, step_in, window, length_in = inputs
    shape = ctx.shape(signal)
    if len(shape) != 3:
        raise ctx.error(f"signal must be [batch, length, 1 or 2], got {shape}")
    step = int(as_ints(ctx.value(step_in, "frame_step"))[0])
    if length_in is not None:
        frame = int(as_ints(ctx.value(length_in, "frame_length"))[0])
    elif window is not None:
        frame = int(ctx.shape(window)[0])
    else:
        raise ctx.error("needs a window or a frame_length")
    if step <= 0 or frame <= 0 or frame > shape[1]:
        raise ctx.error(f"frame_step {step} / frame_length {frame} do not fit a signal of "
                        f"length {shape[1]}")
    frames = 1 + (shape[1] - frame) // step
    index = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    framed = op("take", signal, const(index, "int64"), axis=1, batch_dims=0, mode="clip")
    if window is not None:
        if ctx.shape(window) != (frame,):
            raise ctx.error(f"window must have shape ({frame},), got {ctx.shape(window)}")
        framed = op("multiply", framed, ctx.reshape(window, [1, 1, frame, 1]))
    return dft(ctx, framed, 2, frame, False, bool(ctx.attr("onesided", 1)))


def _run_time_window(ctx: NodeContext, kind: str, size, periodic: bool, dtype: str):
    """The window of a size known at run time: arange(size) and the same formulas, in float64
    like the constant path."""
    def f64(value):
        return const(np.float64(value), "float64")
    size = op("cast", ctx.reshape(size, []) if ctx.rank(size) else size, dtype="float64")
    n = op("arange", f64(0), size, f64(1), start=None, stop=None, step=None, dtype="float64")
    denom = size if periodic else op("subtract", size, f64(1))
    phase = op("divide", op("multiply", n, f64(2 * np.pi)), denom)
    if kind == "hann":
        half = op("sin", op("multiply", phase, f64(0.5)))
        values = op("multiply", half, half)
    elif kind == "hamming":
        values = op("subtract", f64(25.0 / 46.0), op("multiply", op("cos", phase),
                                                       f64(21.0 / 46.0)))
    else:
        values = op("add", op("subtract", f64(0.42), op("multiply", f64(0.5), op("cos", phase))),
                    op("multiply", f64(0.08), op("cos", op("multiply", phase, f64(2)))))
    return op("cast", values, dtype=dtype)


def _window(kind: str):
    def convert(ctx: NodeContext, inputs):
        dtype = onnx_dtype(int(ctx.attr("output_datatype", 1)), ctx.where)
        given = ctx.maybe_value(inputs[0])
        if given is None:
            return _run_time_window(ctx, kind, inputs[0], bool(ctx.attr("periodic", 1)), dtype)
        size = int(as_ints(given)[0])
        denom = size if int(ctx.attr("periodic", 1)) else size - 1
        n = np.arange(size, dtype=np.float64)
        with np.errstate(invalid="ignore"):  # one symmetric point: 0 / 0, NaN as ONNX's
            phase = 2 * np.pi * n / denom
        if kind == "hann":
            values = np.sin(phase / 2) ** 2
        elif kind == "hamming":
            values = 25.0 / 46.0 - np.cos(phase) * (21.0 / 46.0)
        else:
            values = 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2 * phase)
        return const(values.astype(dtype), dtype)
    return convert


converter("HannWindow", since=17)(_window("hann"))
converter("HammingWindow", since=17)(_window("hamming"))
converter("BlackmanWindow", since=17)(_window("blackman"))


@converter("MelWeightMatrix", since=17)
def _mel_weight_matrix(ctx, inputs):
    """Triangular mel filters [dft_length // 2 + 1, num_mel_bins], as the ONNX reference."""
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
             "upper_edge_hertz")
    bins, dft_length, rate, low, high = (ctx.value(i, w).reshape(-1)[0]
                                         for i, w in zip(inputs, names))
    bins, dft_length = int(bins), int(dft_length)
    points = np.arange(0, bins + 2)
    low_mel = 2595 * np.log1p(low / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high / 700) / np.log(10)
    mels = points * ((high_mel - low_mel) / points.shape[0]) + low_mel
    hertz = 700 * np.expm1(mels / 2595 * np.log(10))
    edges = (((dft_length + 1) * hertz) // rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    dtype = onnx_dtype(int(ctx.attr("output_datatype", 1)), ctx.where)
    return const(out.astype(dtype), dtype)
