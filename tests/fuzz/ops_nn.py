"""Op templates: Conv, ConvTranspose, MaxPool, AveragePool, global pools, BatchNormalization,
InstanceNormalization, Resize, with their attribute edge cases (asymmetric pads, strides,
dilations, groups and depthwise, auto_pad, ceil_mode, count_include_pad, output_padding,
nearest modes and coordinate transforms), and a large-input profile that reaches the
multi-threaded, large-scratch conv schedules."""
from __future__ import annotations

import math

import numpy as np

from .graph import FLOATS, INTS, GraphBuilder, Value, float_dtype, rounding, spec
from .ops_shape import same

LARGE_INPUTS = [(1, 16, 40, 40), (1, 32, 32, 32), (1, 8, 64, 64), (2, 16, 24, 24),
                (1, 64, 20, 20), (1, 3, 96, 96)]


def _spatial_input(b: GraphBuilder, nd: int, dtypes=FLOATS, max_size: int = 60000) -> Value:
    def make():
        c = int(b.choice([1, 2, 3, 4, 6, 8, 16]))
        dims = [int(b.choice([1, 2, 3, 5, 7, 8, 11, 16])) for _ in range(nd)]
        return b.fresh_input((int(b.choice([1, 1, 2])), c, *dims), b.choice(dtypes))
    return b.pick(lambda v: v.rank == nd + 2 and v.dtype in dtypes and 0 not in v.shape
                  and v.size <= max_size, make, p_fresh=0.3)


def _ndims(b: GraphBuilder) -> int:
    r = b.rng.random()
    return 2 if r < 0.75 else 1 if r < 0.92 else 3


def _window(b: GraphBuilder, nd: int, spatial: tuple, pool: bool) -> dict | None:
    """kernel/stride/dilation/pads per spatial dim, or None when no output would be left."""
    ks = [int(b.choice([1, 2, 3, 3, 5] if not pool else [1, 2, 3, 3])) for _ in range(nd)]
    strides = [int(b.choice([1, 1, 2, 3])) for _ in range(nd)]
    dil = [int(b.choice([1, 1, 1, 2])) for _ in range(nd)]
    pads = [int(b.rng.integers(0, k)) if b.chance(0.6) else 0 for k in ks * 2]
    eff = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
    if any(e > s + pads[i] + pads[i + nd] for i, (e, s) in enumerate(zip(eff, spatial))):
        return None
    return {"kernel": ks, "strides": strides, "dilations": dil, "pads": pads, "eff": eff}


def _out_dim(n: int, eff: int, stride: int, pb: int, pe: int, ceil_mode: bool = False) -> int:
    span = n + pb + pe - eff
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= n + pb:  # the last window would start in the right padding
        out -= 1
    return out


