"""Attention (opsets 23-25) composed from batch_matmul, softmax and static/dynamic bias masks.

The composition follows onnx/reference/ops/op_attention.py step for step, so rounding (the
square-root scale applied to both Q and K), the additive -inf bias and the fully-masked-row
guard (rows whose bias is all -inf give zeros, never NaN) match the reference. Every shape is
static; only mask values and `nonpad_kv_seqlen` may be runtime inputs.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.ir.expr import RelayExpr, Tuple

from .common import NodeContext, cast, const, converter, onnx_dtype, op

_NEG_INF = float("-inf")


def _to_heads(ctx: NodeContext, x: RelayExpr, heads: int, what: str) -> RelayExpr:
    """(B, S, H*D) -> (B, H, S, D), the layout of 4-D Attention inputs."""
    b, s, hidden = ctx.shape(x)
    if hidden % heads:
        raise ctx.error(f"{what} hidden size {hidden} is not divisible by {heads} heads")
    return op("transpose", ctx.reshape(x, [b, s, heads, hidden // heads]), axes=[0, 2, 1, 3])


def _bmm(ctx: NodeContext, a: RelayExpr, b: RelayExpr, transpose_b: bool) -> RelayExpr:
    """A 4-D matmul (B, H, M, K) x (B, H, K, N) through a 3-D nn.batch_matmul."""
    sa, sb = ctx.shape(a), ctx.shape(b)
    n = sb[2] if transpose_b else sb[3]
    out = op("nn.batch_matmul", ctx.reshape(a, [sa[0] * sa[1], sa[2], sa[3]]),
             ctx.reshape(b, [sb[0] * sb[1], sb[2], sb[3]]), out_dtype="", transpose_a=False,
             transpose_b=transpose_b)
    return ctx.reshape(out, [sa[0], sa[1], sa[2], n])


def _additive(ctx: NodeContext, allowed: RelayExpr, dtype: str) -> RelayExpr:
    """A boolean mask as an additive bias: True -> 0, False -> -inf (select, not multiply)."""
    return op("where", allowed, const(0, dtype), const(_NEG_INF, dtype))


def _frontier(ctx: NodeContext, q_len: int, kv_len: int, static_offset: int | None,
              nonpad: RelayExpr | None) -> RelayExpr:
    """i - j + offset per (query, key): (q, kv) for a static offset, (B, 1, q, kv) per batch."""
    rel = np.arange(q_len).reshape(-1, 1) - np.arange(kv_len).reshape(1, -1)
    if nonpad is None:
        return const(rel + int(static_offset or 0), "int64")
    batch = ctx.shape(nonpad)[0]
    offset = op("subtract", cast(nonpad, ctx, "int64"), const(q_len, "int64"))
    return op("add", const(rel, "int64"), ctx.reshape(offset, [batch, 1, 1, 1]))


def _bias(ctx: NodeContext, mask: RelayExpr | None, nonpad: RelayExpr | None, q_len: int,
          kv_len: int, past_len: int | None, dtype: str) -> RelayExpr:
    """The additive attention bias (mask, causal, sliding window, padding) as the reference."""
    zeros = const(np.zeros((q_len, kv_len)), dtype)
    if mask is not None:
        mshape = ctx.shape(mask)
        if mshape[-1] < kv_len:  # a short mask is padded with -inf / False up to kv_len
            is_bool = ctx.dtype(mask) == "bool"
            fill = np.full(tuple(mshape[:-1]) + (kv_len - mshape[-1],),
                           False if is_bool else _NEG_INF)
            mask = op("concatenate", Tuple([mask, const(fill, ctx.dtype(mask))]),
                      axis=len(mshape) - 1)
        if ctx.dtype(mask) == "bool":
            mask = _additive(ctx, mask, dtype)
        else:
            mask = cast(mask, ctx, dtype)
    left = int(ctx.attr("left_window_size", -1))
    right = int(ctx.attr("right_window_size", -1))
    windowed = left >= 0 or right >= 0
    ext_cache = nonpad is not None and past_len is None
    frontier = None
    if ctx.attr("is_causal", 0) or windowed:
        frontier = _frontier(ctx, q_len, kv_len, past_len, nonpad if ext_cache else None)
    if ctx.attr("is_causal", 0):
        base = zeros if mask is None else mask
        if windowed:
            base = op("add", zeros, base)
        # key j is allowed when j <= i + offset, i.e. i - j + offset >= 0
        bias = op("add", base, _additive(ctx, op("greater_equal", frontier,
                                                 const(0, "int64")), dtype))
    elif mask is not None:
        bias = op("add", zeros, mask)
    else:
        bias = zeros
    if windowed:
        bias = op("add", zeros, bias)
        allowed = None
        if left >= 0:
            allowed = op("less_equal", frontier, const(left, "int64"))
        if right >= 0:
            upper = op("less_equal", op("negative", frontier), const(right, "int64"))
            allowed = upper if allowed is None else op("logical_and", allowed, upper)
        bias = op("add", bias, _additive(ctx, allowed, dtype))
    if nonpad is not None:
        batch = ctx.shape(nonpad)[0]
        keys = const(np.arange(kv_len).reshape(1, kv_len), "int64")
        valid = op("less", keys, ctx.reshape(cast(nonpad, ctx, "int64"), [batch, 1]))
        bias = op("add", bias, ctx.reshape(_additive(ctx, valid, dtype), [batch, 1, 1, kv_len]))
    return bias


def _softcap(ctx: NodeContext, x: RelayExpr, dtype: str) -> RelayExpr:
    cap = ctx.attr("softcap")
    if cap is None or float(cap) <= 0:
        return x
    cap_c = const(float(cap), dtype)
    return op("multiply", op("tanh", op("divide", x, cap_c)), cap_c)


def _guarded_softmax(ctx: NodeContext, logits: RelayExpr, bias: RelayExpr,
                     static_bias: np.ndarray | None) -> RelayExpr:
    """softmax over keys; rows whose bias is entirely -inf become 0 (as the reference)."""
    probs = op("nn.softmax", logits, axis=-1)
    if static_bias is not None and not np.isneginf(static_bias).all(axis=-1).any():
        return probs
    dtype = ctx.dtype(probs)
    bias_max = op("max", bias, axis=[-1], keepdims=True, exclude=False)
    masked = op("equal", cast(bias_max, ctx, dtype), const(_NEG_INF, dtype))
    return op("where", masked, const(0, dtype), probs)


def _optional(inputs: list, index: int) -> RelayExpr | None:
    return inputs[index] if len(inputs) > index else None


@converter("Attention", since=23)
def _attention(ctx, inputs):
    q, k, v = inputs[:3]
    mask, past_k, past_v, nonpad = (_optional(inputs, i) for i in (3, 4, 5, 6))
    if (past_k is None) != (past_v is None):
        raise ctx.error("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    rank = ctx.rank(q)
    if rank not in (3, 4) or ctx.rank(k) != rank or ctx.rank(v) != rank:
        raise ctx.error(f"Q, K and V must all be rank 3 or all rank 4, got "
                        f"{ctx.shape(q)}, {ctx.shape(k)}, {ctx.shape(v)}")
    dtype = ctx.dtype(q)
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if rank == 3:
        if q_heads is None or kv_heads is None:
            raise ctx.error("3-D inputs need the q_num_heads and kv_num_heads attributes")
        q = _to_heads(ctx, q, int(q_heads), "Q")
        k = _to_heads(ctx, k, int(kv_heads), "K")
        v = _to_heads(ctx, v, int(kv_heads), "V")
    batch, q_heads, q_len, head = ctx.shape(q)
    scale = ctx.attr("scale")
    scale = 1 / math.sqrt(head) if scale is None else float(scale)
    # float16 runs in float32 inside (cast back at the end): the reference's float16 numpy
    # rounds differently at every step, and float32 is closer to both it and the exact result
    work = "float32" if dtype == "float16" else dtype
    root = const(np.sqrt(np.float64(scale)).astype(dtype), work)
    if past_k is not None:
        k = op("concatenate", Tuple([past_k, k]), axis=2)
        v = op("concatenate", Tuple([past_v, v]), axis=2)
    present_k, present_v = k, v
    q, k, v = (cast(x, ctx, work) for x in (q, k, v))
    kv_len, k_heads = ctx.shape(k)[2], ctx.shape(k)[1]
    past_len = ctx.shape(past_k)[2] if past_k is not None else None
    bias = _bias(ctx, mask, nonpad, q_len, kv_len, past_len, work)
    if q_heads != k_heads:
        if q_heads % k_heads or ctx.shape(v)[1] != k_heads:
            raise ctx.error(f"{q_heads} query heads cannot share {k_heads} key/value heads")
        reps = q_heads // k_heads
        k = op("repeat", k, repeats=reps, axis=1)
        v = op("repeat", v, repeats=reps, axis=1)
    qk = _bmm(ctx, op("multiply", q, root), op("multiply", k, root), transpose_b=True)
    qk = _softcap(ctx, qk, work)
    static_bias = ctx.maybe_value(bias)
    if static_bias is not None:
        bias = const(static_bias, work)
    with_bias = qk if static_bias is not None and not static_bias.any() else op("add", qk, bias)
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    logits = with_bias
    precision = ctx.attr("softmax_precision")
    if precision is not None:
        logits = cast(logits, ctx, onnx_dtype(int(precision), ctx.where))
    probs = _guarded_softmax(ctx, logits, bias, static_bias)
    qk_out = {0: qk, 1: qk, 2: with_bias, 3: probs}.get(mode)
    if qk_out is None:
        raise ctx.error(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {mode}")
    out = _bmm(ctx, cast(probs, ctx, work), v, transpose_b=False)
    if rank == 3:
        b, h, s, d = ctx.shape(out)
        out = ctx.reshape(op("transpose", out, axes=[0, 2, 1, 3]), [b, s, h * d])
    return [cast(out, ctx, dtype), present_k, present_v, cast(qk_out, ctx, dtype)]


# --- LinearAttention (opset 27): the recurrence unrolled over the static sequence length ------


def _step(ctx: NodeContext, x4: RelayExpr, t: int) -> RelayExpr:
    """Time step t of a (B, H, T, D) tensor as (B, H, D)."""
    b, h, _, d = ctx.shape(x4)
    part = op("strided_slice", x4, begin=[t], end=[t + 1], strides=[1], axes=[2],
              slice_mode="end")
    return ctx.reshape(part, [b, h, d])


def _per_head(ctx: NodeContext, x: RelayExpr, heads: int) -> RelayExpr:
    """(B, T, H*D) -> (B, H, T, D) in float32, the precision the recurrence runs in."""
    return cast(_to_heads(ctx, x, heads, "input"), ctx, "float32")


@converter("LinearAttention", since=27)
def _linear_attention(ctx, inputs):
    q, k, v = inputs[:3]
    past, decay, beta = (_optional(inputs, i) for i in (3, 4, 5))
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.error(f"update_rule must be linear, gated, delta or gated_delta, got {rule!r}")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise ctx.error(f"update_rule {rule!r} needs decay {'given' if gating else 'absent'} "
                        f"and beta {'given' if delta else 'absent'}")
    hq, hkv = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if hq is None or hkv is None or hq <= 0 or hkv <= 0 or hq % hkv:
        raise ctx.error(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads "
                        f"({hkv})")
    out_dtype = ctx.dtype(q)
    b, steps, _ = ctx.shape(q)
    q4, k4, v4 = _per_head(ctx, q, hq), _per_head(ctx, k, hkv), _per_head(ctx, v, hkv)
    dk, dv = ctx.shape(q4)[3], ctx.shape(v4)[3]
    if decay is not None:
        last = ctx.shape(decay)[-1]
        if last == hkv:
            decay = ctx.reshape(decay, [b, steps, hkv, 1])
            decay = cast(op("transpose", decay, axes=[0, 2, 1, 3]), ctx, "float32")
        else:
            decay = _per_head(ctx, decay, hkv)
    if beta is not None:
        last = ctx.shape(beta)[-1]
        beta = op("transpose", ctx.reshape(beta, [b, steps, last, 1]), axes=[0, 2, 1, 3])
        beta = cast(beta, ctx, "float32")
    if past is not None:
        state = cast(past, ctx, "float32")
        state_dtype = ctx.dtype(past)
    else:
        state = const(np.zeros((b, hkv, dk, dv)), "float32")
        state_dtype = out_dtype
    scale = ctx.attr("scale")
    scale = 1 / math.sqrt(dk) if not scale else float(scale)
    outs = []
    for t in range(steps):
        k_t, v_t = _step(ctx, k4, t), _step(ctx, v4, t)
        k_col = ctx.reshape(k_t, [b, hkv, dk, 1])
        if decay is not None:
            g = _step(ctx, decay, t)
            state = op("multiply", state, ctx.reshape(op("exp", g), [*ctx.shape(g), 1]))
        if beta is not None:
            retrieved = op("sum", op("multiply", state, k_col), axis=[2], keepdims=False,
                           exclude=False)
            v_t = op("multiply", _step(ctx, beta, t), op("subtract", v_t, retrieved))
        state = op("add", state, op("multiply", k_col, ctx.reshape(v_t, [b, hkv, 1, dv])))
        read = state if hq == hkv else op("repeat", state, repeats=hq // hkv, axis=1)
        q_col = ctx.reshape(_step(ctx, q4, t), [b, hq, dk, 1])
        out_t = op("sum", op("multiply", q_col, read), axis=[2], keepdims=False, exclude=False)
        outs.append(op("multiply", const(scale, "float32"), out_t))
    out = op("stack", Tuple(outs), axis=1)  # (B, T, Hq, dv)
    out = cast(ctx.reshape(out, [b, steps, hq * dv]), ctx, out_dtype)
    return [out, cast(state, ctx, state_dtype)]
