"""Neural-network ONNX ops: convolutions, pooling, Gemm/MatMul, softmax (normalisations are
in norm.py)."""
from __future__ import annotations

import itertools

import numpy as np

from compiler.ir.dims import Any as AnyDim
from compiler.op.window import pool_counts
from .common import NodeContext, const, converter, norm_axis, num_elements, op, reshape


def window_pads(ctx: NodeContext, spatial, kernel, strides, dilations) -> tuple[list, list]:
    """(begin, end) pads per spatial dim from `pads` or auto_pad SAME_UPPER/SAME_LOWER/VALID."""
    n = len(spatial)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else big)
            end.append(big if auto_pad == "SAME_UPPER" else small)
        return begin, end
    if auto_pad == "VALID":
        return [0] * n, [0] * n
    if auto_pad not in ("NOTSET", ""):
        raise ctx.error(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got "
                        f"{auto_pad!r}")
    pads = list(ctx.attr("pads", [0] * (2 * n)))
    if len(pads) != 2 * n:
        raise ctx.error(f"pads must have {2 * n} values for {n} spatial dims, got {pads}")
    return pads[:n], pads[n:]


def _max_pool_indices(ctx: NodeContext, x, pooled, kernel, a):
    """MaxPool's Indices output: the flat index of the first maximum in each window (the
    spatial part row-major, or column-major with storage_order=1), for 1-D to 3-D pools.

    Each kernel tap is a gather at static positions; scanning the taps backwards, a tap whose
    value equals the pooled maximum overwrites the index, so the first one wins."""
    shape = ctx.shape(x)
    n, c, spatial = shape[0], shape[1], tuple(shape[2:])
    out_spatial = tuple(ctx.shape(pooled)[2:])
    order = "F" if int(ctx.attr("storage_order", 0)) == 1 else "C"
    dtype = ctx.dtype(x)
    low = -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    flat_x = ctx.reshape(x, [n, c, num_elements(spatial)])
    grid = np.meshgrid(*[np.arange(d) for d in out_spatial], indexing="ij")
    starts = [g * s - p for g, s, p in zip(grid, a["strides"], a["begin"])]
    result = None
    for taps in reversed(list(itertools.product(*[range(k) for k in kernel]))):
        coords = [st + t * d for st, t, d in zip(starts, taps, a["dilations"])]
        valid = np.logical_and.reduce([(q >= 0) & (q < d) for q, d in zip(coords, spatial)])
        coords = [np.clip(q, 0, d - 1) for q, d in zip(coords, spatial)]
        where = const(np.ravel_multi_index(coords, spatial).reshape(-1), "int64")
        picked = ctx.reshape(op("take", flat_x, where, axis=2, batch_dims=0, mode="clip"),
                         [n, c, *out_spatial])
        picked = op("where", const(valid, "bool"), picked, const(low, dtype))
        index = const(np.ravel_multi_index(coords, spatial, order=order), "int64")
        result = index if result is None else op("where", op("equal", picked, pooled), index,
                                                 result)
    offsets = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * num_elements(spatial)
    return op("add", op("broadcast_to", result, shape=[n, c, *out_spatial]),
              const(offsets.reshape(n, c, *[1] * len(spatial)).astype(np.int64), "int64"))


def _spatial_attrs(ctx: NodeContext, x, kernel) -> dict:
    shape = ctx.shape(x)
    n = len(shape) - 2
    if n not in (1, 2, 3):
        raise ctx.error(f"only 1-D, 2-D and 3-D spatial inputs (rank 3 to 5) are supported, "
                        f"got shape {shape}")
    strides = list(ctx.attr("strides", [1] * n))
    dilations = list(ctx.attr("dilations", [1] * n))
    begin, end = window_pads(ctx, shape[2:], kernel, strides, dilations)
    return {"n": n, "strides": strides, "dilations": dilations, "begin": begin, "end": end}


def _lift(values: list, n: int, fill) -> list:
    """1-D windows run as 2-D ones over a height-1 image."""
    return list(values) if n == 2 else [fill] + list(values)


