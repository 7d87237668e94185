"""ai.onnx.preview FlexAttention (opset 1), with its score_mod/prob_mod subgraphs.

Built from the Attention converter's pieces (attention._bmm), step for step as
onnx/reference/ops/aionnx_preview/op_flex_attention.py: Q and K pre-scaled by sqrt(scale)
(computed in float32, rounded to the input dtype), grouped-query heads repeated, scores cast to
the softmax dtype (softmax_precision, else float32 for inputs narrower than 4 bytes), softmax
over keys, then probs @ V in that dtype, cast back to V's dtype. score_mod (on the scores,
before the softmax) and prob_mod (on the probabilities, after it) are subgraphs of one
tensor input, converted over the whole (batch, heads, queries, keys) tensor and their result
cast to the softmax dtype.
"""
from __future__ import annotations

import numpy as np

from .attention import _bmm
from .common import cast, const, converter, onnx_dtype, op

PREVIEW_DOMAIN = "ai.onnx.preview"


def _softmax_dtype(ctx, dtype: str) -> str:
    precision = ctx.attr("softmax_precision")
    if precision is not None:
        return onnx_dtype(int(precision), ctx.where)
    return "float32" if np.dtype(dtype).itemsize < 4 else dtype


def _modified(ctx, name: str, value, dtype: str):
    """value through the subgraph attribute `name` (unchanged when there is none)."""
    attr = ctx.attr(name)
    if attr is None:
        return value
    outs = ctx.graph.subgraph(attr.g, [value], f"{ctx.where} {name}")
    if len(outs) != 1:
        raise ctx.error(f"the {name} subgraph must have one output, got {len(outs)}")
    return cast(outs[0], ctx, dtype)


@converter("FlexAttention", since=1, domain=PREVIEW_DOMAIN)
def _flex_attention(ctx, inputs):
    q, k, v = inputs[:3]
    if ctx.rank(q) != 4 or ctx.rank(k) != 4 or ctx.rank(v) != 4:
        raise ctx.error(f"Q, K and V must be rank 4, got {ctx.shape(q)}, {ctx.shape(k)}, "
                        f"{ctx.shape(v)}")
    (_, q_heads, _, head), (_, kv_heads, kv_len, k_head) = ctx.shape(q), ctx.shape(k)
    _, v_heads, v_len, _ = ctx.shape(v)
    if v_heads != kv_heads or v_len != kv_len or k_head != head:
        raise ctx.error(f"K {ctx.shape(k)} and V {ctx.shape(v)} must share heads and length, "
                        f"and K the head size of Q {ctx.shape(q)}")
    if q_heads != kv_heads:
        if q_heads % kv_heads:
            raise ctx.error(f"{q_heads} query heads cannot share {kv_heads} key/value heads")
        k = op("repeat", k, repeats=q_heads // kv_heads, axis=1)
        v = op("repeat", v, repeats=q_heads // kv_heads, axis=1)
    dtype = ctx.dtype(q)
    scale = ctx.attr("scale")
    scale = 1.0 / np.sqrt(head) if scale is None else float(scale)
    root = const(np.sqrt(np.float32(scale)).astype(dtype), dtype)
    scores = _bmm(ctx, op("multiply", q, root), op("multiply", k, root), transpose_b=True)
    soft = _softmax_dtype(ctx, dtype)
    scores = _modified(ctx, "score_mod", cast(scores, ctx, soft), soft)
    probs = _modified(ctx, "prob_mod", op("nn.softmax", scores, axis=-1), soft)
    out = _bmm(ctx, probs, cast(v, ctx, soft), transpose_b=False)
    return cast(out, ctx, ctx.dtype(v))
