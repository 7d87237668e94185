"""Op templates: data movement (Reshape, Transpose, Slice, Concat, Split, Gather,
GatherElements, Squeeze, Unsqueeze, Pad, Expand, Tile, Flatten, DepthToSpace, SpaceToDepth,
Shape). Values pass through unchanged, so err/mag/lo carry over."""
from __future__ import annotations

import math

import numpy as np

from .graph import FLOATS, INTS, GraphBuilder, Value, neg_axis, random_shape, spec
from .ops_math import fresh

ANY = FLOATS + INTS
BIG = 2 ** 63 - 1


def same(v: Value, shape, dtype: str | None = None) -> dict:
    """A node output that carries v's values (moved, copied or dropped)."""
    return spec(shape, dtype or v.dtype, v.mag, v.err, v.lo, v.nonfinite, v.absmin)


def _pick_any(b: GraphBuilder, pred=lambda v: True, rank=None) -> Value | None:
    return b.pick(lambda v: v.dtype in ANY + ("bool",) and v.size <= 50000 and pred(v),
                  fresh(b, ANY, rank=rank))


def _factor(b: GraphBuilder, n: int, parts: int) -> list:
    """n as a product of `parts` positive ints in random order."""
    dims = [1] * parts
    f, m = 2, n
    primes = []
    while m > 1 and f * f <= m:
        while m % f == 0:
            primes.append(f)
            m //= f
        f += 1
    if m > 1:
        primes.append(m)
    for p in primes:
        dims[int(b.rng.integers(parts))] *= p
    return dims


def t_reshape(b: GraphBuilder) -> bool:
    v = _pick_any(b)
    if v is None:
        return False
    rank = int(b.rng.integers(0 if v.size == 1 else 1, 6))
    allowzero = None
    if v.size == 0:
        if b.opset < 14 or v.rank == 0:
            # a 0 copies the input's dim: keep the empty dim where it is, refactor the rest
            target = [0 if d == 0 and b.chance(0.7) else d for d in v.shape]
            out = [d if t == 0 else t for t, d in zip(target, v.shape)]
            b.node("Reshape", [v, b.constant(np.array(target, np.int64))], [same(v, out)])
            return True
        allowzero = 1
        out = list(random_shape(b, max(rank, 1))) + [0]
        b.rng.shuffle(out)
        target = out
    else:
        out = _factor(b, v.size, max(rank, 0)) if rank else []
        target = list(out)
        if target and b.chance(0.4):
            target[int(b.rng.integers(len(target)))] = -1
        if b.opset >= 14 and b.chance(0.2):
            allowzero = 0 if b.chance(0.5) else 1
        if not allowzero:
            for i, d in enumerate(out):
                if i < v.rank and v.shape[i] == d and target[i] != -1 and b.chance(0.3):
                    target[i] = 0
    b.node("Reshape", [v, b.constant(np.array(target, np.int64).reshape(len(target)))],
           [same(v, out)], allowzero=allowzero)
    return True


def t_transpose(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank >= 2)
    if v is None or v.rank < 2:
        return False
    if b.chance(0.2):
        b.node("Transpose", [v], [same(v, v.shape[::-1])])
        return True
    perm = [int(p) for p in b.rng.permutation(v.rank)]
    b.node("Transpose", [v], [same(v, [v.shape[p] for p in perm])], perm=perm)
    return True


def slice_len(d: int, start: int, end: int, step: int) -> int:
    """Output length of one ONNX Slice axis (the spec's clamping rules)."""
    start = start + d if start < 0 else start
    end = end + d if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), d), min(max(end, 0), d)
        return max(0, math.ceil((end - start) / step))
    start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
    return max(0, math.ceil((start - end) / -step))