def to_2d(ctx, x):
    shape = ctx.shape(x)
    return x if len(shape) == 4 else ctx.reshape(x, list(shape[:2]) + [1, shape[2]])


def from_2d(ctx, y, n):
    if n == 2:
        return y
    shape = ctx.shape(y)
    return ctx.reshape(y, [shape[0], shape[1], shape[3]])


def conv2d_attrs(ctx: NodeContext, x, w, kernel: list, a: dict) -> dict:
    """nn.conv2d's attributes for a 1-D or 2-D ONNX Conv (1-D runs over height-1 images)."""
    n = a["n"]
    return {"strides": _lift(a["strides"], n, 1),
            "padding": _lift(a["begin"], n, 0) + _lift(a["end"], n, 0),
            "dilation": _lift(a["dilations"], n, 1), "groups": int(ctx.attr("group", 1)),
            "channels": int(ctx.shape(w)[0]), "kernel_size": _lift(kernel, n, 1)}


def conv_window(ctx: NodeContext, x, w) -> tuple[int, list, dict]:
    """(spatial rank, kernel shape, window attributes) of an ONNX Conv-like node."""
    kernel = list(ctx.attr("kernel_shape", ctx.shape(w)[2:]))
    a = _spatial_attrs(ctx, x, kernel)
    return a["n"], kernel, a


