"""Newer ONNX ops composed from existing Relay ops: RMSNormalization, RotaryEmbedding, SwiGLU,
CumProd, CenterCropPad, Col2Im and Einsum (no op of their own in the registry)."""
from __future__ import annotations

import itertools

import numpy as np

from compiler.ir.expr import RelayExpr, Tuple

from . import dynamic_shapes
from .common import NodeContext, as_ints, cast, const, converter, norm_axis, op


def _slice(x: RelayExpr, axis: int, begin: int, end: int, step: int = 1) -> RelayExpr:
    return op("strided_slice", x, begin=[begin], end=[end], strides=[step], axes=[axis],
              slice_mode="end")


@converter("RMSNormalization", since=23)
def _rms_norm(ctx, inputs):
    x, scale = inputs[0], inputs[1]
    rank = ctx.rank(x)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), rank)
    if int(ctx.attr("stash_type", 1)) != 1:
        raise ctx.error("only stash_type=1 (float32 statistics) is supported")
    dtype = ctx.dtype(x)
    xf = cast(x, ctx, "float32") if dtype in ("float16",) else x
    mean_sq = op("mean", op("multiply", xf, xf), axis=list(range(axis, rank)), keepdims=True,
                 exclude=False)
    eps = const(float(ctx.attr("epsilon", 1e-5)), ctx.dtype(xf))
    inv = op("divide", const(1, ctx.dtype(xf)), op("sqrt", op("add", mean_sq, eps)))
    return cast(op("multiply", op("multiply", xf, inv), cast(scale, ctx, ctx.dtype(xf))),
                ctx, dtype)


