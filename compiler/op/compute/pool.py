"""Pooling: max/avg with padding (guarded reductions), ceil_mode, count_include_pad, dilation;
global and adaptive pools, in NCHW, NHWC and NCHW<x>c: the generic compute rules. Float NCHW
and NCHW<x>c pools run the window schedules instead (codegen.schedules.window, window_nchwc),
chosen by the strategy layer (compiler.op.strategy.pool), with `plane_finish` and
`blocked_finish` below (the divisor of an average, the value of a window over padding)."""
from __future__ import annotations

from codegen.tir.dtype import min_value
from compiler.op.window import has_empty_window, lowest_value
from .common import fail, in_float32, is_bool, is_float, rule, te, tensor_name, tir
from .reduce import reduce_over_axes


def _hw(layout: str) -> tuple:
    return (1, 2) if layout == "NHWC" else (2, 3)  # NCHW, NCHW<x>c


def _with(idx: tuple, hi: int, wi: int, y, x) -> tuple:
    out = list(idx)
    out[hi], out[wi] = y, x
    return tuple(out)


def _window_count(base, k: int, d: int, lo: int, hi: int):
    """#{r in [0, k): lo <= base + r*d < hi} in closed form (int64)."""
    first = tir.max(tir.const(0, "int64"), tir.floordiv(lo - base + (d - 1), d))
    last = tir.min(tir.const(k - 1, "int64"), tir.floordiv(hi - 1 - base, d))
    return tir.max(last - first + 1, tir.const(0, "int64"))


def _avg_count(attrs, by, bx, h: int, w: int, out_hw: tuple):
    """The divisor of an average: taps inside the input, or with count_include_pad inside
    input + pads (a ceil-mode window reaching past the end padding counts fewer taps)."""
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding
    if not attrs.count_include_pad:
        return tir.max(_window_count(by, kh, dh, 0, h) * _window_count(bx, kw, dw, 0, w),
                       tir.const(1, "int64"))
    (oh, ow) = out_hw
    last_y, last_x = (oh - 1) * sh - pt + (kh - 1) * dh, (ow - 1) * sw - pl + (kw - 1) * dw
    if last_y < h + pb and last_x < w + pr:
        return tir.const(kh * kw, "int64")  # every window lies inside input + pads
    # a ceil-mode window may start past the end padding (ONNX drops it; Relay keeps it): 0 taps
    return tir.max(_window_count(by, kh, dh, -pt, h + pb) * _window_count(bx, kw, dw, -pl, w + pr),
                   tir.const(1, "int64"))


def _lowest_if_empty(acc, attrs, by, bx, h: int, w: int, out_hw: tuple, dtype: str):
    """A max over a window that covers only padding is the dtype's lowest finite value (as
    onnxruntime and TVM give), not the reduction's -inf. Only emitted when such a window
    exists, so the usual kernels are unchanged."""
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl = attrs.padding[0], attrs.padding[1]
    (oh, ow) = out_hw
    if not (has_empty_window(h, kh, sh, dh, pt, oh) or has_empty_window(w, kw, sw, dw, pl, ow)):
        return acc
    inside = _window_count(by, kh, dh, 0, h) * _window_count(bx, kw, dw, 0, w)
    return tir.select(tir.gt(inside, tir.const(0, "int64")), acc,
                      tir.const(lowest_value(dtype), dtype))


# Windows up to this many taps are unrolled into one elementwise expression (no reduction loop),
# so the output row loop vectorises; taps outside the input read a clamped index, then select.
MAX_UNROLLED_TAPS = 16


def _max_nan(a, b):
    """max that propagates NaN, as the reduction's update does."""
    return tir.select(tir.logical_or(tir.gt(b, a), tir.ne(b, b)), b, a)


