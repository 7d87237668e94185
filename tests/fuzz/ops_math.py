"""Op templates: elementwise and broadcasting math (Add/Sub/Mul/Div/Pow, variadic
Max/Min/Sum/Mean, unary activations and math, Clip), Cast/CastLike, comparisons, logic ops
and Where.

Each template takes a GraphBuilder, adds one node (sometimes a condition node before it) and
returns True, or returns False without changing anything when the graph has no fitting
operand. Output shapes follow the ONNX spec of the builder's opset; the oracle checks them
against onnx.shape_inference and the reference's actual outputs.
"""
from __future__ import annotations

import math

import numpy as np

from .graph import (FLOATS, INTS, GraphBuilder, Value, broadcast, broadcast_partner,
                    random_shape, rounding, spec, tensor_proto_dtype)


def fresh(b: GraphBuilder, dtypes, rank: int | None = None, kind: str = "normal", hi: int = 6):
    """A make() for pick: a new graph input of a random shape and one of dtypes."""
    return lambda: b.fresh_input(random_shape(b, rank, hi=hi), b.choice(dtypes), kind)


def compatible(*shapes) -> bool:
    try:
        np.broadcast_shapes(*shapes)
        return True
    except ValueError:
        return False


def partner(b: GraphBuilder, a: Value, dtype: str | None = None, kind: str = "normal",
            pred=lambda v: True) -> Value:
    """A second operand broadcasting with a: an existing value (sometimes) or a fresh one."""
    dtype = dtype or a.dtype
    if b.chance(0.35):
        v = b.pick(lambda v: v.dtype == dtype and compatible(v.shape, a.shape) and v.size <= 4096
                   and pred(v))
        if v is not None:
            return v
    return b.operand(broadcast_partner(b, a.shape), dtype, kind)


def arith_dtypes(b: GraphBuilder, op: str) -> tuple:
    if op in ("Max", "Min", "Pow") and b.opset < 12:
        return FLOATS
    return FLOATS + INTS


def t_binary(b: GraphBuilder) -> bool:
    op = b.choice(["Add", "Sub", "Mul", "Div", "Pow", "Add", "Mul", "Sub"])
    dtypes = arith_dtypes(b, op)
    a = b.pick(lambda v: v.dtype in dtypes and v.size <= 4096, fresh(b, dtypes))
    if a is None:
        return False
    if op == "Div":
        return _div(b, a)
    if op == "Pow":
        return _pow(b, a)
    c = partner(b, a)
    x, y = (a, c) if b.chance(0.6) else (c, a)
    shape = broadcast(x.shape, y.shape)
    lo = absmin = None
    if op == "Add":
        mag, err = x.mag + y.mag, x.err + y.err
        lo = x.lo + y.lo if x.lo is not None and y.lo is not None else None
    elif op == "Sub":
        mag, err = x.mag + y.mag, x.err + y.err
    else:
        mag, err = x.mag * y.mag, x.err * y.mag + y.err * x.mag
        lo = x.lo * y.lo if x.lo is not None and y.lo is not None else None
        absmin = x.absmin * y.absmin
    if not b.fits(a.dtype, mag):
        return False
    err = err + rounding(a.dtype, mag) if (err or a.dtype in FLOATS) else 0.0
    b.node(op, [x, y], [spec(shape, a.dtype, mag, err, lo, x.nonfinite or y.nonfinite,
                             absmin or 0.0)])
    return True


def _div(b: GraphBuilder, a: Value) -> bool:
    bound = 1.0 if a.dtype in INTS else 0.05
    d = partner(b, a, kind="nonzero", pred=lambda v: v.absmin >= bound and v.uses < 3)
    if d.absmin < bound:
        return False
    shape = broadcast(a.shape, d.shape)
    if a.dtype in INTS:
        b.node("Div", [a, d], [spec(shape, a.dtype, a.mag)])
        return True
    mag = a.mag / d.absmin
    err = (a.err + mag * d.err) / d.absmin + rounding(a.dtype, mag)
    if not b.fits(a.dtype, mag):
        return False
    lo = a.lo / d.mag if a.lo is not None and d.lo is not None else None
    b.node("Div", [a, d], [spec(shape, a.dtype, mag, err, lo, a.nonfinite)])
    return True