@converter("RotaryEmbedding", since=23)
def _rotary(ctx, inputs):
    x, cos, sin = inputs[0], inputs[1], inputs[2]
    positions = inputs[3] if len(inputs) > 3 else None
    shape = ctx.shape(x)
    if len(shape) == 4:  # (B, H, S, D) -> (B, S, H, D)
        x = op("transpose", x, axes=[0, 2, 1, 3])
    elif len(shape) == 3:
        heads = int(ctx.attr("num_heads", 0))
        if heads <= 0 or shape[2] % heads:
            raise ctx.error(f"3-D input {shape} needs num_heads dividing {shape[2]}")
        x = ctx.reshape(x, [shape[0], shape[1], heads, shape[2] // heads])
    else:
        raise ctx.error(f"input must be rank 3 or 4, got {shape}")
    b, s, h, d = ctx.shape(x)
    rot = int(ctx.attr("rotary_embedding_dim", 0)) or d
    half = rot // 2
    if positions is not None:
        cos = op("take", cos, positions, axis=0, batch_dims=0, mode="clip")
        sin = op("take", sin, positions, axis=0, batch_dims=0, mode="clip")
    if ctx.shape(cos)[-1] != half or ctx.shape(sin)[-1] != half:
        raise ctx.error(f"cos/sin caches must end in rotary_embedding_dim/2 = {half}, got "
                        f"{ctx.shape(cos)} and {ctx.shape(sin)}")
    cos = ctx.reshape(cos, [b, s, 1, half])
    sin = ctx.reshape(sin, [b, s, 1, half])
    rotate = _slice(x, 3, 0, rot) if rot < d else x
    interleaved = bool(ctx.attr("interleaved", 0))
    if interleaved:
        x1, x2 = _slice(rotate, 3, 0, rot, 2), _slice(rotate, 3, 1, rot, 2)
    else:
        x1, x2 = _slice(rotate, 3, 0, half), _slice(rotate, 3, half, rot)
    real = op("subtract", op("multiply", cos, x1), op("multiply", sin, x2))
    imag = op("add", op("multiply", sin, x1), op("multiply", cos, x2))
    if interleaved:
        rotated = ctx.reshape(op("stack", Tuple([real, imag]), axis=4), [b, s, h, rot])
    else:
        rotated = op("concatenate", Tuple([real, imag]), axis=3)
    if rot < d:
        rotated = op("concatenate", Tuple([rotated, _slice(x, 3, rot, d)]), axis=3)
    if len(shape) == 3:
        return ctx.reshape(rotated, list(shape))
    return op("transpose", rotated, axes=[0, 2, 1, 3])


@converter("SwiGLU", since=28)
def _swiglu(ctx, inputs):
    a, b = inputs
    if ctx.shape(a) != ctx.shape(b) or ctx.dtype(a) != ctx.dtype(b):
        raise ctx.error(f"A and B must have the same shape and dtype (no broadcasting), got "
                        f"{ctx.shape(a)} {ctx.dtype(a)} and {ctx.shape(b)} {ctx.dtype(b)}")
    alpha = const(float(ctx.attr("alpha", 1.0)), ctx.dtype(a))
    gate = op("multiply", a, op("sigmoid", op("multiply", a, alpha)))
    return op("multiply", gate, b)


def _cumulative(ctx, inputs, name: str):
    """CumSum/CumProd; the axis may arrive at run time (a where over every axis, checked)."""
    x = inputs[0]
    rank = ctx.rank(x)
    reverse, exclusive = bool(ctx.attr("reverse", 0)), bool(ctx.attr("exclusive", 0))

    def build(axis: int):
        y = op("reverse", x, axis=axis) if reverse else x
        out = op(name, y, axis=axis, dtype=ctx.dtype(x), exclusive=exclusive)
        return op("reverse", out, axis=axis) if reverse else out
    given = ctx.maybe_value(inputs[1])
    if given is None:
        return dynamic_shapes.select_axis(
            ctx, dynamic_shapes.checked_axes(ctx, dynamic_shapes.scalar(ctx, inputs[1]), rank),
            rank, build)
    return build(norm_axis(ctx, as_ints(given)[0], rank))


@converter("CumSum", since=11)
def _cumsum(ctx, inputs):
    return _cumulative(ctx, inputs, "cumsum")


@converter("CumProd", since=26)
def _cumprod(ctx, inputs):
    return _cumulative(ctx, inputs, "cumprod")


@converter("CenterCropPad", since=18)
def _center_crop_pad(ctx, inputs):
    x = inputs[0]
    shape = list(ctx.shape(x))
    rank = len(shape)
    axes = [norm_axis(ctx, a, rank) for a in ctx.attr("axes", list(range(rank)))]
    if ctx.maybe_value(inputs[1]) is None:
        return dynamic_shapes.center_crop_pad(ctx, x, inputs[1], axes)
    target = as_ints(ctx.value(inputs[1], "shape"))
    if len(axes) != len(target):
        raise ctx.error(f"shape has {len(target)} values for {len(axes)} axes")
    pads = [[0, 0] for _ in range(rank)]
    for axis, size in zip(axes, target):
        dim = shape[axis]
        if size < dim:  # crop: the extra element of an odd difference comes off the end
            start = (dim - size) // 2
            x = _slice(x, axis, start, start + size)
        elif size > dim:  # pad: likewise the extra element goes at the end
            pads[axis] = [(size - dim) // 2, size - dim - (size - dim) // 2]
    if any(p != [0, 0] for p in pads):
        x = op("nn.pad", x, const(0, ctx.dtype(x)), pad_width=pads, pad_mode="constant")
    return x


@converter("Col2Im", since=18)
def _col2im(ctx, inputs):
    data = inputs[0]
    image = as_ints(ctx.value(inputs[1], "image_shape"))
    block = as_ints(ctx.value(inputs[2], "block_shape"))
    n_sp = len(image)
    dil = list(ctx.attr("dilations", [1] * n_sp))
    pads = list(ctx.attr("pads", [0] * 2 * n_sp))
    strides = list(ctx.attr("strides", [1] * n_sp))
    n, ck, length = ctx.shape(data)
    bl = int(np.prod(block))
    if ck % bl:
        raise ctx.error(f"input dim 1 ({ck}) is not a multiple of the block size {bl}")
    padded = [image[i] + pads[i] + pads[i + n_sp] for i in range(n_sp)]
    grid = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(n_sp)]
    if int(np.prod(grid)) != length:
        raise ctx.error(f"input dim 2 ({length}) does not match the {grid} block positions "
                        f"of image {image}")
    c = ck // bl
    x = ctx.reshape(data, [n, c, *block, *grid])
    base = 2 + n_sp
    for i, s in enumerate(strides):  # spread each grid axis out to stride s (zeros between)
        if s == 1:
            continue
        cur = ctx.shape(x)
        axis = base + i
        col = ctx.reshape(x, cur[:axis + 1] + (1,) + cur[axis + 1:])
        zeros = const(np.zeros(cur[:axis + 1] + (s - 1,) + cur[axis + 1:]), ctx.dtype(x))
        wide = op("concatenate", Tuple([col, zeros]), axis=axis + 1)
        spread = ctx.reshape(wide, list(cur[:axis]) + [cur[axis] * s] + list(cur[axis + 1:]))
        x = _slice(spread, axis, 0, (grid[i] - 1) * s + 1)
    span = [(g - 1) * s + 1 for g, s in zip(grid, strides)]
    total = None
    for offset in itertools.product(*[range(b) for b in block]):
        part = x
        for i, k in enumerate(offset):  # pick block element k on each block axis
            part = _slice(part, 2 + i, k, k + 1)
        part = ctx.reshape(part, [n, c, *span])
        width = [[0, 0], [0, 0]] + [[k * dil[i], padded[i] - k * dil[i] - span[i]]
                                    for i, k in enumerate(offset)]
        part = op("nn.pad", part, const(0, ctx.dtype(data)), pad_width=width,
                  pad_mode="constant")
        total = part if total is None else op("add", total, part)
    return op("strided_slice", total, begin=pads[:n_sp],
              end=[pads[i] + image[i] for i in range(n_sp)], strides=[1] * n_sp,
              axes=list(range(2, 2 + n_sp)), slice_mode="end")


# --- Einsum ----------------------------------------------------------------------------------


def _einsum_terms(ctx: NodeContext, equation: str, ranks: list) -> tuple[list, str]:
    """Input terms and output term with '...' replaced by upper-case letters of its rank."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.error(f"equation {equation!r} has {len(terms)} operands, got {len(ranks)}")
    ell = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            ell = max(ell, rank - (len(term) - 3))
    fill = "".join(chr(ord("A") + i) for i in range(ell))
    terms = [t.replace("...", fill[len(fill) - (r - (len(t) - 3)):]) if "..." in t else t
             for t, r in zip(terms, ranks)]
    for term, rank in zip(terms, ranks):
        if len(term) != rank:
            raise ctx.error(f"einsum term {term!r} does not match an operand of rank {rank}")
    if not arrow:  # implicit output: ellipsis letters, then letters used once, sorted
        counts = {ch: "".join(terms).count(ch) for ch in "".join(terms)}
        out = fill + "".join(sorted(ch for ch, k in counts.items() if k == 1 and ch not in fill))
    return terms, out.replace("...", fill)


def _einsum_diagonal(ctx: NodeContext, x: RelayExpr, term: str) -> tuple[RelayExpr, str]:
    """Repeated letters in one term take the diagonal (an eye mask and a sum, gather-free)."""
    while len(set(term)) != len(term):
        ch = next(c for c in term if term.count(c) > 1)
        i = term.index(ch)
        j = term.index(ch, i + 1)
        shape = ctx.shape(x)
        eye_shape = [1] * len(shape)
        eye_shape[i], eye_shape[j] = shape[i], shape[j]
        eye = const(np.eye(shape[i], shape[j]).reshape(eye_shape), ctx.dtype(x))
        x = op("sum", op("multiply", x, eye), axis=[j], keepdims=False, exclude=False)
        term = term[:j] + term[j + 1:]
    return x, term


def _einsum_pair(ctx: NodeContext, a: RelayExpr, ta: str, b: RelayExpr, tb: str,
                 keep: str) -> tuple[RelayExpr, str]:
    """Contract two operands as one batch_matmul: (batch, left, sum) x (batch, right, sum)."""
    size = dict(zip(ta, ctx.shape(a)))
    size.update({ch: max(size.get(ch, 1), d) for ch, d in zip(tb, ctx.shape(b))})
    batch = [ch for ch in ta if ch in tb and ch in keep]
    contract = [ch for ch in ta if ch in tb and ch not in keep]
    left = [ch for ch in ta if ch not in tb]
    right = [ch for ch in tb if ch not in ta]

    def arrange(x, term, order):
        x = op("transpose", x, axes=[term.index(ch) for ch in order])
        target = [size[ch] for ch in order]
        if list(ctx.shape(x)) != target:  # ellipsis dims of size 1 broadcast
            x = op("broadcast_to", x, shape=target)
        return x

    nb, nl, nr, nc = (int(np.prod([size[ch] for ch in g])) for g in
                      (batch, left, right, contract))
    a3 = ctx.reshape(arrange(a, ta, batch + left + contract), [nb, nl, nc])
    b3 = ctx.reshape(arrange(b, tb, batch + right + contract), [nb, nr, nc])
    out = op("nn.batch_matmul", a3, b3, out_dtype="", transpose_a=False, transpose_b=True)
    term = "".join(batch + left + right)
    return ctx.reshape(out, [size[ch] for ch in term]), term


def _einsum_reduce(x: RelayExpr, term: str, keep: str) -> tuple[RelayExpr, str]:
    gone = [i for i, ch in enumerate(term) if ch not in keep]
    if not gone:
        return x, term
    x = op("sum", x, axis=gone, keepdims=False, exclude=False)
    return x, "".join(ch for ch in term if ch in keep)


def einsum_expr(ctx: NodeContext, equation: str, operands: list) -> RelayExpr:
    """Einsum as diagonals, sums, pairwise batch_matmuls and a final transpose."""
    terms, out = _einsum_terms(ctx, equation, [ctx.rank(x) for x in operands])
    items = [_einsum_diagonal(ctx, x, t) for x, t in zip(operands, terms)]
    for i, (x, t) in enumerate(items):  # letters no one else needs are summed out early
        others = out + "".join(tt for j, (_, tt) in enumerate(items) if j != i)
        items[i] = _einsum_reduce(x, t, others)
    x, term = items[0]
    for i in range(1, len(items)):
        keep = out + "".join(t for _, t in items[i + 1:])
        x, term = _einsum_pair(ctx, x, term, items[i][0], items[i][1], keep)
    x, term = _einsum_reduce(x, term, out)
    if term != out:
        x = op("transpose", x, axes=[term.index(ch) for ch in out])
    return x


@converter("Einsum", since=12)
def _einsum(ctx: NodeContext, inputs):
    return einsum_expr(ctx, str(ctx.attr("equation")), list(inputs))


@converter("CausalConvWithState", since=27)
def _causal_conv_with_state(ctx, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    past = inputs[3] if len(inputs) > 3 else None
    act = ctx.attr("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise ctx.error(f"activation must be none, silu or swish, got {act!r}")
    batch, channels, length = ctx.shape(x)
    if ctx.rank(w) != 3 or tuple(ctx.shape(w)[:2]) != (channels, 1):
        raise ctx.error(f"weight must be ({channels}, 1, k), got {ctx.shape(w)}")
    k = ctx.shape(w)[2]
    dtype = ctx.dtype(x)
    if past is None:
        past = const(np.zeros((batch, channels, k - 1)), dtype)
    padded = op("concatenate", Tuple([past, x]), axis=2) if k > 1 else x
    wide_dtype = "float32" if dtype == "float16" else dtype  # accumulate as the reference
    src, w = cast(padded, ctx, wide_dtype), cast(w, ctx, wide_dtype)
    out = None  # depthwise causal conv: a sum of k shifted, per-channel-scaled slices
    for j in range(k):
        tap = ctx.reshape(_slice(w, 2, j, j + 1), [channels, 1])
        term = op("multiply", _slice(src, 2, j, j + length), tap)
        out = term if out is None else op("add", out, term)
    if bias is not None:
        out = op("add", out, ctx.reshape(cast(bias, ctx, wide_dtype), [channels, 1]))
    out = cast(out, ctx, dtype)
    if act != "none":
        wide = cast(out, ctx, "float32")
        out = cast(op("multiply", wide, op("sigmoid", wide)), ctx, dtype)
    state = _slice(padded, 2, length, length + k - 1)
    return [out, state]
