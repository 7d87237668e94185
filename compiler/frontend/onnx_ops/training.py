"""ai.onnx.preview.training optimizer steps: Adagrad, Adam, Momentum (standard, Nesterov).

Each is one elementwise update per optimized tensor, written as ONNX's reference writes it
(onnx/reference/ops/aionnx_preview_training): R (learning rate) and T (step count) are
run-time scalars shared by every tensor; several tensors X1..Xn come with their gradients and
state in groups (X1..Xn, G1..Gn, then each state's n tensors), and the outputs are the new Xs
then each new state's tensors. The step count's branches (bias correction, the first step's
beta) are `where` on T > 0, so T need not be known at import.
"""
from __future__ import annotations

from .common import const, converter, op

TRAINING_DOMAIN = "ai.onnx.preview.training"


def _groups(ctx, inputs, states: int) -> list:
    """[(x, g, state...)] per optimized tensor."""
    rest = inputs[2:]
    if len(rest) % (2 + states):
        raise ctx.error(f"expected R, T and {2 + states} groups of equally many tensors, got "
                        f"{len(inputs)} inputs")
    n = len(rest) // (2 + states)
    return [tuple(rest[k * n + i] for k in range(2 + states)) for i in range(n)]


def _scalars(ctx, inputs, dtype: str):
    """R and T as scalars of the tensors' dtype, and T > 0."""
    r, t = inputs[0], inputs[1]
    r = op("reshape", op("cast", r, dtype=dtype), newshape=[])
    t = op("reshape", t, newshape=[])
    positive = op("greater", t, const(0, ctx.dtype(inputs[1])))
    return r, op("cast", t, dtype=dtype), positive


def _k(value, dtype):
    return const(float(value), dtype)


def _regularized(x, g, ctx, dtype):
    return op("add", op("multiply", _k(ctx.attr("norm_coefficient", 0.0), dtype), x), g)


@converter("Adagrad", since=1, domain=TRAINING_DOMAIN)
def _adagrad(ctx, inputs):
    xs, hs = [], []
    for x, g, h in _groups(ctx, inputs, 1):
        dtype = ctx.dtype(x)
        r, t, _ = _scalars(ctx, inputs, dtype)
        rate = op("divide", r, op("add", _k(1, dtype),
                                  op("multiply", t, _k(ctx.attr("decay_factor", 0.0), dtype))))
        reg = _regularized(x, g, ctx, dtype)
        h_new = op("add", h, op("multiply", reg, reg))
        scale = op("add", op("sqrt", h_new), _k(ctx.attr("epsilon", 0.0), dtype))
        xs.append(op("subtract", x, op("divide", op("multiply", rate, reg), scale)))
        hs.append(h_new)
    return xs + hs


@converter("Adam", since=1, domain=TRAINING_DOMAIN)
def _adam(ctx, inputs):
    alpha, beta = float(ctx.attr("alpha", 0.9)), float(ctx.attr("beta", 0.999))
    xs, vs, hs = [], [], []
    for x, g, v, h in _groups(ctx, inputs, 2):
        dtype = ctx.dtype(x)
        r, t, positive = _scalars(ctx, inputs, dtype)
        reg = _regularized(x, g, ctx, dtype)
        v_new = op("add", op("multiply", _k(alpha, dtype), v),
                   op("multiply", _k(1 - alpha, dtype), reg))
        h_new = op("add", op("multiply", _k(beta, dtype), h),
                   op("multiply", _k(1 - beta, dtype), op("multiply", reg, reg)))
        h_sqrt = op("add", op("sqrt", h_new), _k(ctx.attr("epsilon", 0.0), dtype))
        one = _k(1, dtype)
        corrected = op("divide", op("multiply", r, op("sqrt", op(
            "subtract", one, op("power", _k(beta, dtype), t)))),
            op("subtract", one, op("power", _k(alpha, dtype), t)))
        rate = op("where", positive, corrected, r)
        x_new = op("subtract", x, op("multiply", rate, op("divide", v_new, h_sqrt)))
        post = _k(1 - float(ctx.attr("norm_coefficient_post", 0.0)), dtype)
        xs.append(op("multiply", post, x_new))
        vs.append(v_new)
        hs.append(h_new)
    return xs + vs + hs


@converter("Momentum", since=1, domain=TRAINING_DOMAIN)
def _momentum(ctx, inputs):
    mode = ctx.attr("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise ctx.error(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    alpha, beta = float(ctx.attr("alpha")), float(ctx.attr("beta"))
    xs, vs = [], []
    for x, g, v in _groups(ctx, inputs, 1):
        dtype = ctx.dtype(x)
        r, _, positive = _scalars(ctx, inputs, dtype)
        reg = _regularized(x, g, ctx, dtype)
        beta_now = op("where", positive, _k(beta, dtype), _k(1, dtype))
        v_new = op("add", op("multiply", _k(alpha, dtype), v), op("multiply", beta_now, reg))
        step = v_new if mode == "standard" else \
            op("add", reg, op("multiply", _k(alpha, dtype), v_new))
        xs.append(op("subtract", x, op("multiply", r, step)))
        vs.append(v_new)
    return xs + vs
