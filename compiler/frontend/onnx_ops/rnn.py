"""RNN, GRU and LSTM: the time loop is unrolled statically into dense/split/activation ops.

The input projection of all time steps is one dense call per direction; each step then adds
the recurrent projection of the previous state and splits the gates. Constant sequence_lens
shorter than the sequence become masks: a batch entry past its length keeps its state and
emits zeros, which also gives the right start for the reverse direction.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from compiler.ir.expr import Tuple, TupleGetItem

from .common import NodeContext, const, converter, op, reshape

# name -> (builder(x, alpha, beta, dtype), default alpha, default beta); None = not used
_ACTIVATIONS: dict[str, tuple[Callable, float | None, float | None]] = {}


def _activation(name: str, alpha: float | None = None, beta: float | None = None):
    def decorate(fn: Callable) -> Callable:
        _ACTIVATIONS[name] = (fn, alpha, beta)
        return fn
    return decorate


_activation("relu")(lambda x, a, b, t: op("nn.relu", x))
_activation("tanh")(lambda x, a, b, t: op("tanh", x))
_activation("sigmoid")(lambda x, a, b, t: op("sigmoid", x))
_activation("leakyrelu", 0.01)(lambda x, a, b, t: op("nn.leaky_relu", x, alpha=a))
_activation("softsign")(lambda x, a, b, t: op(
    "divide", x, op("add", const(1.0, t), op("abs", x))))
_activation("softplus")(lambda x, a, b, t: op(
    "log", op("add", const(1.0, t), op("exp", x))))
_activation("affine", 1.0, 0.0)(lambda x, a, b, t: op(
    "add", op("multiply", x, const(a, t)), const(b, t)))
_activation("scaledtanh", 1.0, 1.0)(lambda x, a, b, t: op(
    "multiply", const(a, t), op("tanh", op("multiply", x, const(b, t)))))
_activation("hardsigmoid", 0.2, 0.5)(lambda x, a, b, t: op(
    "clip", op("add", op("multiply", x, const(a, t)), const(b, t)), a_min=0.0, a_max=1.0))
_activation("thresholdedrelu", 1.0)(lambda x, a, b, t: op(
    "where", op("greater", x, const(a, t)), x, const(0.0, t)))
_activation("elu", 1.0)(lambda x, a, b, t: op(
    "where", op("less", x, const(0.0, t)),
    op("multiply", const(a, t), op("subtract", op("exp", x), const(1.0, t))), x))


def _activations(ctx: NodeContext, defaults: list, num_dirs: int) -> list:
    """Per direction, the activation functions (alpha/beta lists are consumed in order)."""
    names = ctx.attr("activations")
    names = list(names) if names else defaults * num_dirs
    if len(names) != len(defaults) * num_dirs:
        raise ctx.error(f"activations must list {len(defaults)} function(s) per direction "
                        f"({num_dirs}), got {names}")
    alphas = iter(ctx.attr("activation_alpha", []) or [])
    betas = iter(ctx.attr("activation_beta", []) or [])
    out = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise ctx.error(f"activation {name!r} is not supported; supported: "
                            f"{sorted(_ACTIVATIONS)}")
        fn, alpha, beta = _ACTIVATIONS[key]
        a = float(next(alphas, alpha)) if alpha is not None else None
        b = float(next(betas, beta)) if beta is not None else None
        out.append(lambda x, dtype, fn=fn, a=a, b=b: fn(x, a, b, dtype))
    return [out[d * len(defaults):(d + 1) * len(defaults)] for d in range(num_dirs)]


def _slice(x, axis: int, begin: int, end: int):
    return op("strided_slice", x, begin=[begin], end=[end], strides=[1], axes=[axis],
              slice_mode="end")


def _pick(x, index: int, shape: tuple):
    """x[index] along axis 0 with that axis dropped."""
    return reshape(_slice(x, 0, index, index + 1), list(shape[1:]))


def _split(x, sections: int, axis: int) -> list:
    if sections == 1:
        return [x]
    parts = op("split", x, indices_or_sections=sections, axis=axis)
    return [TupleGetItem(parts, i) for i in range(sections)]


class _Cell:
    """What one direction needs at every step: weights, activations, clip and dtype."""

    def __init__(self, ctx: NodeContext, kind: str, acts: list, dtype: str, hidden: int):
        self.ctx, self.kind, self.acts, self.dtype, self.hidden = ctx, kind, acts, dtype, hidden
        clip = ctx.attr("clip")
        self.clip = None if clip is None else float(clip)
        self.linear_before_reset = int(ctx.attr("linear_before_reset", 0))
        self.input_forget = int(ctx.attr("input_forget", 0))

    def act(self, i: int, x):
        if self.clip is not None:
            x = op("clip", x, a_min=-self.clip, a_max=self.clip)
        return self.acts[i](x, self.dtype)

    def step(self, xw, h, c, r, rb, p):
        """(new h, new c) from the input projection xw [B, G*H] and the previous state."""
        dtype = self.dtype
        if self.kind == "RNN":
            rh = op("nn.dense", h, r, units=None, out_dtype="")
            return self.act(0, op("add", op("add", xw, rh), rb) if rb is not None else
                            op("add", xw, rh)), None
        if self.kind == "GRU":
            return self._gru(xw, h, r, rb), None
        gates = op("add", xw, op("nn.dense", h, r, units=None, out_dtype=""))
        if rb is not None:
            gates = op("add", gates, rb)
        i, o, f, g = _split(gates, 4, 1)
        if p is not None:
            i = op("add", i, op("multiply", p[0], c))
            f = op("add", f, op("multiply", p[2], c))
        it = self.act(0, i)
        ft = op("subtract", const(1.0, dtype), it) if self.input_forget else self.act(0, f)
        ct = op("add", op("multiply", ft, c), op("multiply", it, self.act(1, g)))
        if p is not None:
            o = op("add", o, op("multiply", p[1], ct))
        return op("multiply", self.act(0, o), self.acts[2](ct, dtype)), ct

    def _gru(self, xw, h, r, rb):
        hidden, dtype = self.hidden, self.dtype
        xz, xr, xh = _split(xw, 3, 1)
        r_zr, r_h = _slice(r, 0, 0, 2 * hidden), _slice(r, 0, 2 * hidden, 3 * hidden)
        hzr = op("nn.dense", h, r_zr, units=None, out_dtype="")
        if rb is not None:
            hzr = op("add", hzr, _slice(rb, 0, 0, 2 * hidden))
        hz, hr = _split(hzr, 2, 1)
        z = self.act(0, op("add", xz, hz))
        rt = self.act(0, op("add", xr, hr))
        rbh = _slice(rb, 0, 2 * hidden, 3 * hidden) if rb is not None else None
        if self.linear_before_reset:
            hh = op("nn.dense", h, r_h, units=None, out_dtype="")
            if rbh is not None:
                hh = op("add", hh, rbh)
            pre = op("add", xh, op("multiply", rt, hh))
        else:
            pre = op("add", xh, op("nn.dense", op("multiply", rt, h), r_h, units=None,
                                   out_dtype=""))
            if rbh is not None:
                pre = op("add", pre, rbh)
        ht = self.act(1, pre)
        keep = op("multiply", z, h)
        return op("add", op("multiply", op("subtract", const(1.0, dtype), z), ht), keep)


_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                 "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _seq_masks(ctx: NodeContext, lens_input, seq: int, batch: int, dtype: str) -> list | None:
    """Per time step a [B, 1] bool mask of the batch entries still running (None: all full)."""
    if lens_input is None:
        return None
    lens = np.asarray(ctx.value(lens_input, "sequence_lens")).reshape(-1).astype(np.int64)
    if lens.shape != (batch,) or (lens < 0).any() or (lens > seq).any():
        raise ctx.error(f"sequence_lens must be {batch} lengths in [0, {seq}], got {lens}")
    if (lens == seq).all():
        return None
    return [const((t < lens).reshape(batch, 1), "bool") for t in range(seq)]


def _recurrent(kind: str):
    def convert(ctx: NodeContext, inputs):
        inputs = list(inputs) + [None] * (8 - len(inputs))
        x, w, r, b, lens, h0 = inputs[:6]
        c0, p = (inputs[6], inputs[7]) if kind == "LSTM" else (None, None)
        gates = _GATES[kind]
        hidden = int(ctx.attr("hidden_size", ctx.shape(r)[-1]))
        direction = ctx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"direction must be forward, reverse or bidirectional, got "
                            f"{direction!r}")
        num_dirs = 2 if direction == "bidirectional" else 1
        layout = int(ctx.attr("layout", 0))
        dtype = ctx.dtype(x)
        if layout == 1:
            x = op("transpose", x, axes=[1, 0, 2])
            h0 = None if h0 is None else op("transpose", h0, axes=[1, 0, 2])
            c0 = None if c0 is None else op("transpose", c0, axes=[1, 0, 2])
        elif layout != 0:
            raise ctx.error(f"layout must be 0 or 1, got {layout}")
        seq, batch, width = ctx.shape(x)
        wshape, rshape = ctx.shape(w), ctx.shape(r)
        if wshape != (num_dirs, gates * hidden, width) or rshape != (num_dirs, gates * hidden,
                                                                     hidden):
            raise ctx.error(f"W {wshape} / R {rshape} do not match {num_dirs} direction(s), "
                            f"{gates} gate(s), hidden_size {hidden}, input size {width}")
        acts = _activations(ctx, _DEFAULT_ACTS[kind], num_dirs)
        masks = _seq_masks(ctx, lens, seq, batch, dtype)
        zeros = const(np.zeros((batch, hidden)), dtype)
        flat_x = ctx.reshape(x, [seq * batch, width])
        ys, hs, cs = [], [], []
        for d in range(num_dirs):
            cell = _Cell(ctx, kind, acts[d], dtype, hidden)
            w_d = _pick(w, d, wshape)
            r_d = _pick(r, d, rshape)
            xw = op("nn.dense", flat_x, w_d, units=None, out_dtype="")
            rb = None
            if b is not None:
                b_d = _pick(b, d, ctx.shape(b))
                wb, rb = _slice(b_d, 0, 0, gates * hidden), \
                    _slice(b_d, 0, gates * hidden, 2 * gates * hidden)
                if kind != "GRU":  # GRU's recurrent h-gate bias sits inside the reset product
                    xw, rb = op("add", xw, op("add", wb, rb)), None
                else:
                    xw = op("add", xw, wb)
            steps = _split(ctx.reshape(xw, [seq, batch * gates * hidden]), seq, 0)
            h = zeros if h0 is None else _pick(h0, d, (num_dirs, batch, hidden))
            c = zeros if c0 is None else _pick(c0, d, (num_dirs, batch, hidden))
            peep = None
            if p is not None:
                p_d = _pick(p, d, ctx.shape(p))
                peep = [_slice(p_d, 0, k * hidden, (k + 1) * hidden) for k in range(3)]
            order = range(seq) if (direction == "forward" or d == 0 and
                                   direction != "reverse") else range(seq - 1, -1, -1)
            outs = [None] * seq
            for t in order:
                xt = ctx.reshape(steps[t], [batch, gates * hidden])
                h_new, c_new = cell.step(xt, h, c, r_d, rb, peep)
                if masks is not None:
                    outs[t] = op("where", masks[t], h_new, zeros)
                    h = op("where", masks[t], h_new, h)
                    c = c if c_new is None else op("where", masks[t], c_new, c)
                else:
                    outs[t], h, c = h_new, h_new, c if c_new is None else c_new
            ys.append(op("stack", Tuple(outs), axis=0))
            hs.append(h)
            cs.append(c)
        y = op("stack", Tuple(ys), axis=1)  # [T, D, B, H]
        y_h = op("stack", Tuple(hs), axis=0)  # [D, B, H]
        y_c = op("stack", Tuple(cs), axis=0)
        if layout == 1:
            y = op("transpose", y, axes=[2, 0, 1, 3])
            y_h = op("transpose", y_h, axes=[1, 0, 2])
            y_c = op("transpose", y_c, axes=[1, 0, 2])
        return [y, y_h, y_c] if kind == "LSTM" else [y, y_h]
    return convert


converter("RNN", since=7)(_recurrent("RNN"))
converter("GRU", since=7)(_recurrent("GRU"))
converter("LSTM", since=7)(_recurrent("LSTM"))