@converter("Conv")
def _conv(ctx, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    n, kernel, a = conv_window(ctx, x, w)
    if n == 3:
        return _conv3d(ctx, x, w, bias, kernel, a)
    out = op("nn.conv2d", to_2d(ctx, x), to_2d(ctx, w), **conv2d_attrs(ctx, x, w, kernel, a))
    if bias is not None:
        out = op("nn.bias_add", out, bias, axis=1)
    return from_2d(ctx, out, n)


@converter("ConvTranspose")
def _conv_transpose(ctx, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    shape, wshape = ctx.shape(x), ctx.shape(w)
    n = len(shape) - 2
    if n not in (1, 2, 3):
        raise ctx.error(f"only 1-D, 2-D and 3-D ConvTranspose is supported, got input {shape}")
    kernel = list(ctx.attr("kernel_shape", wshape[2:]))
    strides = list(ctx.attr("strides", [1] * n))
    dilations = list(ctx.attr("dilations", [1] * n))
    out_pad = list(ctx.attr("output_padding", [0] * n))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    output_shape = ctx.attr("output_shape")
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = list(output_shape)[-n:] if output_shape is not None else \
            [s * st for s, st in zip(shape[2:], strides)]
        begin, end = [], []
        for i in range(n):
            full = strides[i] * (shape[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1
            total = full - target[i]
            if total < 0:  # the output is larger than the full result: extend at the end
                out_pad[i] -= total
                total = 0
            small, big = total // 2, total - total // 2
            first_small = auto_pad != "SAME_LOWER"
            begin.append(small if first_small else big)
            end.append(big if first_small else small)
    elif auto_pad == "VALID":
        begin, end = [0] * n, [0] * n
    else:
        pads = list(ctx.attr("pads", [0] * (2 * n)))
        begin, end = pads[:n], pads[n:]
    group = int(ctx.attr("group", 1))
    if n == 3:
        out = op("nn.conv3d_transpose", x, w, channels=int(wshape[1] * group),
                 kernel_size=kernel, strides=strides, padding=begin + end,
                 output_padding=out_pad, dilation=dilations, groups=group)
        return out if bias is None else op("nn.bias_add", out, bias, axis=1)
    out = op("nn.conv2d_transpose", to_2d(ctx, x), to_2d(ctx, w),
             channels=int(wshape[1] * group), kernel_size=_lift(kernel, n, 1),
             strides=_lift(strides, n, 1), padding=_lift(begin, n, 0) + _lift(end, n, 0),
             output_padding=_lift(out_pad, n, 0), dilation=_lift(dilations, n, 1), groups=group)
    if bias is not None:
        out = op("nn.bias_add", out, bias, axis=1)
    return from_2d(ctx, out, n)


def _pool(kind: str):
    def convert(ctx: NodeContext, inputs):
        x = inputs[0]
        kernel = list(ctx.attr("kernel_shape"))
        a = _spatial_attrs(ctx, x, kernel)
        n = a["n"]
        if n == 3:
            out = _pool3d(ctx, kind, x, kernel, a)
        else:
            attrs = dict(pool_size=_lift(kernel, n, 1), strides=_lift(a["strides"], n, 1),
                         dilation=_lift(a["dilations"], n, 1),
                         padding=_lift(a["begin"], n, 0) + _lift(a["end"], n, 0),
                         layout="NCHW", ceil_mode=bool(ctx.attr("ceil_mode", 0)))
            if kind == "avg":
                attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
            out = op(f"nn.{kind}_pool2d", to_2d(ctx, x), **attrs)
            out = from_2d(ctx, _drop_padding_windows(ctx, out, x, kernel, a), n)
        if kind == "max" and ctx.output_used(1):
            return [out, _max_pool_indices(ctx, x, out, kernel, a)]
        return out
    return convert


def _conv3d(ctx, x, w, bias, kernel, a):
    """5-D Conv: nn.conv3d (NCDHW, OIDHW)."""
    out = op("nn.conv3d", x, w, strides=a["strides"], padding=a["begin"] + a["end"],
             dilation=a["dilations"], groups=int(ctx.attr("group", 1)),
             channels=int(ctx.shape(w)[0]), kernel_size=kernel)
    return out if bias is None else op("nn.bias_add", out, bias, axis=1)


def _pool3d(ctx, kind: str, x, kernel, a, relay_kind: str | None = None, **extra):
    """5-D MaxPool/AveragePool: nn.{max,avg}_pool3d (NCDHW)."""
    attrs = dict(pool_size=kernel, strides=a["strides"], dilation=a["dilations"],
                 padding=a["begin"] + a["end"], layout="NCDHW",
                 ceil_mode=bool(ctx.attr("ceil_mode", 0)), **extra)
    if kind == "avg" and "count_include_pad" not in extra:
        attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    out = op(f"nn.{relay_kind or kind}_pool3d", x, **attrs)
    return _drop_padding_windows(ctx, out, x, kernel, a)


def _drop_padding_windows(ctx, out, x, kernel, a):
    """ONNX ceil_mode drops a last window that would start in the end padding; Relay keeps it."""
    if not ctx.attr("ceil_mode", 0):
        return out
    n = a["n"]
    spatial = ctx.shape(x)[2:]
    got = ctx.shape(out)[2:] if n != 1 else ctx.shape(out)[3:]
    want = []
    for i, size in enumerate(spatial):
        s, d = a["strides"][i], a["dilations"][i]
        padded = size + a["begin"][i] + a["end"][i]
        count = -(-(padded - ((kernel[i] - 1) * d + 1)) // s) + 1
        if (count - 1) * s >= size + a["begin"][i]:
            count -= 1
        want.append(count)
    if list(got) == want:
        return out
    axes = list(range(4 - n, 4)) if n != 3 else [2, 3, 4]
    return op("strided_slice", out, begin=[0] * n, end=want, strides=[1] * n, axes=axes,
              slice_mode="end")


converter("MaxPool")(_pool("max"))
converter("AveragePool")(_pool("avg"))


@converter("LpPool")
def _lp_pool(ctx, inputs):
    """(sum of |x|^p over the window)^(1/p): an average with count_include_pad times the taps it
    divided by (padding adds zeros to the sum)."""
    x = inputs[0]
    p = float(ctx.attr("p", 2))
    kernel = list(ctx.attr("kernel_shape"))
    a = _spatial_attrs(ctx, x, kernel)
    n = a["n"]
    half, x = _widen_half(ctx, x)
    dtype = ctx.dtype(x)
    powered = op("power", op("abs", x), const(p, dtype))
    if n == 3:
        avg = _pool3d(ctx, "avg", powered, kernel, a, count_include_pad=True)
        total = op("multiply", avg, _window_taps(ctx, powered, avg, kernel, a, dtype))
        return _narrow(op("power", total, const(1.0 / p, dtype)), half)
    lifted = dict(kernel=_lift(kernel, n, 1), strides=_lift(a["strides"], n, 1),
                  dilations=_lift(a["dilations"], n, 1), begin=_lift(a["begin"], n, 0),
                  end=_lift(a["end"], n, 0))
    powered = to_2d(ctx, powered)
    avg = op("nn.avg_pool2d", powered, pool_size=lifted["kernel"], strides=lifted["strides"],
             dilation=lifted["dilations"], padding=lifted["begin"] + lifted["end"],
             layout="NCHW", ceil_mode=bool(ctx.attr("ceil_mode", 0)), count_include_pad=True)
    total = op("multiply", avg, _window_taps(ctx, powered, avg, lifted["kernel"], lifted, dtype))
    out = _drop_padding_windows(ctx, op("power", total, const(1.0 / p, dtype)), x, kernel, a)
    return _narrow(from_2d(ctx, out, n), half)


def _widen_half(ctx, x):
    """(whether x was float16, x in float32 if so): a window's sum of |x|^p overflows half
    precision long before its p-th root does (3 taps of 250 squared: inf against 433)."""
    if ctx.dtype(x) != "float16":
        return False, x
    return True, op("cast", x, dtype="float32")


def _narrow(y, half: bool):
    return op("cast", y, dtype="float16") if half else y


def _window_taps(ctx, x, pooled, kernel, a, dtype):
    """How many taps each window of an average with count_include_pad divided by: the full
    kernel, except ceil-mode windows that reach past the end padding."""
    counts = [pool_counts(size, k, s, d, b, e, o, True) for size, o, k, s, d, b, e in zip(
        ctx.shape(x)[2:], ctx.shape(pooled)[2:], kernel, a["strides"], a["dilations"],
        a["begin"], a["end"])]
    taps = counts[0]
    for more in counts[1:]:
        taps = np.multiply.outer(taps, more)
    full = int(np.prod(kernel))
    if (taps == full).all():
        return const(float(full), dtype)
    return const(taps.astype(dtype), dtype)


def _global_pool(kind: str, reduce_name: str):
    """4-D: nn.global_<kind>_pool2d, as TVM imports it (relay programs written for TVM use it;
    it is the same kernel as the reduction, and a blocked-layout graph keeps its blocked
    schedule); other ranks: the reduction over every spatial axis."""
    def convert(ctx: NodeContext, inputs):
        x = inputs[0]
        if ctx.rank(x) == 4:
            return op(f"nn.global_{kind}_pool2d", x, layout="NCHW", out_layout="")
        return op(reduce_name, x, axis=list(range(2, ctx.rank(x))), keepdims=True,
                  exclude=False)
    return convert


converter("GlobalAveragePool")(_global_pool("avg", "mean"))
converter("GlobalMaxPool")(_global_pool("max", "max"))


@converter("GlobalLpPool", since=2)
def _global_lp_pool(ctx, inputs):
    x = inputs[0]
    p = float(ctx.attr("p", 2))
    half, x = _widen_half(ctx, x)
    dtype = ctx.dtype(x)
    total = op("sum", op("power", op("abs", x), const(p, dtype)),
               axis=list(range(2, ctx.rank(x))), keepdims=True, exclude=False)
    return _narrow(op("power", total, const(1.0 / p, dtype)), half)


# --- Gemm, MatMul ---------------------------------------------------------------------------


@converter("Gemm")
def _gemm(ctx, inputs):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    dtype = ctx.dtype(a)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if ctx.attr("transA", 0):
        a = op("transpose", a, axes=[1, 0])
    weight = b if ctx.attr("transB", 0) else op("transpose", b, axes=[1, 0])
    out = op("nn.dense", a, weight, units=None, out_dtype="")
    if alpha != 1.0:
        out = op("multiply", out, const(alpha, dtype))
    if c is not None and beta != 0.0:
        out = op("add", out, c if beta == 1.0 else op("multiply", c, const(beta, dtype)))
    return out


@converter("MatMul")
def _matmul(ctx, inputs):
    return matmul_with(ctx, inputs[0], inputs[1],
                       lambda a, w: op("nn.dense", a, w, units=None, out_dtype=""),
                       lambda a, b: op("nn.batch_matmul", a, b, out_dtype="",
                                       transpose_a=False, transpose_b=False))


def matmul_with(ctx: NodeContext, a, b, dense, batch_matmul):
    """numpy matmul's shapes (1-D operands, broadcast batch dims) around a contraction:
    dense(a, b transposed) for a 2-D right operand, else batch_matmul(a3, b3) over the
    flattened, broadcast batch."""
    a_in, b_in = a, b
    sa, sb = ctx.shape(a), ctx.shape(b)
    if len(sa) == 1:
        a, sa = ctx.reshape(a, [1, sa[0]]), (1, sa[0])
    if len(sb) == 1:
        b, sb = ctx.reshape(b, [sb[0], 1]), (sb[0], 1)
    batch_dims = ctx.broadcast_shapes(("A's batch dimensions", sa[:-2]),
                                      ("B's batch dimensions", sb[:-2]))
    out_shape = list(batch_dims) + [sa[-2], sb[-1]]
    if len(sb) == 2:  # weights-style right operand: nn.dense takes a's batch dims as they are
        # (no reshape around it: a reshape after the dense is injective, so FuseOps could not
        # fuse the bias add and activation that follow into the dense's epilogue)
        out = dense(a, op("transpose", b, axes=[1, 0]))
        produced = [*sa[:-1], sb[-1]]
    else:
        batch = out_shape[:-2]
        n = num_elements(batch)
        out = batch_matmul(_flat_batch(a, sa, batch, n), _flat_batch(b, sb, batch, n))
        produced = [n, sa[-2], sb[-1]]
    final = list(out_shape)
    if len(ctx.shape(a_in)) == 1:
        final.pop(-2)
    if len(ctx.shape(b_in)) == 1:
        final.pop(-1)
    return out if produced == final else ctx.reshape(out, final)


def _flat_batch(x, shape, batch, n):
    """x broadcast to batch + shape[-2:], its batch dims merged into one of n."""
    full = list(batch) + list(shape[-2:])
    target = [n, shape[-2], shape[-1]]
    return reshape(_broadcast(x, shape, batch), target,
                   full if any(isinstance(d, AnyDim) for d in target) else None)


def _broadcast(x, shape, batch):
    target = list(batch) + list(shape[-2:])
    if list(shape) == target:
        return x
    return op("broadcast_to", x, shape=target)


# --- softmax family --------------------------------------------------------------------------


def _softmax_like(relay_name: str):
    def convert(ctx: NodeContext, inputs):
        x = inputs[0]
        shape = ctx.shape(x)
        rank = len(shape)
        if ctx.opset >= 13:
            axis = norm_axis(ctx, int(ctx.attr("axis", -1)), rank)
            return _apply_softmax(relay_name, ctx, x, axis)
        axis = norm_axis(ctx, int(ctx.attr("axis", 1)), rank)
        flat = ctx.reshape(x, [num_elements(shape[:axis]), num_elements(shape[axis:])])
        return ctx.reshape(_apply_softmax(relay_name, ctx, flat, 1), shape)
    return convert


def _apply_softmax(relay_name, ctx, x, axis):
    if relay_name != "hardmax":
        return op(relay_name, x, axis=axis)
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    arg = op("argmax", x, axis=[axis], keepdims=True, exclude=False, select_last_index=False)
    iota_shape = [1] * len(shape)
    iota_shape[axis] = shape[axis]
    iota = const(np.arange(shape[axis]).reshape(iota_shape), "int32")
    hit = op("equal", op("cast", arg, dtype="int32"), iota)
    return op("where", hit, const(1, dtype), const(0, dtype))


converter("Softmax")(_softmax_like("nn.softmax"))
converter("LogSoftmax")(_softmax_like("nn.log_softmax"))
converter("Hardmax")(_softmax_like("hardmax"))

