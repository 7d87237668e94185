"""softmax / log_softmax (max, exp, sum stages: numerically stable), layer/instance/group/batch
norm, lrn and dropout: the generic compute rules (float32 rows of softmax and layer norm run
the row schedules instead, chosen by the strategy layer: compiler.op.strategy.rows)."""
from __future__ import annotations

from codegen.tir.expr import Load
from codegen.tir.stmt import For, Store, seq
from .common import fail, in_float32, is_float, rule, te, tir
from .transform import reshape_to


def _along(x: te.Tensor, axis: int, fn, name: str) -> te.Tensor:
    """A keep-dims reduction along one axis: out[..., 0, ...] = fn(source at k, k)."""
    shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]

    def f(*i):
        k = te.reduce_axis(x.shape[axis], "k")
        return fn(i[:axis] + (k,) + i[axis + 1:], k)
    return te.compute(shape, f, name=name)


def _at0(t: te.Tensor, i: tuple, axes) -> object:
    return t[tuple(0 if d in axes else v for d, v in enumerate(i))]


def _softmax(log: bool):
    def compute(inputs, attrs, out_type):
        (x,) = inputs
        axis = attrs.axis % x.ndim
        mx = _along(x, axis, lambda j, k: te.max(x[j], k), "T_softmax_max")
        shifted = te.compute(x.shape, lambda *i: x[i] - _at0(mx, i, (axis,)),
                             name="T_softmax_shift")
        e = te.materialize(te.compute(x.shape, lambda *i: tir.exp(shifted[i]),
                                      name="T_softmax_exp"))
        s = _along(x, axis, lambda j, k: te.sum(e[j], k), "T_softmax_sum")
        if log:
            return te.compute(x.shape, lambda *i: shifted[i] - tir.log(_at0(s, i, (axis,))),
                              name="T_log_softmax")
        return te.compute(x.shape, lambda *i: e[i] / _at0(s, i, (axis,)), name="T_softmax")
    return compute


# float16 softmax rounds each step (shift, exp, sum, divide) to half, as its reference and
# ONNX's do; log_softmax computes in float32 and rounds once (its reference is wide)
rule("nn.softmax")(_softmax(False))
rule("nn.log_softmax")(in_float32(_softmax(True)))


def normalize(x: te.Tensor, axes: tuple, eps: float, name: str) -> te.Tensor:
    """(x - mean) / sqrt(var + eps) over `axes` (two-pass: mean, then centred squares)."""
    n = 1
    for d in axes:
        n *= x.shape[d]
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    dt = x.dtype

    def red(fn):
        def f(*i):
            ks = {d: te.reduce_axis(x.shape[d], f"k{d}") for d in axes}
            j = tuple(ks.get(d, v) for d, v in enumerate(i))
            return fn(j, tuple(ks.values()))
        return f
    mean = te.compute(shape, red(lambda j, k: te.sum(x[j], k) / tir.const(n, dt)),
                      name=f"{name}_mean")

    def sq(j, k):
        d = x[j] - _at0(mean, j, axes)
        return te.sum(d * d, k) / tir.const(n, dt)
    var = te.compute(shape, red(sq), name=f"{name}_var")
    denom = te.materialize(te.compute(shape, lambda *i: tir.sqrt(var[i] + tir.const(eps, dt)),
                                      name=f"{name}_std"))
    return te.compute(x.shape, lambda *i: (x[i] - _at0(mean, i, axes)) / _at0(denom, i, axes),
                      name=name)


def _affine(y: te.Tensor, gamma: te.Tensor, beta: te.Tensor, axis: int, attrs,
            name: str) -> te.Tensor:
    def f(*i):
        v = y[i]
        if attrs.scale:
            v = v * gamma[i[axis]]
        if attrs.center:
            v = v + beta[i[axis]]
        return v
    return te.compute(y.shape, f, name=name)


def _require_float(op: str, x: te.Tensor) -> None:
    if not is_float(x.dtype):
        raise fail(op, f"needs a float tensor, got {x.dtype}")


@rule("nn.layer_norm")
@in_float32
def _layer_norm(inputs, attrs, out_type):
    x, gamma, beta = inputs
    _require_float("nn.layer_norm", x)
    axis = attrs.axis % x.ndim
    y = normalize(x, (axis,), attrs.epsilon, "T_layer_norm_n")
    return _affine(y, gamma, beta, axis, attrs, "T_layer_norm")


@rule("nn.instance_norm")
@in_float32
def _instance_norm(inputs, attrs, out_type):
    x, gamma, beta = inputs
    _require_float("nn.instance_norm", x)
    axis = attrs.axis % x.ndim
    axes = tuple(d for d in range(1, x.ndim) if d != axis)
    y = normalize(x, axes, attrs.epsilon, "T_instance_norm_n")
    return _affine(y, gamma, beta, axis, attrs, "T_instance_norm")


