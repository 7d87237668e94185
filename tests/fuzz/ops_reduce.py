"""Op templates: reductions (Reduce* with negative axes, keepdims both ways, axes as attribute
or input by opset, ArgMax/ArgMin), MatMul (1-D and batched broadcasting), Gemm, Softmax /
LogSoftmax / Hardmax (pre-13 2-D coercion included), LayerNormalization, CumSum."""
from __future__ import annotations

import math

import numpy as np

from .graph import FLOATS, INTS, GraphBuilder, Value, broadcast_partner, neg_axis, rounding, spec
from .ops_math import fresh


REDUCE_FLOAT = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum",
                "ReduceSum", "ReduceMax", "ReduceMean"]
REDUCE_INT = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"]


def t_reduce(b: GraphBuilder) -> bool:
    if b.chance(0.2):
        return _argreduce(b)
    ints = b.chance(0.25)
    op = b.choice(REDUCE_INT if ints else REDUCE_FLOAT)
    dtypes = INTS if ints else FLOATS
    v = b.pick(lambda v: v.dtype in dtypes and v.rank >= 1 and v.size <= 50000,
               fresh(b, dtypes, rank=int(b.rng.integers(1, 5))))
    if v is None or v.rank == 0:
        return False
    if op == "ReduceLogSum" and not (v.lo is not None and v.lo > 0.05):
        return False
    rank = v.rank
    n_axes = int(b.rng.integers(1, rank + 1))
    axes = sorted(int(a) for a in b.rng.choice(rank, n_axes, replace=False))
    omit_axes = b.chance(0.15)
    if omit_axes:
        axes = list(range(rank))
    keepdims = int(b.choice([0, 1]))
    k = int(np.prod([v.shape[a] for a in axes]))
    if k == 0 and op in ("ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceLogSum",
                         "ReduceMean"):
        return False  # no identity (Max/Min) or NaN/-inf by convention: keep to Sum-like ones
    out_shape = tuple((1 if keepdims else None) if i in axes else d
                      for i, d in enumerate(v.shape))
    out_shape = tuple(d for d in out_shape if d is not None)
    mag, err = _reduce_bounds(op, v, max(k, 1))
    if not b.fits(v.dtype, mag) or (op == "ReduceProd" and k > 12):
        return False
    given = [neg_axis(b, a, rank) for a in axes]
    attrs = {"keepdims": keepdims if b.chance(0.8) or keepdims == 0 else None}
    ins = [v]
    axes_as_input = b.opset >= (13 if op == "ReduceSum" else 18)
    if not omit_axes:
        if axes_as_input:
            ins.append(b.constant(np.array(given, dtype=np.int64)))
        else:
            attrs["axes"] = given
    lo = v.lo if op in ("ReduceMax", "ReduceMin", "ReduceMean") else None
    b.node(op, ins, [spec(out_shape, v.dtype, mag, err, lo, v.nonfinite or k == 0)], **attrs)
    return True


def _reduce_bounds(op: str, v: Value, k: int) -> tuple:
    m, e, eps = v.mag, v.err, rounding(v.dtype, 1.0)
    grow = 1 + math.sqrt(k) * 2
    if op in ("ReduceMax", "ReduceMin"):
        return m, e
    if op == "ReduceMean":
        return m, e + eps * m * grow
    if op in ("ReduceSum", "ReduceL1"):
        return m * k, k * e + eps * m * k * grow
    if op == "ReduceSumSquare":
        return m * m * k, 2 * m * e * k + eps * m * m * k * grow
    if op == "ReduceL2":
        return m * math.sqrt(k), e * math.sqrt(k) + eps * m * math.sqrt(k) * grow
    if op == "ReduceProd":
        mag = math.exp(min(k * math.log(m), 700)) if m > 1 else 1.0
        return mag, k * mag * e + eps * mag * k * 2
    if op == "ReduceLogSumExp":
        return m + math.log(k), e + eps * (m + math.log(k)) * grow * math.exp(0)
    if op == "ReduceLogSum":
        return abs(math.log(m * k)) + abs(math.log(v.lo)) + 1, k * e / v.lo + eps * 20 * grow
    raise AssertionError(op)