def t_slice(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank >= 1)
    if v is None or v.rank == 0:
        return False
    n = int(b.rng.integers(1, v.rank + 1))
    axes = [int(a) for a in b.rng.choice(v.rank, n, replace=False)]
    starts, ends, steps, out = [], [], [], list(v.shape)
    ind = b.choice(INTS)
    for a in axes:
        d = v.shape[a]
        step = int(b.choice([1, 1, 1, 2, 3, -1, -2])) if d > 0 else 1
        if step > 0:
            s = int(b.choice([0, int(b.rng.integers(-d - 2, d + 2)), -BIG]))
            e = int(b.choice([BIG, int(b.rng.integers(-d - 2, d + 3)), d, -1]))
        else:  # start < -d is where numpy slicing and the spec's clamping disagree: skip it
            s = int(b.choice([-1, int(b.rng.integers(-d, d + 3)), BIG]))
            e = int(b.choice([-BIG, int(b.rng.integers(-d - 2, d + 1)), 0]))
        starts.append(s)
        ends.append(e)
        steps.append(step)
        out[a] = slice_len(d, s, e, step)
    if ind == "int32":
        starts = [min(max(x, -2 ** 31), 2 ** 31 - 1) for x in starts]
        ends = [min(max(x, -2 ** 31), 2 ** 31 - 1) for x in ends]
        out = [slice_len(v.shape[a], s, e, st) for a, s, e, st in zip(axes, starts, ends, steps)]
        full = list(v.shape)
        for a, o in zip(axes, out):
            full[a] = o
        out = full
    ins = [v, b.constant(np.array(starts, ind)), b.constant(np.array(ends, ind))]
    given_axes = [neg_axis(b, a, v.rank) for a in axes]
    if given_axes != list(range(n)) or b.chance(0.6) or any(s != 1 for s in steps):
        ins.append(b.constant(np.array(given_axes, ind)))
        if any(s != 1 for s in steps) or b.chance(0.5):
            ins.append(b.constant(np.array(steps, ind)))
    b.node("Slice", ins, [same(v, out)])
    return True


def t_concat(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank >= 1)
    if v is None or v.rank == 0:
        return False
    axis = int(b.rng.integers(v.rank))
    parts = [v]
    for _ in range(int(b.rng.integers(1, 3))):
        other = b.pick(lambda u: u.dtype == v.dtype and u.rank == v.rank and all(
            x == y for i, (x, y) in enumerate(zip(u.shape, v.shape)) if i != axis))
        if other is None or b.chance(0.5):
            shape = list(v.shape)
            shape[axis] = int(b.choice([0, 1, 2, 3, 5])) if b.chance(0.9) else v.shape[axis]
            other = b.operand(shape, v.dtype) if v.dtype != "bool" else \
                b.operand(shape, "bool", p_const=0.5)
        parts.append(other)
    b.rng.shuffle(parts)
    out = list(v.shape)
    out[axis] = sum(p.shape[axis] for p in parts)
    o = spec(out, v.dtype, max(p.mag for p in parts), max(p.err for p in parts), None,
             any(p.nonfinite for p in parts))
    b.node("Concat", parts, [o], axis=neg_axis(b, axis, v.rank))
    return True