def _pow(b: GraphBuilder, a: Value) -> bool:
    if a.dtype in INTS:
        if a.mag > 100:
            return False
        e = int(b.choice([0, 1, 2, 3]))
        exp = b.constant(np.array(e, dtype=b.choice(INTS)))
        mag = a.mag ** e
        if not b.fits(a.dtype, mag):
            return False
        b.node("Pow", [a, exp], [spec(a.shape, a.dtype, mag)])
        return True
    positive = a.lo is not None and a.lo >= 0.05
    if positive and b.chance(0.5):
        # any real exponent, possibly a tensor broadcasting against the base
        if b.chance(0.3):
            e_val = b.operand(broadcast_partner(b, a.shape), a.dtype)
            emax = 2.0
        else:
            emax = float(b.choice([0.5, 1.5, -0.5, 2.5, -2.0]))
            e_val = b.constant(np.array(emax, dtype=a.dtype))
        mag = max(a.mag, 1.0 / a.lo) ** abs(emax)
        err = abs(emax) * mag / a.lo * a.err + rounding(a.dtype, mag) * 4
        shape = broadcast(a.shape, e_val.shape)
        lo = min(a.lo, 1.0 / a.mag) ** abs(emax)
    else:
        e = int(b.choice([2, 3, 1, 0] + ([-1] if a.absmin >= 0.25 else [])))
        if b.opset >= 12 and b.chance(0.3):
            e_val = b.constant(np.array(e, dtype=b.choice(INTS)))
        else:
            e_val = b.constant(np.array(float(e), dtype=a.dtype))
        base = max(a.mag, 1.0 / a.absmin if e < 0 else 1.0)
        mag = base ** abs(e)
        err = abs(e) * base ** (abs(e) + (1 if e < 0 else -1)) * a.err + rounding(a.dtype, mag) * 4
        shape, lo = a.shape, None
    if not b.fits(a.dtype, mag):
        return False
    b.node("Pow", [a, e_val], [spec(shape, a.dtype, mag, err, lo, a.nonfinite)])
    return True


def t_variadic(b: GraphBuilder) -> bool:
    """Max / Min / Sum / Mean over one to three broadcasting inputs."""
    op = b.choice(["Max", "Min", "Sum", "Mean"])
    dtypes = FLOATS if op in ("Sum", "Mean") or b.opset < 12 else FLOATS + INTS
    a = b.pick(lambda v: v.dtype in dtypes and v.size <= 4096, fresh(b, dtypes))
    if a is None:
        return False
    ins = [a]
    for _ in range(int(b.rng.integers(0, 3))):
        ins.append(partner(b, a, pred=lambda v: compatible(v.shape, broadcast(
            *[u.shape for u in ins]))))
        if not compatible(*[v.shape for v in ins]):
            return False
    b.rng.shuffle(ins)
    shape = broadcast(*[v.shape for v in ins])
    mag = sum(v.mag for v in ins) if op == "Sum" else max(v.mag for v in ins)
    err = sum(v.err for v in ins) if op in ("Sum", "Mean") else max(v.err for v in ins)
    if op in ("Sum", "Mean") and len(ins) > 1:
        err += rounding(a.dtype, mag) * len(ins)
    lows = [v.lo for v in ins]
    lo = None if None in lows else (max(lows) if op == "Max" else min(lows))
    b.node(op, ins, [spec(shape, a.dtype, mag, err, lo, any(v.nonfinite for v in ins))])
    return True