def _argreduce(b: GraphBuilder) -> bool:
    op = b.choice(["ArgMax", "ArgMin"])
    v = b.pick(lambda v: v.exact and not v.nonfinite and v.rank >= 1 and 0 not in v.shape
               and v.dtype in FLOATS + INTS, fresh(b, FLOATS + INTS, rank=3))
    if v is None or v.rank == 0 or 0 in v.shape:
        return False
    axis = int(b.rng.integers(0, v.rank))
    keepdims = int(b.choice([0, 1]))
    shape = tuple(1 if i == axis else d for i, d in enumerate(v.shape) if keepdims or i != axis)
    attrs = {"axis": neg_axis(b, axis, v.rank), "keepdims": keepdims}
    if b.opset >= 12 and b.chance(0.4):
        attrs["select_last_index"] = 1
    b.node(op, [v], [spec(shape, "int64", v.shape[axis])], **attrs)
    return True


def t_matmul(b: GraphBuilder) -> bool:
    dtypes = FLOATS + INTS
    a = b.pick(lambda v: v.dtype in dtypes and 1 <= v.rank <= 4 and v.size <= 8192,
               fresh(b, dtypes, rank=int(b.rng.integers(1, 4))))
    if a is None or a.rank == 0:
        return False
    k = a.shape[-1]
    n = int(b.choice([1, 3, 8, 16, 17]))
    if b.chance(0.2):
        b_shape = (k,)
    elif b.chance(0.3) and a.rank >= 3:
        batch = broadcast_partner(b, a.shape[:-2])
        b_shape = tuple(batch) + (k, n)
    else:
        b_shape = (k, n)
    if a.rank == 1 and len(b_shape) == 1:
        b_shape = (k, n)
    w = b.operand(b_shape, a.dtype, p_const=0.6)
    out = np.matmul(np.empty(a.shape, np.int8), np.empty(w.shape, np.int8)).shape \
        if a.size * w.size <= 200000 else None
    if out is None:
        return False
    mag = a.mag * w.mag * max(k, 1)
    err = k * (a.err * w.mag + w.err * a.mag) + rounding(a.dtype, mag) * (1 + 2 * math.sqrt(k))
    if not b.fits(a.dtype, mag):
        return False
    b.node("MatMul", [a, w], [spec(out, a.dtype, mag, err, None, a.nonfinite)])
    return True


def t_gemm(b: GraphBuilder) -> bool:
    dtypes = FLOATS if b.chance(0.8) else INTS
    a = b.pick(lambda v: v.dtype in dtypes and v.rank == 2 and v.size <= 8192,
               fresh(b, dtypes, rank=2, hi=24))
    if a is None or a.rank != 2:
        return False
    trans_a, trans_b = int(b.chance(0.3)), int(b.chance(0.5))
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = int(b.choice([1, 5, 16, 33]))
    w = b.operand((n, k) if trans_b else (k, n), a.dtype, p_const=0.7)
    is_int = a.dtype in INTS
    alpha = 1.0 if is_int else float(b.choice([1.0, 1.0, 0.5, -2.0]))
    beta = 1.0 if is_int else float(b.choice([1.0, 1.0, 0.25]))
    ins = [a, w]
    mag = abs(alpha) * a.mag * w.mag * max(k, 1)
    err = abs(alpha) * k * (a.err * w.mag + w.err * a.mag)
    if b.chance(0.7):
        c_shape = b.choice([(n,), (1, n), (m, 1), (m, n), (), (1, 1)])
        c = b.operand(c_shape, a.dtype, p_const=0.7)
        ins.append(c)
        mag += abs(beta) * c.mag
        err += abs(beta) * c.err
    err += rounding(a.dtype, mag) * (2 + 2 * math.sqrt(k))
    if not b.fits(a.dtype, mag):
        return False
    attrs = {"transA": trans_a or None, "transB": trans_b or None,
             "alpha": alpha if alpha != 1.0 else None, "beta": beta if beta != 1.0 else None}
    b.node("Gemm", ins, [spec((m, n), a.dtype, mag, err, None, a.nonfinite)], **attrs)
    return True