def _auto_pad(b: GraphBuilder, w: dict, spatial: tuple) -> tuple:
    """(auto_pad attribute or None, output dims) for a conv/pool window."""
    nd = len(spatial)
    mode = b.choice(["NOTSET"] * 6 + ["SAME_UPPER", "SAME_LOWER", "VALID"])
    if mode == "NOTSET":
        return None, [_out_dim(spatial[i], w["eff"][i], w["strides"][i], w["pads"][i],
                               w["pads"][i + nd]) for i in range(nd)]
    if mode == "VALID":
        return mode, [(spatial[i] - w["eff"][i]) // w["strides"][i] + 1 for i in range(nd)]
    return mode, [-(-spatial[i] // w["strides"][i]) for i in range(nd)]


def t_conv(b: GraphBuilder, x: Value | None = None) -> bool:
    nd = x.rank - 2 if x is not None else _ndims(b)
    x = x or _spatial_input(b, nd)
    if x is None or x.rank != nd + 2:
        return False
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    groups = int(b.choice([g for g in (1, 1, 1, 2, 4, c) if c % g == 0]))
    per_group = int(b.choice([1, 2, 4, 8] if groups > 1 else [1, 4, 8, 16, 32]))
    m = groups * per_group
    w = _window(b, nd, spatial, pool=False)
    if w is None:
        return False
    auto_pad, out = _auto_pad(b, w, spatial)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") and any(d > 1 for d in w["dilations"]):
        auto_pad, out = None, [_out_dim(spatial[i], w["eff"][i], w["strides"][i], w["pads"][i],
                                        w["pads"][i + nd]) for i in range(nd)]
    if min(out) < 1:
        return False
    weight = b.operand((m, c // groups, *w["kernel"]), x.dtype, p_const=0.85)
    ins = [x, weight]
    k = c // groups * math.prod(w["kernel"])
    mag = x.mag * weight.mag * k
    err = k * (x.err * weight.mag + weight.err * x.mag)
    if b.chance(0.6):
        bias = b.operand((m,), x.dtype, p_const=0.9)
        ins.append(bias)
        mag += bias.mag
    err += rounding(x.dtype, mag) * (2 + 2 * math.sqrt(k))
    if not b.fits(x.dtype, mag):
        return False
    attrs = {"group": groups if groups > 1 or b.chance(0.2) else None,
             "kernel_shape": w["kernel"] if b.chance(0.6) else None,
             "strides": w["strides"] if any(s > 1 for s in w["strides"]) or b.chance(0.3)
             else None,
             "dilations": w["dilations"] if any(d > 1 for d in w["dilations"]) else None}
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    elif any(w["pads"]) or b.chance(0.2):
        attrs["pads"] = w["pads"]
    b.node("Conv", ins, [spec((n, m, *out), x.dtype, mag, err, None, x.nonfinite)], **attrs)
    return True


def t_conv_transpose(b: GraphBuilder) -> bool:
    nd = 2 if b.chance(0.8) else 1
    x = _spatial_input(b, nd, max_size=20000)
    if x is None or x.rank != nd + 2:
        return False
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    groups = int(b.choice([g for g in (1, 1, 1, 2, c) if c % g == 0]))
    per_group = int(b.choice([1, 2, 4, 8]))
    m = groups * per_group
    ks = [int(b.choice([1, 2, 3, 4])) for _ in range(nd)]
    strides = [int(b.choice([1, 2, 2, 3])) for _ in range(nd)]
    dil = [int(b.choice([1, 1, 2])) for _ in range(nd)]
    pads = [int(b.rng.integers(0, k)) if b.chance(0.5) else 0 for k in ks * 2]
    outpad = [int(b.rng.integers(0, max(s, d))) if b.chance(0.3) else 0
              for s, d in zip(strides, dil)]
    out = [s * (i - 1) + op + (k - 1) * d + 1 - pads[j] - pads[j + nd]
           for j, (i, s, op, k, d) in enumerate(zip(spatial, strides, outpad, ks, dil))]
    if min(out) < 1 or math.prod(out) * m * n > 200000:
        return False
    weight = b.operand((c, per_group, *ks), x.dtype, p_const=0.85)
    ins = [x, weight]
    k = per_group and c // groups * math.prod(-(-kk // s) for kk, s in zip(ks, strides))
    mag = x.mag * weight.mag * max(k, 1)
    err = max(k, 1) * (x.err * weight.mag + weight.err * x.mag)
    if b.chance(0.5):
        bias = b.operand((m,), x.dtype, p_const=0.9)
        ins.append(bias)
        mag += bias.mag
    err += rounding(x.dtype, mag) * (2 + 2 * math.sqrt(max(k, 1)))
    if not b.fits(x.dtype, mag):
        return False
    attrs = {"group": groups if groups > 1 else None,
             "kernel_shape": ks if b.chance(0.6) else None,
             "strides": strides, "dilations": dil if any(d > 1 for d in dil) else None,
             "pads": pads if any(pads) else None,
             "output_padding": outpad if any(outpad) else None}
    b.node("ConvTranspose", ins, [spec((n, m, *out), x.dtype, mag, err, None, x.nonfinite)],
           **attrs)
    return True


def t_pool(b: GraphBuilder, x: Value | None = None) -> bool:
    op = b.choice(["MaxPool", "AveragePool", "MaxPool", "AveragePool", "GlobalAveragePool",
                   "GlobalMaxPool", "LpPool"])
    nd = x.rank - 2 if x is not None else _ndims(b)
    indices = op == "MaxPool" and x is None and b.chance(0.2) and len(b.inputs) < 5
    if indices:
        # distinct values: which element is the max is then never a tie, so the Indices
        # output has one right answer
        x = b.fresh_input((int(b.choice([1, 2])), int(b.choice([1, 3])),
                           *[int(b.choice([3, 5, 8])) for _ in range(nd)]), "float32")
        perm = b.rng.permutation(x.size).astype(np.float32)
        b.feeds[x.name] = (perm / max(x.size, 1) * 4 - 2).reshape(x.shape)
    x = x or _spatial_input(b, nd)
    if x is None or x.rank != nd + 2:
        return False
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    if op.startswith("Global"):
        k = math.prod(spatial)
        err = x.err + (rounding(x.dtype, x.mag) * (2 + 2 * math.sqrt(k)) if "Avg" in op else 0)
        b.node(op, [x], [spec((n, c) + (1,) * nd, x.dtype, x.mag, err, x.lo, x.nonfinite)])
        return True
    w = _window(b, nd, spatial, pool=True)
    if w is None:
        return False
    if op == "AveragePool" and b.opset < 19 or op == "LpPool":
        w["dilations"] = [1] * nd
        w["eff"] = w["kernel"]
    ceil_mode = int(b.chance(0.3)) if op != "LpPool" else 0
    attrs = {"kernel_shape": w["kernel"],
             "strides": w["strides"] if any(s > 1 for s in w["strides"]) or b.chance(0.3)
             else None,
             "dilations": w["dilations"] if any(d > 1 for d in w["dilations"]) else None,
             "ceil_mode": ceil_mode or None}
    auto_pad, out = _auto_pad(b, w, spatial) if not ceil_mode else (None, None)
    if auto_pad and any(d > 1 for d in w["dilations"]):
        return False
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    else:
        out = [_out_dim(spatial[i], w["eff"][i], w["strides"][i], w["pads"][i],
                        w["pads"][i + nd], bool(ceil_mode)) for i in range(nd)]
        if ceil_mode and b.opset < 22 and out != [
                -(-(spatial[i] + w["pads"][i] + w["pads"][i + nd] - w["eff"][i])
                  // w["strides"][i]) + 1 for i in range(nd)]:
            # before opset 22 onnx's shape inference skips the "last window starts in the
            # padding" rule its runtime and the reference apply: such a model is inconsistent
            return False
        if any(w["pads"]) or b.chance(0.2):
            attrs["pads"] = w["pads"]
    if min(out) < 1:
        return False
    k = math.prod(w["kernel"])
    outputs = [spec((n, c, *out), x.dtype, x.mag, x.err, x.lo if op == "MaxPool" else None,
                    x.nonfinite)]
    if op == "AveragePool":
        outputs[0]["err"] += rounding(x.dtype, x.mag) * (2 + 2 * math.sqrt(k))
        if b.chance(0.5):
            attrs["count_include_pad"] = 1
    elif op == "LpPool":
        p = int(b.choice([1, 2]))
        attrs["p"] = p
        mag = x.mag * k
        outputs = [spec((n, c, *out), x.dtype, mag,
                        x.err * k + rounding(x.dtype, mag) * (2 + 2 * math.sqrt(k)), None,
                        x.nonfinite)]
    elif indices:
        outputs.append(spec((n, c, *out), "int64", x.size))
        if b.chance(0.5):
            attrs["storage_order"] = 1
    b.node(op, [x], outputs, **attrs)
    return True


def t_batchnorm(b: GraphBuilder) -> bool:
    x = b.pick(lambda v: v.dtype in FLOATS and v.rank >= 2 and v.size <= 50000,
               lambda: b.fresh_input((1, int(b.choice([3, 4, 8])), 5, 5), float_dtype(b)))
    if x is None or x.rank < 2:
        return False
    c = x.shape[1]
    scale = b.constant(b.rng.uniform(-2, 2, c).astype(x.dtype))
    bias = b.constant(b.rng.uniform(-1, 1, c).astype(x.dtype))
    mean = b.constant(b.rng.uniform(-1, 1, c).astype(x.dtype))
    var = b.constant(b.rng.uniform(0.5, 2, c).astype(x.dtype))
    eps = float(b.choice([1e-5, 1e-3]))
    gain = 2 / math.sqrt(0.5)
    mag = gain * (x.mag + 1) + 1
    err = gain * x.err + rounding(x.dtype, mag) * 6
    b.node("BatchNormalization", [x, scale, bias, mean, var],
           [spec(x.shape, x.dtype, mag, err, None, x.nonfinite)], epsilon=eps)
    return True


def t_instancenorm(b: GraphBuilder) -> bool:
    x = b.pick(lambda v: v.dtype in FLOATS and v.rank >= 3 and v.size <= 20000
               and 0 not in v.shape, lambda: b.fresh_input((1, 3, 4, 5), float_dtype(b)))
    if x is None or x.rank < 3 or 0 in x.shape:
        return False
    c = x.shape[1]
    n = math.prod(x.shape[2:])
    scale = b.constant(b.rng.uniform(-2, 2, c).astype(x.dtype))
    bias = b.constant(b.rng.uniform(-1, 1, c).astype(x.dtype))
    eps = float(b.choice([1e-5, 1e-2]))
    mag = 2 * math.sqrt(n) + 1
    err = x.err / max(math.sqrt(eps), 0.3) * 2 + rounding(x.dtype, mag) * (4 + 2 * math.sqrt(n))
    if x.dtype == "float16":
        err += rounding("float16", mag) * math.sqrt(n) * 2
    b.node("InstanceNormalization", [x, scale, bias],
           [spec(x.shape, x.dtype, mag, err, None, x.nonfinite)], epsilon=eps)
    return True


COORD_MODES = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]


def t_resize(b: GraphBuilder) -> bool:
    mode = b.choice(["nearest", "linear", "cubic", "nearest"])
    dtypes = FLOATS + INTS if mode == "nearest" else FLOATS
    # cubic weights can be negative: with an infinite input the result depends on how the
    # taps are summed (inf - inf), and engines legitimately differ (onnxruntime: NaN)
    x = b.pick(lambda v: v.rank in (3, 4) and v.dtype in dtypes and v.size <= 20000
               and 0 not in v.shape and not (mode == "cubic" and v.nonfinite),
               lambda: b.fresh_input((1, 2, 5, 7), b.choice(dtypes)))
    if x is None or x.rank not in (3, 4) or 0 in x.shape:
        return False
    coord = b.choice(COORD_MODES + (["half_pixel_symmetric"] if b.opset >= 19 else []))
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    spatial = x.shape[2:]
    if b.chance(0.5):
        scales = [float(b.choice([0.5, 2.0, 1.5, 3.0, 0.75, 1.0, 0.6])) for _ in spatial]
        out = [int(math.floor(d * s)) for d, s in zip(spatial, scales)]
        if min(out) < 1:
            return False
        sizes = None
    else:
        out = [int(b.rng.integers(1, 2 * d + 3)) for d in spatial]
        scales, sizes = None, out
    if mode == "nearest":
        attrs["nearest_mode"] = b.choice(["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
    elif mode == "cubic":
        attrs["cubic_coeff_a"] = float(b.choice([-0.75, -0.5]))
        if b.chance(0.3):
            attrs["exclude_outside"] = 1
    if b.opset >= 18 and mode != "nearest" and b.chance(0.2):
        attrs["antialias"] = 1
    empty = b.constant(np.zeros((0,), np.float32))
    full = lambda vals, dt: b.constant(np.array(  # noqa: E731
        list(x.shape[:2] if dt == np.int64 else [1, 1]) + list(vals), dt))
    if b.opset < 13:
        ins = [x, empty, full(scales, np.float32) if scales else empty]
        if sizes:
            ins.append(full(sizes, np.int64))
    else:
        ins = [x, "", full(scales, np.float32) if scales else ""]
        if sizes:
            ins.append(full(sizes, np.int64))
    gain = 1.0 if mode != "cubic" else 1.7
    mag = x.mag * gain
    err = x.err * gain + (rounding(x.dtype, mag) * 8 if mode != "nearest" else 0)
    if mode != "nearest" and x.dtype in INTS:
        return False
    b.node("Resize", ins, [same(x, x.shape[:2] + tuple(out)) | {"mag": mag, "err": err}],
           **attrs)
    return True


def large_start(b: GraphBuilder) -> bool:
    """The large profile: a big float32 input straight into a conv, pool, transposed conv,
    dense layer (constant weights: packed at opt_level 3) or a long reduction / softmax, so
    the multi-threaded, large-scratch schedules run."""
    r = b.rng.random()
    if r < 0.5:
        x = b.fresh_input(LARGE_INPUTS[int(b.rng.integers(len(LARGE_INPUTS)))], "float32")
        return t_conv(b, x) if b.chance(0.8) else t_pool(b, x)
    if r < 0.6:
        x = b.fresh_input((1, int(b.choice([16, 32])), 16, 16), "float32")
        w = b.constant(b.rng.uniform(-1, 1, (x.shape[1], 16, 2, 2)).astype("float32"))
        k = x.shape[1]
        mag = x.mag * w.mag * k
        b.node("ConvTranspose", [x, w], [spec((1, 16, 32, 32), "float32", mag,
                                              rounding("float32", mag) * (2 + 2 * math.sqrt(k)))],
               strides=[2, 2])
        return True
    if r < 0.8:
        m, k, n = int(b.choice([1, 7, 32, 64])), int(b.choice([256, 512])), \
            int(b.choice([256, 384, 1000]))
        x = b.fresh_input((m, k), "float32")
        w = b.constant(b.rng.uniform(-1, 1, (k, n)).astype("float32"))
        mag = x.mag * k
        b.node("MatMul", [x, w], [spec((m, n), "float32", mag,
                                       rounding("float32", mag) * (2 + 2 * math.sqrt(k)))])
        return True
    x = b.fresh_input(b.choice([(1, 64, 56, 56), (64, 1024), (8, 4096)]), "float32")
    axis = int(b.rng.integers(x.rank))
    k = x.shape[axis]
    if b.chance(0.5):
        b.node("Softmax", [x], [spec(x.shape, "float32", 1.0, rounding("float32", 1.0) * 8)],
               axis=axis - x.rank)
        return True
    op = b.choice(["ReduceSum", "ReduceMean", "ReduceMax"])
    out = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    mag = x.mag * k if op == "ReduceSum" else x.mag
    err = rounding("float32", mag) * (2 + 2 * math.sqrt(k))
    if b.opset >= (13 if op == "ReduceSum" else 18):
        b.node(op, [x, b.constant(np.array([axis], np.int64))],
               [spec(out, "float32", mag, err)])
    else:
        b.node(op, [x], [spec(out, "float32", mag, err)], axes=[axis])
    return True


TEMPLATES = {
    t_conv: 3, t_conv_transpose: 1.2, t_pool: 2.5, t_batchnorm: 0.8, t_instancenorm: 0.5,
    t_resize: 1.5,
}