def _unary_rule(op: str, v: Value):
    """(mag, err, lo, nonfinite) of op(v), or None when v is not a fitting input."""
    m, e, eps = v.mag, v.err, rounding(v.dtype, 1.0)
    safe = v.lo is not None and v.lo >= 0.05
    if op in ("Log", "Sqrt") and not (v.exact or safe):
        return None
    if op == "Reciprocal" and not (v.exact or v.absmin >= 0.05):
        return None
    if op in ("Floor", "Ceil", "Round", "Sign") and not v.exact:
        return None
    lo_div = v.lo if safe else 1.0
    table = {
        "Relu": (m, e, v.lo, v.nonfinite),
        "Abs": (m, e, v.absmin or None, v.nonfinite),
        "Neg": (m, e, None, v.nonfinite),
        "Identity": (m, e, v.lo, v.nonfinite),
        "Sigmoid": (1.0, e / 4 + 2 * eps, None, v.nonfinite),
        "Tanh": (1.0, e + 2 * eps, None, v.nonfinite),
        "Erf": (1.0, 1.2 * e + 2 * eps, None, v.nonfinite),
        "Softplus": (m + 1, e + 4 * eps * (m + 1), 0.0 if False else None, v.nonfinite),
        "Exp": (math.exp(min(m, 700)), None, math.exp(-min(m, 700)), v.nonfinite),
        "Log": (max(abs(math.log(max(m, 1e-30))), abs(math.log(lo_div)), 1.0),
                e / lo_div + 4 * eps * max(m, 20), None, True if not safe else v.nonfinite),
        "Sqrt": (math.sqrt(m), e / (2 * math.sqrt(lo_div)) + 2 * eps * math.sqrt(m),
                 math.sqrt(v.lo) if safe else None, True if not safe else v.nonfinite),
        "Reciprocal": (1 / max(v.absmin, 1e-30), e / max(v.absmin, 1e-30) ** 2,
                       None, v.absmin < 0.05 or v.nonfinite),
        "Floor": (m + 1, 0.0, None, v.nonfinite),
        "Ceil": (m + 1, 0.0, None, v.nonfinite),
        "Round": (m + 1, 0.0, None, v.nonfinite),
        "Sign": (1.0, 0.0, None, v.nonfinite),
        "LeakyRelu": (m, e, None, v.nonfinite),
        "Elu": (m, e + 2 * eps * m, None, v.nonfinite),
        "Selu": (1.06 * m * 1.76, 1.8 * e + 4 * eps * m, None, v.nonfinite),
        "HardSigmoid": (1.0, e, None, v.nonfinite),
        "HardSwish": (m, 1.5 * e + 2 * eps * m, None, v.nonfinite),
        "Gelu": (m, 1.2 * e + 4 * eps * m, None, v.nonfinite),
        "Sin": (1.0, e + 4 * eps * max(m, 1), None, v.nonfinite),
        "Cos": (1.0, e + 4 * eps * max(m, 1), None, v.nonfinite),
    }
    mag, err, lo, nonfinite = table[op]
    if op == "Exp":
        err = mag * e + 4 * eps * mag
    if mag > 1e30 or not math.isfinite(mag):
        return None
    if op not in ("Relu", "Abs", "Neg", "Identity", "LeakyRelu") or err:  # alpha * x + beta rounds
        err = max(err, 0.0) + eps * mag
    return mag, err, lo, nonfinite


UNARY_FLOAT = ["Relu", "Abs", "Neg", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal",
               "Erf", "Floor", "Ceil", "Round", "Sign", "Softplus", "LeakyRelu", "Elu", "Selu",
               "HardSigmoid", "HardSwish", "Gelu", "Identity", "Sin", "Cos", "Relu", "Exp",
               "Sigmoid", "Tanh", "Abs", "Sqrt", "Log"]
UNARY_MIN_OPSET = {"HardSwish": 14, "Gelu": 20}


def t_unary(b: GraphBuilder) -> bool:
    if b.chance(0.25):
        op = b.choice(["Abs", "Neg", "Sign"] + (["Relu"] if b.opset >= 14 else []))
        v = b.pick(lambda v: v.dtype in INTS, fresh(b, INTS))
        if v is None:
            return False
        lo = (v.absmin or None) if op == "Abs" else None
        b.node(op, [v], [spec(v.shape, v.dtype, v.mag, lo=lo)])
        return True
    op = b.choice([o for o in UNARY_FLOAT if UNARY_MIN_OPSET.get(o, 0) <= b.opset])
    v = b.pick(lambda v: v.dtype in FLOATS and v.size <= 20000
               and _unary_rule(op, v) is not None and b.fits(v.dtype, _unary_rule(op, v)[0]),
               fresh(b, FLOATS))
    rule = _unary_rule(op, v) if v is not None else None
    if rule is None or not b.fits(v.dtype, rule[0]):
        return False
    attrs = {}
    if op == "LeakyRelu":
        attrs["alpha"] = float(b.choice([0.01, 0.2, 1.5]))
    elif op == "Elu":
        attrs["alpha"] = float(b.choice([1.0, 0.5]))
    elif op == "HardSigmoid":
        attrs = {"alpha": float(b.choice([0.2, 0.5])), "beta": float(b.choice([0.5, 0.3]))}
    elif op == "Gelu" and b.chance(0.5):
        attrs["approximate"] = "tanh"
    mag, err, lo, nonfinite = rule
    if op == "LeakyRelu":
        mag *= max(1.0, attrs["alpha"])
    b.node(op, [v], [spec(v.shape, v.dtype, mag, err, lo, nonfinite)], **attrs)
    return True


def t_clip(b: GraphBuilder) -> bool:
    dtypes = FLOATS + INTS if b.opset >= 12 else FLOATS
    v = b.pick(lambda v: v.dtype in dtypes, fresh(b, dtypes))
    if v is None:
        return False
    scale = 4 if v.dtype in INTS else 1.0
    lo_v = hi_v = None
    if b.chance(0.75):
        lo_v = np.array(b.choice([-1.0, -0.5, 0.0, 0.25]) * scale, dtype=v.dtype)
    if b.chance(0.75):
        hi_v = np.array(b.choice([1.0, 0.5, 2.0, -0.75]) * scale, dtype=v.dtype)
    ins = [v, b.constant(lo_v) if lo_v is not None else "",
           b.constant(hi_v) if hi_v is not None else ""]
    bound = max([abs(float(x)) for x in (lo_v, hi_v) if x is not None] + [0.0])
    mag = min(v.mag, bound) if hi_v is not None and lo_v is not None else v.mag
    lo = float(lo_v) if lo_v is not None and float(lo_v) > 0 else None
    b.node("Clip", ins, [spec(v.shape, v.dtype, mag, v.err, lo, v.nonfinite)])
    return True