def _unrolled(kind: str, x, attrs, out_type, hi: int, wi: int, op: str):
    h, w = x.shape[hi], x.shape[wi]
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl = attrs.padding[0], attrs.padding[1]
    oh, ow = out_type.shape[hi], out_type.shape[wi]
    dt = x.dtype
    # which taps can fall outside along each axis (static)
    y_out = [pt > r * dh or (oh - 1) * sh - pt + r * dh >= h for r in range(kh)]
    x_out = [pl > c * dw or (ow - 1) * sw - pl + c * dw >= w for c in range(kw)]

    def f(*i):
        by, bx = i[hi] * sh - pt, i[wi] * sw - pl
        acc = None
        for r in range(kh):
            iy = by + r * dh
            cy = tir.min(tir.max(iy, 0), h - 1) if y_out[r] else iy
            for c in range(kw):
                ix = bx + c * dw
                cx = tir.min(tir.max(ix, 0), w - 1) if x_out[c] else ix
                v = x[_with(i, hi, wi, cy, cx)]
                conds = []
                if y_out[r]:
                    conds += [tir.ge(iy, 0), tir.lt(iy, h)]
                if x_out[c]:
                    conds += [tir.ge(ix, 0), tir.lt(ix, w)]
                if conds:
                    fill = tir.const(min_value(dt), dt) if kind == "max" else tir.const(0, dt)
                    v = tir.select(tir.all(*conds), v, fill)
                if acc is None:
                    acc = v
                else:
                    acc = _max_nan(acc, v) if kind == "max" else acc + v
        if kind == "max":
            return _lowest_if_empty(acc, attrs, by, bx, h, w, (oh, ow), dt)
        return acc / tir.cast(_avg_count(attrs, by, bx, h, w, (oh, ow)), dt)
    return te.compute(out_type.shape, f, name=tensor_name(op))


def plane_finish(kind: str, x, attrs, out_hw: tuple):
    """finish(window value, output row, column) of a float NCHW pool through the per-plane
    schedule (codegen.schedules.window.pool2d_nchw)."""
    h, w = x.shape[2], x.shape[3]
    (sh, sw), (pt, pl) = attrs.strides, attrs.padding[:2]

    def finish(acc, oi, oj):
        by, bx = oi * sh - pt, oj * sw - pl
        if kind == "max":
            return _lowest_if_empty(acc, attrs, by, bx, h, w, out_hw, x.dtype)
        return acc / tir.cast(_avg_count(attrs, by, bx, h, w, out_hw), x.dtype)
    return finish


def _padded_taps(o: int | None, k: int, s: int, d: int, begin: int, end: int, size: int
                 ) -> int:
    """Taps of output o's window inside input + pads (all k for an interior output: None)."""
    if o is None:
        return k
    return sum(1 for t in range(k) if 0 <= o * s + t * d < begin + size + end)


def blocked_finish(kind: str, x, attrs):
    """finish(window value, rows, cols, oi, oj) of a float NCHW<x>c pool through
    codegen.schedules.window_nchwc.pool2d_nchwc: the schedule knows which taps of each window
    fall inside the input, so the divisor of an average and the value of a window over
    padding alone are constants."""
    h, w, dt = x.shape[2], x.shape[3], x.dtype
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding

    def finish(value, rows, cols, oi, oj):
        if value is None:  # a window over padding alone
            return tir.const(lowest_value(dt) if kind == "max" else 0, dt)
        if kind == "max":
            return value
        if attrs.count_include_pad:
            count = _padded_taps(oi, kh, sh, dh, pt, pb, h) \
                * _padded_taps(oj, kw, sw, dw, pl, pr, w)
        else:
            count = len(rows) * len(cols)
        return value / tir.const(float(max(count, 1)), dt)
    return finish