def t_split(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank >= 1 and any(d >= 2 for d in v.shape))
    if v is None or not any(d >= 2 for d in v.shape):
        return False
    axis = b.choice([i for i, d in enumerate(v.shape) if d >= 2])
    d = v.shape[axis]
    attrs, ins = {"axis": neg_axis(b, axis, v.rank)}, [v]
    mode = b.rng.random()
    if mode < 0.3 and b.opset >= 18:
        n = int(b.rng.integers(2, min(d, 4) + 1))
        chunk = -(-d // n)
        sizes = [chunk] * (d // chunk) + ([d % chunk] if d % chunk else [])
        if len(sizes) != n:
            return False
        attrs["num_outputs"] = n
    elif mode < 0.5 and b.opset < 18:
        n = b.choice([k for k in (2, 3, 4) if d % k == 0] or [d])
        sizes = [d // n] * n
    else:
        n = int(b.rng.integers(2, 4))
        cuts = sorted(int(c) for c in b.rng.integers(0, d + 1, n - 1))
        sizes = [e - s for s, e in zip([0] + cuts, cuts + [d])]
        if b.opset >= 13:
            ins.append(b.constant(np.array(sizes, np.int64)))
        else:
            attrs["split"] = sizes
    outs = [same(v, v.shape[:axis] + (s,) + v.shape[axis + 1:]) for s in sizes]
    b.node("Split", ins, outs, **attrs)
    return True


def t_gather(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank >= 1 and 0 not in v.shape)
    if v is None or v.rank == 0 or 0 in v.shape:
        return False
    axis = int(b.rng.integers(v.rank))
    d = v.shape[axis]
    if b.chance(0.3) and b.opset >= 11:
        # other dims equal to the data's: the reference (np.take_along_axis) needs that
        shape = [int(b.rng.integers(1, 4)) if i == axis else x for i, x in enumerate(v.shape)]
        idx = b.rng.integers(-d, d, shape).astype(b.choice(INTS))
        b.node("GatherElements", [v, b.constant(idx)], [same(v, shape)],
               axis=neg_axis(b, axis, v.rank))
        return True
    ishape = random_shape(b, int(b.rng.integers(0, 3)), hi=4, p_empty=0.05)
    idx = b.rng.integers(-d, d, ishape).astype(b.choice(INTS))
    if b.chance(0.2) and len(b.inputs) < 5:
        ind = b.fresh_input(idx.shape, idx.dtype.name)
        b.feeds[ind.name] = idx
    else:
        ind = b.constant(idx)
    out = v.shape[:axis] + tuple(ishape) + v.shape[axis + 1:]
    if math.prod(out) > 100000:
        return False
    b.node("Gather", [v, ind], [same(v, out)], axis=neg_axis(b, axis, v.rank))
    return True


def t_squeeze(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: 1 in v.shape)
    if v is None or 1 not in v.shape:
        return False
    ones = [i for i, d in enumerate(v.shape) if d == 1]
    if b.chance(0.2):
        axes = ones
        ins, attrs = [v], {}
    else:
        axes = sorted(int(a) for a in b.rng.choice(ones, int(b.rng.integers(1, len(ones) + 1)),
                                                  replace=False))
        given = [neg_axis(b, a, v.rank) for a in axes]
        b.rng.shuffle(given)
        ins, attrs = [v], {}
        if b.opset >= 13:
            ins.append(b.constant(np.array(given, np.int64)))
        else:
            attrs["axes"] = given
    out = [d for i, d in enumerate(v.shape) if i not in axes]
    b.node("Squeeze", ins, [same(v, out)], **attrs)
    return True


def t_unsqueeze(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank <= 4)
    if v is None or v.rank > 4:
        return False
    k = int(b.rng.integers(1, 3))
    r = v.rank + k
    axes = sorted(int(a) for a in b.rng.choice(r, k, replace=False))
    out, it = [], iter(v.shape)
    for i in range(r):
        out.append(1 if i in axes else next(it))
    given = [neg_axis(b, a, r) for a in axes]
    b.rng.shuffle(given)
    if b.opset >= 13:
        b.node("Unsqueeze", [v, b.constant(np.array(given, np.int64))], [same(v, out)])
    else:
        b.node("Unsqueeze", [v], [same(v, out)], axes=given)
    return True


def t_pad(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: 1 <= v.rank <= 5 and v.dtype != "bool")
    if v is None or v.rank == 0 or v.dtype == "bool":
        return False
    modes = ["constant", "constant", "reflect", "edge"] + (["wrap"] if b.opset >= 19 else [])
    mode = b.choice(modes)
    use_axes = b.opset >= 18 and b.chance(0.4)
    axes = sorted(int(a) for a in b.rng.choice(v.rank, int(b.rng.integers(1, v.rank + 1)),
                                               replace=False)) if use_axes else \
        list(range(v.rank))
    begin, end = [], []
    for a in axes:
        d = v.shape[a]
        if mode == "constant":
            lo_, hi_ = -min(d, 2), 3
        elif mode == "reflect":
            lo_, hi_ = 0, max(0, min(d - 1, 3))
        elif mode == "wrap":
            lo_, hi_ = 0, min(d, 3)
        else:
            lo_, hi_ = 0, (3 if d > 0 else 0)
        p, q = (int(b.rng.integers(lo_, hi_ + 1)) for _ in range(2))
        if d + p + q < 0:
            p = q = 0
        begin.append(p)
        end.append(q)
    out = list(v.shape)
    for a, p, q in zip(axes, begin, end):
        out[a] = v.shape[a] + p + q
    ins = [v, b.constant(np.array(begin + end, np.int64))]
    if mode == "constant" and b.chance(0.5):
        ins.append(b.constant(np.array(b.choice([0, 1, -3]), dtype=v.dtype)))
    if use_axes:
        while len(ins) < 3:
            ins.append("")
        # (int64: onnx's shape inference reads Pad's axes as int64 whatever Tind says)
        ins.append(b.constant(np.array([neg_axis(b, a, v.rank) for a in axes], np.int64)))
    mag = max(v.mag, 3.0)
    b.node("Pad", ins, [spec(out, v.dtype, mag, v.err, None, v.nonfinite)],
           mode=mode if mode != "constant" or b.chance(0.5) else None)
    return True


def t_expand(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank <= 4 and v.size <= 2000)
    if v is None or v.rank > 4:
        return False
    target = [int(b.rng.integers(2, 4)) if d == 1 and b.chance(0.6) else
              (1 if b.chance(0.2) else d) for d in v.shape]
    if b.chance(0.3):
        target = [int(b.rng.integers(1, 3))] + target
    if b.chance(0.2) and target:
        target = target[1:]
    out = np.broadcast_shapes(v.shape, tuple(target))
    if math.prod(out) > 50000:
        return False
    b.node("Expand", [v, b.constant(np.array(target, np.int64).reshape(len(target)))],
           [same(v, out)])
    return True


def t_tile(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: 1 <= v.rank <= 4 and v.size <= 2000)
    if v is None or not 1 <= v.rank <= 4:
        return False
    reps = [int(b.choice([1, 1, 2, 3, 0] if b.chance(0.1) else [1, 1, 2, 3]))
            for _ in range(v.rank)]
    out = [d * r for d, r in zip(v.shape, reps)]
    b.node("Tile", [v, b.constant(np.array(reps, np.int64))], [same(v, out)])
    return True


def t_flatten(b: GraphBuilder) -> bool:
    v = _pick_any(b, lambda v: v.rank >= 1)
    if v is None or v.rank == 0:
        return False
    axis = int(b.rng.integers(0, v.rank + 1))
    out = (math.prod(v.shape[:axis]), math.prod(v.shape[axis:]))
    given = axis - v.rank if axis < v.rank and b.chance(0.4) else axis
    b.node("Flatten", [v], [same(v, out)], axis=given if given != 1 or b.chance(0.5) else None)
    return True


def t_space_depth(b: GraphBuilder) -> bool:
    v = b.pick(lambda v: v.rank == 4 and v.dtype in ANY and v.size <= 50000,
               lambda: b.fresh_input((1, 8, 4, 6), b.choice(ANY)))
    if v is None or v.rank != 4:
        return False
    n, c, h, w = v.shape
    bs = int(b.choice([2, 3]))
    if b.chance(0.5):
        if c % (bs * bs):
            return False
        mode = b.choice(["DCR", "CRD"])
        b.node("DepthToSpace", [v], [same(v, (n, c // (bs * bs), h * bs, w * bs))],
               blocksize=bs, mode=mode if mode != "DCR" or b.chance(0.5) else None)
        return True
    if h % bs or w % bs:
        return False
    b.node("SpaceToDepth", [v], [same(v, (n, c * bs * bs, h // bs, w // bs))], blocksize=bs)
    return True


def t_shape(b: GraphBuilder) -> bool:
    v = _pick_any(b)
    if v is None:
        return False
    if b.chance(0.3):
        b.node("Size", [v], [spec((), "int64", max(v.size, 1))])
        return True
    attrs = {}
    lo_, hi_ = 0, v.rank
    if b.opset >= 15 and b.chance(0.5) and v.rank:
        s, e = int(b.rng.integers(-v.rank - 1, v.rank + 1)), int(b.rng.integers(-v.rank, v.rank + 2))
        attrs = {"start": s, "end": e}
        lo_ = min(max(s + v.rank if s < 0 else s, 0), v.rank)
        hi_ = min(max(e + v.rank if e < 0 else e, 0), v.rank)
    b.node("Shape", [v], [spec((max(hi_ - lo_, 0),), "int64", max(v.shape or (1,)))], **attrs)
    return True


TEMPLATES = {
    t_reshape: 2.5, t_transpose: 2, t_slice: 2.5, t_concat: 2, t_split: 1.5, t_gather: 2,
    t_squeeze: 1, t_unsqueeze: 1.5, t_pad: 2, t_expand: 1, t_tile: 0.7, t_flatten: 1,
    t_space_depth: 0.5, t_shape: 0.4,
}
