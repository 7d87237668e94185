"""Injective transforms by index arithmetic: reshape, transpose, slicing, concat, tile, pad, ..."""
from __future__ import annotations

from compiler.op.registry import get_def, list_ops
from compiler.op.transform import _perm, _split_bounds
from compiler.op.transform_slice import slices_of
from compiler.op.transform_layout import parse_layout

from .common import Expr, bcast, clamp, ravel, rule, scalar, te, tensor_name, tir, unravel


def reshape_to(x: te.Tensor, shape: tuple, name: str) -> te.Tensor:
    """Flatten the output index, unflatten it into the input's shape."""
    return te.compute(shape, lambda *i: x[unravel(ravel(i, shape), x.shape)], name=name)


@rule(*(name for name in list_ops() if get_def(name).reshape_only))
def _reshape(inputs, attrs, out_type):
    """Every OpDef.reshape_only op (reshape, squeeze, nn.batch_flatten, ...) lowers this way."""
    return reshape_to(inputs[0], out_type.shape, "T_reshape")


@rule("transpose")
def _transpose(inputs, attrs, out_type):
    (x,) = inputs
    perm = _perm("transpose", x.ndim, attrs.axes)

    def f(*i):
        src: list = [None] * x.ndim
        for d, p in enumerate(perm):
            src[p] = i[d]
        return x[tuple(src)]
    return te.compute(out_type.shape, f, name="T_transpose")


def select_tree(pos: Expr, offsets: list[int], pieces: list) -> Expr:
    """pieces[k](pos - offsets[k]) for the k with offsets[k] <= pos < offsets[k+1]: a balanced
    tree of if_then_else (guarded loads, depth log n rather than a chain of n)."""
    if len(pieces) == 1:
        return pieces[0](pos - offsets[0] if offsets[0] else pos)
    mid = len(pieces) // 2
    return tir.if_then_else(tir.lt(pos, offsets[mid]),
                            select_tree(pos, offsets[:mid], pieces[:mid]),
                            select_tree(pos, offsets[mid:], pieces[mid:]))


@rule("concatenate")
def _concatenate(inputs, attrs, out_type):
    (parts,) = inputs
    axis = attrs.axis % len(out_type.shape)
    parts = [p for p in parts if p.shape[axis] > 0] or list(parts[:1])
    offsets, acc = [], 0
    for p in parts:
        offsets.append(acc)
        acc += p.shape[axis]

    def f(*i):
        def piece(t):
            return lambda j: t[i[:axis] + (j,) + i[axis + 1:]]
        return select_tree(i[axis], offsets, [piece(t) for t in parts])
    return te.compute(out_type.shape, f, name="T_concat")


@rule("stack")
def _stack(inputs, attrs, out_type):
    (parts,) = inputs
    axis = attrs.axis % len(out_type.shape)

    def f(*i):
        def piece(t):
            return lambda j: t[i[:axis] + i[axis + 1:]]
        return select_tree(i[axis], list(range(len(parts))), [piece(t) for t in parts])
    return te.compute(out_type.shape, f, name="T_stack")


@rule("split")
def _split(inputs, attrs, out_type):
    (x,) = inputs
    axis = attrs.axis % x.ndim
    bounds = _split_bounds("split", x.shape[axis], attrs.indices_or_sections)
    outs = []
    for (b, _), ty in zip(bounds, out_type.fields):
        outs.append(te.compute(ty.shape, lambda *i, b=b: x[i[:axis] + (i[axis] + b,)
                                                           + i[axis + 1:]], name="T_split"))
    return tuple(outs)


@rule("reverse")
def _reverse(inputs, attrs, out_type):
    (x,) = inputs
    axis = attrs.axis % x.ndim
    n = x.shape[axis]
    return te.compute(x.shape, lambda *i: x[i[:axis] + (n - 1 - i[axis],) + i[axis + 1:]],
                      name="T_reverse")


@rule("strided_slice")
def _strided_slice(inputs, attrs, out_type):
    (x,) = inputs
    slices = slices_of("strided_slice", x.shape, attrs)
    ranges = [s.indices(d) for s, d in zip(slices, x.shape)]
    return te.compute(out_type.shape, lambda *i: x[tuple(
        i[d] * step + start if step != 1 else i[d] + start
        for d, (start, _, step) in enumerate(ranges))], name="T_strided_slice")


