"""layout_transform between TVM layout strings such as NCHW, NHWC and NCHW8c."""
from __future__ import annotations

import re

import numpy as np

from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import check_arity, dims_agree, divides, fail, tensor_arg

__all__ = ["layout_transform"]

_OP = "layout_transform"
_TOKEN = re.compile(r"(\d*)([A-Za-z])")


def parse_layout(layout: str) -> list:
    """'NCHW8c' -> [('N', 0), ('C', 0), ('H', 0), ('W', 0), ('c', 8)]; sub-axes need a factor."""
    tokens, pos = [], 0
    for match in _TOKEN.finditer(layout):
        if match.start() != pos:
            break
        factor, letter = match.groups()
        if letter.islower() != bool(factor):
            raise fail(_OP, f"layout {layout!r}: a split axis is written as <factor><lowercase> "
                            f"(e.g. 8c), got {match.group()!r}")
        tokens.append((letter, int(factor or 0)))
        pos = match.end()
    letters = [t[0] for t in tokens]
    if pos != len(layout) or not tokens or len(set(letters)) != len(letters):
        raise fail(_OP, f"layout {layout!r} is not a valid layout string")
    for letter, factor in tokens:
        if factor and letter.upper() not in letters:
            raise fail(_OP, f"layout {layout!r}: sub-axis {factor}{letter} has no primal "
                            f"axis {letter.upper()}")
    return tokens


def _primal_sizes(shape: tuple, tokens: list, layout: str) -> dict:
    sizes = {}
    for (letter, factor), dim in zip(tokens, shape):
        if factor and not dims_agree(_OP, dim, factor, f"axis {factor}{letter} must have "
                                                       f"size {factor}"):
            raise fail(_OP, f"axis {factor}{letter} of {layout!r} has size {dim}, expected "
                            f"{factor}")
    for (letter, _), dim in zip(tokens, shape):
        if letter.isupper():
            sub = {t[0]: t[1] for t in tokens}.get(letter.lower(), 1)
            sizes[letter] = dim * sub
    return sizes


def _check(shape: tuple, src: str, dst: str) -> tuple:
    s_tok, d_tok = parse_layout(src), parse_layout(dst)
    if len(shape) != len(s_tok):
        raise fail(_OP, f"data of shape {shape} does not match src_layout {src!r}")
    s_primal = sorted(t[0] for t in s_tok if t[0].isupper())
    d_primal = sorted(t[0] for t in d_tok if t[0].isupper())
    if s_primal != d_primal:
        raise fail(_OP, f"src_layout {src!r} and dst_layout {dst!r} have different axes")
    return s_tok, d_tok


def layout_shape(shape: tuple, src: str, dst: str) -> tuple:
    """The shape of data in layout `src` once transformed to `dst`."""
    s_tok, d_tok = _check(shape, src, dst)
    sizes = _primal_sizes(shape, s_tok, src)
    subs = {t[0]: t[1] for t in d_tok if t[1]}
    out = []
    for letter, factor in d_tok:
        if factor:
            out.append(factor)
            continue
        sub = subs.get(letter.lower(), 1)
        if not divides(_OP, sizes[letter], sub, f"the split axis {letter} must divide by {sub}"):
            raise fail(_OP, f"axis {letter} of size {sizes[letter]} cannot be split by {sub} "
                            f"for dst_layout {dst!r}")
        out.append(sizes[letter] // sub)
    return tuple(out)


def _layout_transform_ref(inputs, attrs):
    x = inputs[0]
    s_tok, d_tok = _check(x.shape, attrs.src_layout, attrs.dst_layout)
    sizes = _primal_sizes(x.shape, s_tok, attrs.src_layout)
    letters = [t[0] for t in s_tok]
    primal = [t[0] for t in s_tok if t[0].isupper()]
    # 1. merge each sub-axis into its primal axis: data in src's primal order
    order = []
    for p in primal:
        order.append(letters.index(p))
        if p.lower() in letters:
            order.append(letters.index(p.lower()))
    x = x.transpose(order).reshape([sizes[p] for p in primal])
    # 2. permute to dst's primal order and split out dst's sub-axes
    d_primal = [t[0] for t in d_tok if t[0].isupper()]
    x = x.transpose([primal.index(p) for p in d_primal])
    subs = {t[0]: t[1] for t in d_tok if t[1]}
    split_shape, labels = [], []
    for p in d_primal:
        sub = subs.get(p.lower())
        split_shape.extend([sizes[p] // sub, sub] if sub else [sizes[p]])
        labels.extend([p, p.lower()] if sub else [p])
    x = x.reshape(split_shape)
    return np.ascontiguousarray(x.transpose([labels.index(t[0]) for t in d_tok]))


def _layout_transform_rel(types, attrs):
    check_arity(_OP, types, 1)
    data = tensor_arg(_OP, types, 0, "data")
    return TensorType(layout_shape(data.shape, attrs.src_layout, attrs.dst_layout), data.dtype)


register(OpDef(name=_OP, num_inputs=1, type_rel=_layout_transform_rel,
               pattern=OpPattern.INJECTIVE, reference=_layout_transform_ref,
               attrs={"src_layout": "", "dst_layout": ""},
               attrs_type_key="relay.attrs.LayoutTransformAttrs", exact_reference="values"))


def layout_transform(data, src_layout, dst_layout):
    """relay.layout_transform, e.g. NCHW -> NHWC or NCHW -> NCHW8c."""
    return make_call(_OP, [data], src_layout=src_layout, dst_layout=dst_layout)