@rule("nn.group_norm")
@in_float32
def _group_norm(inputs, attrs, out_type):
    x, gamma, beta = inputs
    _require_float("nn.group_norm", x)
    axis = attrs.axis % x.ndim
    g = attrs.num_groups
    gshape = x.shape[:axis] + (g, x.shape[axis] // g) + x.shape[axis + 1:]
    grouped = reshape_to(x, gshape, "T_group_norm_g")
    y = normalize(grouped, tuple(range(axis + 1, len(gshape))), attrs.epsilon, "T_group_norm_n")
    return _affine(reshape_to(y, x.shape, "T_group_norm_r"), gamma, beta, axis, attrs,
                   "T_group_norm")


@rule("nn.batch_norm")
@in_float32
def _batch_norm(inputs, attrs, out_type):
    x, gamma, beta, mean, var = inputs
    _require_float("nn.batch_norm", x)
    axis = attrs.axis % x.ndim
    eps = tir.const(attrs.epsilon, x.dtype)
    y = te.compute(x.shape, lambda *i: (x[i] - mean[i[axis]]) / tir.sqrt(var[i[axis]] + eps),
                   name="T_batch_norm_n")
    return _affine(y, gamma, beta, axis, attrs, "T_batch_norm"), mean, var


@rule("nn.lrn")
@in_float32
def _lrn(inputs, attrs, out_type):
    (x,) = inputs
    _require_float("nn.lrn", x)
    axis, size = attrs.axis % x.ndim, attrs.size
    n, half, dt = x.shape[axis], size // 2, x.dtype
    if dt == "float32" and axis < x.ndim - 1:
        return _lrn_fast(x, axis, size, attrs)

    def total(*i):
        r = te.reduce_axis(size, "r")
        c = i[axis] + r - half
        v = x[i[:axis] + (c,) + i[axis + 1:]]
        return te.sum(v * v, r, where=tir.all(tir.ge(c, 0), tir.lt(c, n)))
    sq = te.compute(x.shape, total, name="T_lrn_sum")
    alpha, bias, beta = (tir.const(v, dt) for v in (attrs.alpha, attrs.bias, attrs.beta))
    return te.compute(x.shape, lambda *i: x[i] / tir.pow(
        bias + alpha * sq[i] / tir.const(size, dt), beta), name="T_lrn")


def _lrn_power(d, beta: float):
    """d ** beta, vectorisable: sqrt forms for the common exponents (0.75: AlexNet, GoogLeNet),
    else exp(beta * log(d)) (inline polynomials, a few ulp) rather than a scalar libm pow."""
    if beta == 0.0:
        return tir.const(1.0, "float32")
    if beta == 1.0:
        return d
    if beta == 0.5:
        return tir.sqrt(d)
    if beta == 0.75:
        return tir.sqrt(d * tir.sqrt(d))
    if beta == 1.5:
        return d * tir.sqrt(d)
    return tir.exp(tir.const(beta, "float32") * tir.log(d))


def _lrn_fast(x: te.Tensor, axis: int, size: int, attrs) -> te.Tensor:
    """float32 LRN as one hand-written pass: for each outer index and channel c, a vectorised
    loop over the flattened inner (spatial) dims sums the squares of the channels in the
    window [c - size//2, c - size//2 + size) that exist; the border channels get their own
    statements with only the in-range terms, so no load is guarded."""
    shape = x.shape
    outer = 1
    for d in shape[:axis]:
        outer *= d
    inner = 1
    for d in shape[axis + 1:]:
        inner *= d
    n, half = shape[axis], size // 2
    rest = len(shape) - axis - 1
    alpha_n = tir.const(attrs.alpha / size, "float32")
    bias = tir.const(attrs.bias, "float32")

    def fcompute(ins, outs):
        xb, ob = ins[0], outs[0]
        o = tir.Var("lrn_o", "int64")
        i = tir.Var("lrn_i", "int64")

        zero = tir.const(0, "int64")

        def idx(ch):  # flat offset (o*n + ch)*inner + i through the row-major strides
            return (zero,) * axis + (o * n + ch,) + (zero,) * (rest - 1) + (i,)

        def channel(ch, offsets):
            acc = None
            for r in offsets:
                v = Load(xb, idx(ch + r), "float32")
                acc = v * v if acc is None else acc + v * v
            val = Load(xb, idx(ch), "float32")
            d = bias + alpha_n * acc
            return For(i, inner, Store(ob, idx(ch), val / _lrn_power(d, attrs.beta)),
                       "vectorized")

        def valid(c):
            return [r - half for r in range(size) if 0 <= c + r - half < n]

        lo_end = min(half, n)
        hi_start = max(lo_end, n - (size - 1 - half))
        stmts = [channel(tir.const(c, "int64"), valid(c)) for c in range(lo_end)]
        if hi_start > lo_end:
            c = tir.Var("lrn_c", "int64")
            stmts.append(For(c, hi_start - lo_end, channel(
                c + tir.const(lo_end, "int64"), [r - half for r in range(size)])))
        stmts += [channel(tir.const(c, "int64"), valid(c)) for c in range(hi_start, n)]
        return For(o, outer, seq(*stmts))

    return te.extern(shape, [x], fcompute, name="T_lrn")


@rule("nn.dropout")
def _dropout(inputs, attrs, out_type):
    (x,) = inputs  # inference: identity, and an all-ones mask
    out = te.compute(x.shape, lambda *i: x[i], name="T_dropout")
    return out, te.compute(x.shape, lambda *i: tir.const(1, x.dtype), name="T_dropout_mask")