@rule("tile")
def _tile(inputs, attrs, out_type):
    (x,) = inputs
    lead = len(out_type.shape) - x.ndim
    return te.compute(out_type.shape, lambda *i: x[tuple(
        tir.floormod(i[lead + d], n) if n != 1 else 0 for d, n in enumerate(x.shape))],
        name="T_tile")


@rule("repeat")
def _repeat(inputs, attrs, out_type):
    (x,) = inputs
    axis, r = attrs.axis % x.ndim, attrs.repeats
    return te.compute(out_type.shape, lambda *i: x[i[:axis] + (tir.floordiv(i[axis], r),)
                                                   + i[axis + 1:]], name="T_repeat")


@rule("broadcast_to", "broadcast_to_like")
def _broadcast_to(inputs, attrs, out_type):
    x = inputs[0]
    return te.compute(out_type.shape, lambda *i: bcast(x, out_type.shape, i),
                      name="T_broadcast_to")


@rule("nn.pad")
def _pad(inputs, attrs, out_type):
    x, value = inputs
    widths = [tuple(w) for w in attrs.pad_width]
    mode = attrs.pad_mode

    def src(i, d):
        j, n = i - widths[d][0] if widths[d][0] else i, x.shape[d]
        if mode == "edge":
            return clamp(j, 0, n - 1)
        if mode == "reflect":  # padding < n, so one reflection at each end suffices
            j = tir.select(tir.lt(j, 0), -j, j)
            return tir.select(tir.gt(j, n - 1), 2 * (n - 1) - j, j)
        return j

    def f(*i):
        idx = tuple(src(i[d], d) for d in range(x.ndim))
        if mode != "constant":
            return x[idx]
        inside = [tir.all(tir.ge(i[d], w[0]), tir.lt(i[d], w[0] + x.shape[d]))
                  for d, w in enumerate(widths) if w != (0, 0)]
        if not inside:
            return x[idx]
        return tir.if_then_else(tir.all(*inside), x[idx], tir.cast(scalar(value), x.dtype))
    return te.compute(out_type.shape, f, name="T_pad")


@rule("layout_transform")
def _layout_transform(inputs, attrs, out_type):
    (x,) = inputs
    s_tok, d_tok = parse_layout(attrs.src_layout), parse_layout(attrs.dst_layout)
    d_fac = {letter: f for letter, f in d_tok if f}
    s_fac = {letter: f for letter, f in s_tok if f}

    def f(*i):
        pos = {letter: i[k] for k, (letter, _) in enumerate(d_tok)}
        primal = {}
        for letter, _ in d_tok:
            if letter.isupper():
                sub = d_fac.get(letter.lower())
                primal[letter] = pos[letter] * sub + pos[letter.lower()] if sub else pos[letter]
        idx = []
        for letter, factor in s_tok:
            if letter.isupper():
                sub = s_fac.get(letter.lower())
                idx.append(tir.floordiv(primal[letter], sub) if sub else primal[letter])
            else:
                idx.append(tir.floormod(primal[letter.upper()], factor))
        return x[tuple(idx)]
    return te.compute(out_type.shape, f, name="T_layout_transform")


def _subpixel(to_depth: bool):
    def compute(inputs, attrs, out_type):
        (x,) = inputs
        b = attrs.block_size
        n, c, h, w = x.shape

        def d2s(nn, oc, oy, ox):
            by, bx = tir.floormod(oy, b), tir.floormod(ox, b)
            y, xx = tir.floordiv(oy, b), tir.floordiv(ox, b)
            if attrs.mode == "DCR":
                ic = (by * b + bx) * (c // (b * b)) + oc
            else:
                ic = oc * (b * b) + by * b + bx
            return x[nn, ic, y, xx]

        def s2d(nn, oc, oy, ox):
            blk, ic = tir.floordiv(oc, c), tir.floormod(oc, c)
            by, bx = tir.floordiv(blk, b), tir.floormod(blk, b)
            return x[nn, ic, oy * b + by, ox * b + bx]
        return te.compute(out_type.shape, s2d if to_depth else d2s,
                          name=tensor_name("space_to_depth" if to_depth else "depth_to_space"))
    return compute


rule("nn.depth_to_space")(_subpixel(False))
rule("nn.space_to_depth")(_subpixel(True))


__all__ = ["reshape_to", "select_tree", "Expr"]
