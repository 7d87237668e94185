"""3-D convolution and pooling: plain guarded reductions, padding is a `where` guard (the 1-D
convolutions run on the conv2d rules: compute/nn.py).

These ops are rare in the models we target, so they keep the generic reduction form rather than
a schedule; the guard keeps every load inside the input buffer.
"""
from __future__ import annotations

from compiler.op.window import has_empty_window, lowest_value
from .common import fail, is_bool, is_float, rule, te, tir
from .conv_layout import any_layout


def _inside(idx, sizes, lo=None, hi=None) -> list:
    """Bounds conditions lo <= i < hi for each spatial index."""
    conds = []
    for a, (i, n) in enumerate(zip(idx, sizes)):
        conds += [tir.ge(i, 0 if lo is None else lo[a]), tir.lt(i, n if hi is None else hi[a])]
    return conds


def _conv_nd(inputs, attrs, out_type):
    """Grouped N-d convolution (NC..., OI...) for any number of spatial dims."""
    data, weight = inputs
    dt = out_type.dtype
    sizes = data.shape[2:]
    o, ig = weight.shape[:2]
    ks = weight.shape[2:]
    og = o // attrs.groups
    st, dl, begin = attrs.strides, attrs.dilation, attrs.padding[:len(sizes)]

    def f(n, oc, *pos):
        ic = te.reduce_axis(ig, "ic")
        taps = tuple(te.reduce_axis(k, f"r{a}") for a, k in enumerate(ks))
        idx = tuple(p * s + r * d - b for p, s, r, d, b in zip(pos, st, taps, dl, begin))
        ch = tir.floordiv(oc, og) * ig + ic if attrs.groups > 1 else ic
        prod = tir.cast(data[(n, ch) + idx], dt) * tir.cast(weight[(oc, ic) + taps], dt)
        return te.sum(prod, (ic,) + taps, where=tir.all(*_inside(idx, sizes)))
    return te.compute(out_type.shape, f, name=f"T_conv{len(sizes)}d")


rule("nn.conv3d")(any_layout("NCDHW", "OIDHW", _conv_nd))


@rule("nn.conv3d_transpose")
def _conv3d_transpose(inputs, attrs, out_type):
    data, weight = inputs
    dt = out_type.dtype
    sizes = data.shape[2:]
    og, ks = weight.shape[1], weight.shape[2:]
    ig = data.shape[1] // attrs.groups
    st, dl, begin = attrs.strides, attrs.dilation, attrs.padding[:len(sizes)]

    def f(n, oc, *pos):
        ic = te.reduce_axis(ig, "ic")
        taps = tuple(te.reduce_axis(k, f"r{a}") for a, k in enumerate(ks))
        scaled = tuple(p + b - r * d for p, b, r, d in zip(pos, begin, taps, dl))
        idx = tuple(tir.floordiv(t, s) for t, s in zip(scaled, st))
        conds = [tir.ge(t, 0) for t in scaled] + [tir.lt(i, n_) for i, n_ in zip(idx, sizes)]
        conds += [tir.eq(tir.floormod(t, s), tir.const(0, "int64"))
                  for t, s in zip(scaled, st) if s > 1]
        ch = tir.floordiv(oc, og) * ig + ic if attrs.groups > 1 else ic
        prod = tir.cast(data[(n, ch) + idx], dt) * \
            tir.cast(weight[(ch, tir.floormod(oc, og)) + taps], dt)
        return te.sum(prod, (ic,) + taps, where=tir.all(*conds))
    return te.compute(out_type.shape, f, name=f"T_conv{len(sizes)}d_transpose")


def _tap_count(base, k: int, d: int, lo, hi):
    """#{r in [0, k): lo <= base + r*d < hi} in closed form (int64)."""
    first = tir.max(tir.const(0, "int64"), tir.floordiv(lo - base + (d - 1), d))
    last = tir.min(tir.const(k - 1, "int64"), tir.floordiv(hi - 1 - base, d))
    return tir.max(last - first + 1, tir.const(0, "int64"))


def _pool3d(kind: str):
    def compute(inputs, attrs, out_type):
        (x,) = inputs
        op = f"nn.{kind}_pool3d"
        if is_bool(x.dtype):
            raise fail(op, "pooling of bool tensors is not supported")
        sizes, ks = x.shape[2:], attrs.pool_size
        st, dl, pad = attrs.strides, attrs.dilation, attrs.padding
        acc = x.dtype if is_float(x.dtype) else "int64"
        empty = any(has_empty_window(sizes[a], ks[a], st[a], dl[a], pad[a],
                                     out_type.shape[2 + a]) for a in range(3))

        def f(n, c, *pos):
            taps = tuple(te.reduce_axis(k, f"r{a}") for a, k in enumerate(ks))
            base = tuple(p * s - b for p, s, b in zip(pos, st, pad[:3]))
            idx = tuple(b + r * d for b, r, d in zip(base, taps, dl))
            v = x[(n, c) + idx]
            where = tir.all(*_inside(idx, sizes))
            if kind == "max":
                best = te.max(v, taps, where=where)
                if not empty:
                    return best
                # a window over padding alone: the lowest finite value, not -inf
                inside = tir.const(1, "int64")
                for a in range(3):
                    inside = inside * _tap_count(base[a], ks[a], dl[a], 0, sizes[a])
                return tir.select(tir.gt(inside, tir.const(0, "int64")), best,
                                  tir.const(lowest_value(x.dtype), x.dtype))
            total = te.sum(tir.cast(v, acc), taps, where=where)
            count = tir.const(1, "int64")
            for a in range(3):
                lo, hi = (-pad[a], sizes[a] + pad[3 + a]) if attrs.count_include_pad \
                    else (0, sizes[a])
                count = count * _tap_count(base[a], ks[a], dl[a], lo, hi)
            count = tir.max(count, tir.const(1, "int64"))
            if is_float(x.dtype):
                return total / tir.cast(count, acc)
            return tir.cast(tir.truncdiv(total, count), x.dtype)
        return te.compute(out_type.shape, f, name=f"T_{kind}_pool3d")
    return compute


rule("nn.max_pool3d")(_pool3d("max"))
rule("nn.avg_pool3d")(_pool3d("avg"))