def t_softmax(b: GraphBuilder) -> bool:
    op = b.choice(["Softmax", "LogSoftmax", "Softmax", "Hardmax"])
    v = b.pick(lambda v: v.dtype in FLOATS and v.rank >= 1 and v.size <= 20000
               and (op != "Hardmax" or (v.exact and not v.nonfinite)),
               fresh(b, FLOATS, rank=int(b.rng.integers(1, 5))))
    if v is None or v.rank == 0:
        return False
    axis = int(b.rng.integers(0, v.rank))
    attrs = {"axis": neg_axis(b, axis, v.rank)} if b.chance(0.8) or v.rank == 1 else {}
    default = 1 if b.opset < 13 else -1
    ax = attrs.get("axis", default) % v.rank if v.rank else 0
    n = int(np.prod(v.shape[ax:])) if b.opset < 13 else v.shape[ax]
    eps = rounding(v.dtype, 1.0)
    if op == "Softmax":
        mag, err = 1.0, 2 * v.err + eps * (4 + math.log(max(n, 1)))
    elif op == "LogSoftmax":
        mag = 2 * v.mag + math.log(max(n, 1)) + 1
        err = 2 * v.err + eps * mag * 4
    else:
        mag, err = 1.0, 0.0
    b.node(op, [v], [spec(v.shape, v.dtype, mag, err, None, v.nonfinite)], **attrs)
    return True


def t_layernorm(b: GraphBuilder) -> bool:
    if b.opset < 17:
        return False
    v = b.pick(lambda v: v.dtype in FLOATS and v.rank >= 1 and v.size <= 20000,
               fresh(b, FLOATS, rank=int(b.rng.integers(1, 4)), hi=12))
    if v is None or v.rank == 0:
        return False
    axis = int(b.rng.integers(0, v.rank))
    norm_shape = v.shape[axis:]
    n = int(np.prod(norm_shape))
    if n == 0:
        return False
    scale_shape = norm_shape if b.chance(0.7) else norm_shape[-1:]
    scale = b.operand(scale_shape, v.dtype, p_const=0.8)
    ins = [v, scale]
    bias_mag = 0.0
    if b.chance(0.7):
        bias = b.operand(scale_shape, v.dtype, p_const=0.8)
        ins.append(bias)
        bias_mag = bias.mag
    epsilon = float(b.choice([1e-5, 1e-3, 0.1]))
    std_floor = max(math.sqrt(epsilon), 0.3)
    mag = math.sqrt(n) * scale.mag + bias_mag
    err = (v.err / std_floor) * scale.mag * 2 + rounding(v.dtype, mag) * (4 + 2 * math.sqrt(n))
    if v.dtype == "float16":
        err += rounding("float16", mag) * math.sqrt(n) * 2
    attrs = {"axis": neg_axis(b, axis, v.rank) if b.chance(0.8) else None,
             "epsilon": epsilon}
    if attrs["axis"] is None and axis != v.rank - 1:
        attrs["axis"] = axis
    b.node("LayerNormalization", ins, [spec(v.shape, v.dtype, mag, err, None, v.nonfinite)],
           **attrs)
    return True


def t_cumsum(b: GraphBuilder) -> bool:
    dtypes = FLOATS + INTS if b.opset >= 14 else ("float32",) + INTS
    v = b.pick(lambda v: v.dtype in dtypes and v.rank >= 1 and v.size <= 4096,
               fresh(b, dtypes, rank=int(b.rng.integers(1, 4))))
    if v is None or v.rank == 0:
        return False
    axis = int(b.rng.integers(0, v.rank))
    k = max(v.shape[axis], 1)
    mag = v.mag * k
    err = k * v.err + rounding(v.dtype, mag) * (1 + 2 * math.sqrt(k)) if v.dtype in FLOATS \
        else 0.0
    if not b.fits(v.dtype, mag):
        return False
    ax = b.constant(np.array(neg_axis(b, axis, v.rank), dtype=b.choice(INTS)))
    attrs = {"exclusive": 1 if b.chance(0.3) else None, "reverse": 1 if b.chance(0.3) else None}
    b.node("CumSum", [v, ax], [spec(v.shape, v.dtype, mag, err, None, v.nonfinite)], **attrs)
    return True


TEMPLATES = {
    t_reduce: 4, t_matmul: 2.5, t_gemm: 1.5, t_softmax: 1.5, t_layernorm: 1, t_cumsum: 0.7,
}