def _pool(kind: str):
    def compute(inputs, attrs, out_type):
        (x,) = inputs
        op = f"nn.{kind}_pool2d"
        if is_bool(x.dtype):
            raise fail(op, "pooling of bool tensors is not supported")
        hi, wi = _hw(attrs.layout)
        h, w = x.shape[hi], x.shape[wi]
        (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
        pt, pl = attrs.padding[0], attrs.padding[1]
        acc = x.dtype if is_float(x.dtype) else "int64"
        out_hw = (out_type.shape[hi], out_type.shape[wi])
        if is_float(x.dtype) and kh * kw <= MAX_UNROLLED_TAPS:
            return _unrolled(kind, x, attrs, out_type, hi, wi, op)

        def f(*i):
            ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
            by, bx = i[hi] * sh - pt, i[wi] * sw - pl
            iy, ix = by + ry * dh, bx + rx * dw
            inside = tir.all(tir.ge(iy, 0), tir.lt(iy, h), tir.ge(ix, 0), tir.lt(ix, w))
            v = x[_with(i, hi, wi, iy, ix)]
            if kind == "max":
                return _lowest_if_empty(te.max(v, (ry, rx), where=inside), attrs, by, bx, h, w,
                                        out_hw, x.dtype)
            total = te.sum(tir.cast(v, acc), (ry, rx), where=inside)
            count = _avg_count(attrs, by, bx, h, w, out_hw)
            if is_float(x.dtype):
                return total / tir.cast(count, acc)
            return tir.cast(tir.truncdiv(total, count), x.dtype)
        return te.compute(out_type.shape, f, name=tensor_name(op))
    return compute


rule("nn.max_pool2d")(_pool("max"))
rule("nn.avg_pool2d")(_pool("avg"))


def _adaptive(kind: str, is_global: bool):
    def compute(inputs, attrs, out_type):
        (x,) = inputs
        op = f"nn.{'global' if is_global else 'adaptive'}_{kind}_pool2d"
        if is_bool(x.dtype):
            raise fail(op, "pooling of bool tensors is not supported")
        hi, wi = _hw(attrs.layout)
        h, w = x.shape[hi], x.shape[wi]
        oh, ow = out_type.shape[hi], out_type.shape[wi]
        if is_global and is_float(x.dtype):
            reduce = in_float32(lambda ins, _a, t: _global_reduce(kind, ins[0], hi, wi, t, op))
            return reduce([x], attrs, out_type)
        acc = x.dtype if is_float(x.dtype) else "int64"
        # the widest bin bounds the reduce axes; narrower bins mask the rest
        kh = max(-(-((i + 1) * h) // oh) - (i * h) // oh for i in range(oh))
        kw = max(-(-((j + 1) * w) // ow) - (j * w) // ow for j in range(ow))

        def f(*i):
            y0 = tir.floordiv(i[hi] * h, oh)
            y1 = tir.floordiv((i[hi] + 1) * h + (oh - 1), oh)
            x0 = tir.floordiv(i[wi] * w, ow)
            x1 = tir.floordiv((i[wi] + 1) * w + (ow - 1), ow)
            ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
            inside = tir.all(tir.lt(y0 + ry, y1), tir.lt(x0 + rx, x1))
            full = kh * oh == h and kw * ow == w  # every bin has the same size
            v = x[_with(i, hi, wi, y0 + ry, x0 + rx)]
            where = None if full else inside
            if kind == "max":
                return te.max(v, (ry, rx), where=where)
            total = te.sum(tir.cast(v, acc), (ry, rx), where=where)
            count = (y1 - y0) * (x1 - x0)
            if is_float(x.dtype):
                return total / tir.cast(count, acc)
            return tir.cast(tir.truncdiv(total, count), x.dtype)
        return te.compute(out_type.shape, f, name=tensor_name(op))
    return compute


def _global_reduce(kind: str, x, hi: int, wi: int, out_type, op: str):
    """A float global pool in NCHW or NHWC as the reduction `mean` / `max` over H and W is: one
    reduce axis over the contiguous H*W (it vectorises; two nested axes of 7 did not), and an
    elementwise producer fuses into it (the registry's COMM_REDUCE); float16 sums in float32
    (in_float32, as mean)."""
    def body(full, k):
        if kind == "max":
            return te.max(x[full], k)
        return te.sum(x[full], k) / tir.const(float(x.shape[hi] * x.shape[wi]), x.dtype)
    return reduce_over_axes(op, x, [hi, wi], True, out_type.shape, body)


for _kind in ("max", "avg"):
    rule(f"nn.global_{_kind}_pool2d")(_adaptive(_kind, True))
    rule(f"nn.adaptive_{_kind}_pool2d")(_adaptive(_kind, False))