CASTABLE = ("float32", "float16", "int32", "int64", "bool")


def t_cast(b: GraphBuilder) -> bool:
    v = b.pick(lambda v: v.dtype in CASTABLE, fresh(b, FLOATS + INTS))
    if v is None:
        return False
    to = b.choice([d for d in CASTABLE if d != v.dtype])
    if v.dtype in FLOATS and to in INTS + ("bool",) and not (v.exact and not v.nonfinite
                                                               and v.mag < 2.0 ** 30):
        return False
    if to in INTS and v.dtype == "int64" and v.mag >= 2.0 ** 31:
        return False
    if to == "float16" and (v.mag > 3e4 or v.nonfinite and not v.exact):
        return False
    err = v.err
    if to in FLOATS and (v.dtype in INTS and v.mag > (2048 if to == "float16" else 2.0 ** 24)
                         or v.dtype in FLOATS and not v.exact or v.dtype == "float32"):
        err += rounding(to, v.mag)
    if to in INTS + ("bool",):
        err = 0.0
    mag = 1.0 if to == "bool" else (v.mag + 1 if v.dtype in FLOATS and to in INTS else v.mag)
    if b.opset >= 15 and b.chance(0.2):
        like = b.constant(np.zeros((0,) if b.chance(0.5) else (), dtype=to))
        b.node("CastLike", [v, like], [spec(v.shape, to, mag, err, None, v.nonfinite)])
    else:
        b.node("Cast", [v], [spec(v.shape, to, mag, err, None, v.nonfinite)],
               to=tensor_proto_dtype(to))
    return True


def _condition(b: GraphBuilder, shape: tuple) -> Value | None:
    """A bool tensor broadcasting with shape: an input, a comparison of exact values, a logic op."""
    r = b.rng.random()
    if r < 0.5 and b.room(2):
        ops = ["Greater", "Less", "Equal"] + (["GreaterOrEqual", "LessOrEqual"]
                                             if b.opset >= 12 else [])
        op = b.choice(ops)
        x = b.pick(lambda v: v.exact and v.dtype in FLOATS + INTS and compatible(v.shape, shape)
                   and v.size <= 4096)
        if x is None:
            x = b.operand(broadcast_partner(b, shape), b.choice(FLOATS + INTS), p_const=0.0)
        y = b.operand(broadcast_partner(b, x.shape), x.dtype, p_const=0.6)
        out = broadcast(x.shape, y.shape)
        if not compatible(out, shape):
            return None
        return b.node(op, [x, y], [spec(out, "bool")])[0]
    if r < 0.65 and b.room(2):
        x = b.pick(lambda v: v.dtype == "bool" and compatible(v.shape, shape))
        if x is not None:
            op = b.choice(["Not", "And", "Or", "Xor"])
            if op == "Not":
                return b.node("Not", [x], [spec(x.shape, "bool")])[0]
            y = b.operand(broadcast_partner(b, x.shape), "bool")
            return b.node(op, [x, y], [spec(broadcast(x.shape, y.shape), "bool")])[0]
    return b.operand(broadcast_partner(b, shape), "bool", p_const=0.3)


def t_where(b: GraphBuilder) -> bool:
    x = b.pick(lambda v: v.dtype in FLOATS + INTS and v.size <= 4096, fresh(b, FLOATS + INTS))
    if x is None or not b.room(2):
        return False
    cond = _condition(b, x.shape)
    if cond is None:
        return False
    if not compatible(cond.shape, x.shape):
        return False
    y = partner(b, x, pred=lambda v: compatible(v.shape, x.shape, cond.shape))
    if not compatible(cond.shape, x.shape, y.shape):
        y = b.operand(x.shape, x.dtype)
    shape = broadcast(cond.shape, x.shape, y.shape)
    args = [x, y] if b.chance(0.5) else [y, x]
    b.node("Where", [cond] + args, [spec(shape, x.dtype, max(x.mag, y.mag), max(x.err, y.err),
                                         None, x.nonfinite or y.nonfinite)])
    return True


TEMPLATES = {
    t_binary: 6, t_variadic: 2, t_unary: 6, t_clip: 1.5, t_cast: 2, t_where: 2,
}
